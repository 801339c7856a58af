//! The gRPC handlers: parse and validate, call the IPAM, map errors to status codes. A change
//! runs (and is saved) on the blocking pool, and is answered only once saved.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use tonic::{Request, Response, Status};

use super::{Service, ServiceError, proto};
use crate::{ClusterId, Error, Holder, Ipam, Peer, parse_cidr};

/// The request field an IPAM refusal is about (the whole request when none is).
fn field_of(e: &Error) -> Option<&'static str> {
    match e {
        Error::UnknownPeer(_) | Error::BadClusterId { .. } | Error::NoPeerView(_) => {
            Some("cluster_id")
        }
        Error::PeerConflict { .. } => Some("pod_cidr"),
        Error::PeerSelfOverlap { .. } => Some("external_cidr"),
        Error::ViewLength { what, .. } if what.starts_with("pod") => Some("our_pod_view"),
        Error::ViewLength { .. } => Some("our_external_view"),
        Error::NotAnIp(_) | Error::IpOutside { .. } => Some("ip"),
        Error::BadHolder(_) => Some("holder"),
        Error::InUse { .. }
        | Error::PoolOverlap(..)
        | Error::NotConfigured { .. }
        | Error::Cidr(_) => Some("cidr"),
        _ => None,
    }
}

/// A refused request, naming `field` (the request field at fault) before the problem.
fn refused(field: &str, e: impl Into<ServiceError>) -> Status {
    named(e.into(), Some(field))
}

/// A failed call; an IPAM refusal names the request field it is about.
fn status(e: ServiceError) -> Status {
    let field = match &e {
        ServiceError::Ipam(i) => field_of(i),
        ServiceError::Store(_) | ServiceError::Stopped => None,
    };
    named(e, field)
}

fn named(e: ServiceError, field: Option<&str>) -> Status {
    // A store failure carries its causes (the file, the OS error); a refusal is its message.
    let text = match &e {
        ServiceError::Store(_) => format!(
            "not saved, nothing changed here (a write whose answer was lost may still land; \
             the next change writes over it): {}",
            liqo_types::chain(&e)
        ),
        ServiceError::Ipam(_) | ServiceError::Stopped => e.to_string(),
    };
    let msg = match field {
        Some(f) => format!("{f}: {text}"),
        None => text,
    };
    match e {
        ServiceError::Store(_) => Status::internal(msg),
        ServiceError::Stopped => Status::unavailable(msg),
        ServiceError::Ipam(e) => match e {
            Error::UnknownPeer(_) => Status::not_found(msg),
            Error::PoolExhausted { .. } => Status::resource_exhausted(msg),
            Error::PeerConflict { .. }
            | Error::InUse { .. }
            | Error::LocalChange { .. }
            | Error::NoPeerView(_) => Status::failed_precondition(msg),
            Error::Corrupt(_) => Status::internal(msg),
            _ => Status::invalid_argument(msg),
        },
    }
}

fn id(s: &str) -> Result<ClusterId, Status> {
    crate::cluster_id(s).map_err(|e| refused("cluster_id", e))
}

/// A range of the request, named by its field.
fn cidr(field: &str, s: &str) -> Result<ipnet::Ipv4Net, Status> {
    parse_cidr(s).map_err(|e| refused(field, e))
}

fn ip(s: &str) -> Result<Ipv4Addr, Status> {
    s.trim()
        .parse()
        .map_err(|_| refused("ip", Error::NotAnIp(s.into())))
}

fn holder(s: &str) -> Result<Holder, Status> {
    s.parse().map_err(|e: Error| refused("holder", e))
}

fn opt(n: Option<ipnet::Ipv4Net>) -> String {
    n.map(|n| n.to_string()).unwrap_or_default()
}

/// The wire form of a peer.
pub(crate) fn peer_info(p: &Peer) -> proto::PeerInfo {
    proto::PeerInfo {
        cluster_id: p.id.to_string(),
        pod_cidr: p.pod_cidr.to_string(),
        external_cidr: p.external_cidr.to_string(),
        pod_view: p.pod_view.to_string(),
        external_view: p.external_view.to_string(),
        our_pod_view: opt(p.our_pod_view),
        our_external_view: opt(p.our_external_view),
    }
}

/// The wire form of the whole IPAM (without where it is kept: see [`Service::listed`]).
pub(crate) fn list(ipam: &Ipam) -> proto::ListResponse {
    let c = ipam.config();
    let s = |v: &[ipnet::Ipv4Net]| v.iter().map(ToString::to_string).collect();
    proto::ListResponse {
        pod_cidr: c.pod_cidr.to_string(),
        service_cidr: c.service_cidr.to_string(),
        external_cidr: ipam.external_cidr().to_string(),
        pools: s(&c.pools),
        reserved: s(&c.reserved),
        peers: ipam.peers().map(peer_info).collect(),
        endpoints: ipam
            .endpoints()
            .map(|e| proto::Endpoint {
                ip: e.ip.to_string(),
                external_ip: e.external_ip.to_string(),
                peers: e.peers.keys().map(ToString::to_string).collect(),
                holds: e
                    .peers
                    .iter()
                    .flat_map(|(id, holders)| {
                        holders.iter().map(move |h| proto::Hold {
                            cluster_id: id.to_string(),
                            holder: h.as_str().to_owned(),
                        })
                    })
                    .collect(),
            })
            .collect(),
        usage: ipam
            .pool_usage()
            .into_iter()
            .map(|(pool, used, total)| proto::PoolUsage {
                pool: pool.to_string(),
                used,
                total,
            })
            .collect(),
        store: String::new(),
    }
}

impl Service {
    /// `l` with where the state is kept.
    fn listed(&self, l: proto::ListResponse) -> proto::ListResponse {
        proto::ListResponse {
            store: self.location().to_owned(),
            ..l
        }
    }

    /// Refuses an API change of a list that a flag or the config file sets.
    fn unmanaged(&self, what: &str, by: Option<String>) -> Result<(), Status> {
        match by {
            Some(by) => Err(Status::failed_precondition(format!(
                "cidr: the {what} are set by {by}; change them there (a change here would be replaced from it)"
            ))),
            None => Ok(()),
        }
    }

    fn observe<T>(&self, method: &'static str, r: Result<T, ServiceError>) -> Result<T, Status> {
        self.metrics.request(method, r.is_ok());
        r.map_err(status)
    }

    /// A reserved subnet or pool added or removed at run time (refused while the settings
    /// manage them), answered with the new listing.
    async fn subnet_change(
        &self,
        method: &'static str,
        which: Subnets,
        req: Request<proto::Subnet>,
        change: fn(&mut Ipam, Ipv4Net) -> Result<(), Error>,
    ) -> Result<Response<proto::ListResponse>, Status> {
        let net = cidr("cidr", &req.into_inner().cidr)?;
        let managed = self.managed();
        match which {
            Subnets::Reserved => self.unmanaged("reserved subnets", managed.reserved)?,
            Subnets::Pools => self.unmanaged("pools", managed.pools)?,
        }
        let out = self
            .mutate_async(move |ipam| change(ipam, net).map(|()| list(ipam)))
            .await;
        self.observe(method, out)
            .map(|l| Response::new(self.listed(l)))
    }
}

/// The run-time changeable lists.
#[derive(Debug, Clone, Copy)]
enum Subnets {
    Reserved,
    Pools,
}

#[tonic::async_trait]
impl proto::ipam_server::Ipam for Service {
    async fn remap(
        &self,
        req: Request<proto::RemapRequest>,
    ) -> Result<Response<proto::PeerInfo>, Status> {
        let r = req.into_inner();
        let (peer, pod, ext) = (
            id(&r.cluster_id)?,
            cidr("pod_cidr", &r.pod_cidr)?,
            cidr("external_cidr", &r.external_cidr)?,
        );
        let out = self
            .mutate_async(move |ipam| {
                ipam.acquire(&peer, pod, ext)?;
                Ok(peer_info(ipam.peer(&peer)?))
            })
            .await;
        self.observe("remap", out).map(Response::new)
    }

    async fn release(
        &self,
        req: Request<proto::PeerRef>,
    ) -> Result<Response<proto::PeerInfo>, Status> {
        let peer = id(&req.into_inner().cluster_id)?;
        let out = self
            .mutate_async(move |ipam| ipam.release(&peer).map(|p| peer_info(&p)))
            .await;
        self.observe("release", out).map(Response::new)
    }

    async fn set_peer_view(
        &self,
        req: Request<proto::SetPeerViewRequest>,
    ) -> Result<Response<proto::PeerInfo>, Status> {
        let r = req.into_inner();
        let (peer, pod, ext) = (
            id(&r.cluster_id)?,
            cidr("our_pod_view", &r.our_pod_view)?,
            cidr("our_external_view", &r.our_external_view)?,
        );
        let out = self
            .mutate_async(move |ipam| {
                ipam.set_peer_view(&peer, pod, ext)?;
                Ok(peer_info(ipam.peer(&peer)?))
            })
            .await;
        self.observe("set_peer_view", out).map(Response::new)
    }

    async fn clear_peer_view(
        &self,
        req: Request<proto::PeerRef>,
    ) -> Result<Response<proto::PeerInfo>, Status> {
        let peer = id(&req.into_inner().cluster_id)?;
        let out = self
            .mutate_async(move |ipam| {
                ipam.clear_peer_view(&peer)?;
                Ok(peer_info(ipam.peer(&peer)?))
            })
            .await;
        self.observe("clear_peer_view", out).map(Response::new)
    }

    async fn map_ip(
        &self,
        req: Request<proto::MapIpRequest>,
    ) -> Result<Response<proto::MapIpResponse>, Status> {
        let r = req.into_inner();
        let (peer, addr) = (id(&r.cluster_id)?, ip(&r.ip)?);
        let holder = holder(&r.holder)?;
        let dir = proto::Direction::try_from(r.direction).map_err(|_| {
            Status::invalid_argument(format!("direction: unknown direction {}", r.direction))
        })?;
        let out = self
            .mutate_async(move |ipam| match dir {
                proto::Direction::RemoteToLocal => {
                    ipam.remote_to_local(&peer, addr)
                        .map(|a| proto::MapIpResponse {
                            ip: a.to_string(),
                            external_ip: String::new(),
                        })
                }
                proto::Direction::LocalToPeer => {
                    ipam.local_to_peer(&peer, addr)
                        .map(|a| proto::MapIpResponse {
                            ip: a.to_string(),
                            external_ip: String::new(),
                        })
                }
                proto::Direction::Endpoint => {
                    ipam.map_endpoint(&peer, addr, &holder)
                        .map(|m| proto::MapIpResponse {
                            ip: m.seen_by_peer.to_string(),
                            external_ip: m.external_ip.map(|a| a.to_string()).unwrap_or_default(),
                        })
                }
            })
            .await;
        self.observe("map_ip", out).map(Response::new)
    }

    async fn unmap_endpoint(
        &self,
        req: Request<proto::MapIpRequest>,
    ) -> Result<Response<proto::Empty>, Status> {
        let r = req.into_inner();
        let (peer, addr, holder) = (id(&r.cluster_id)?, ip(&r.ip)?, holder(&r.holder)?);
        let out = self
            .mutate_async(move |ipam| ipam.unmap_endpoint(&peer, addr, &holder))
            .await;
        self.observe("unmap_endpoint", out)
            .map(|()| Response::new(proto::Empty {}))
    }

    async fn list(
        &self,
        _: Request<proto::Empty>,
    ) -> Result<Response<proto::ListResponse>, Status> {
        self.metrics.request("list", true);
        Ok(Response::new(self.listed(self.read(list))))
    }

    async fn add_reserved(
        &self,
        req: Request<proto::Subnet>,
    ) -> Result<Response<proto::ListResponse>, Status> {
        self.subnet_change("add_reserved", Subnets::Reserved, req, Ipam::add_reserved)
            .await
    }

    async fn remove_reserved(
        &self,
        req: Request<proto::Subnet>,
    ) -> Result<Response<proto::ListResponse>, Status> {
        self.subnet_change(
            "remove_reserved",
            Subnets::Reserved,
            req,
            Ipam::remove_reserved,
        )
        .await
    }

    async fn add_pool(
        &self,
        req: Request<proto::Subnet>,
    ) -> Result<Response<proto::ListResponse>, Status> {
        self.subnet_change("add_pool", Subnets::Pools, req, Ipam::add_pool)
            .await
    }

    async fn remove_pool(
        &self,
        req: Request<proto::Subnet>,
    ) -> Result<Response<proto::ListResponse>, Status> {
        self.subnet_change("remove_pool", Subnets::Pools, req, Ipam::remove_pool)
            .await
    }
}
