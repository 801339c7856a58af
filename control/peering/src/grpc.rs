//! [`Ipam`] over the typed gRPC client of `liqo-ipam`, whatever its transport (a plain
//! channel, a channel with a token interceptor, a channel dialled inside a network namespace),
//! and [`external_of`], the one reader of the service's `List` answer about our external CIDR
//! and its endpoint mappings.

use liqo_types::{Cidr, ClusterId, EndpointMapping, FieldError, field};
use tonic::{
    Code,
    client::GrpcService,
    codegen::{Body, Bytes, StdError},
};

use ::ipam::service::proto::{self, ipam_client::IpamClient};

use crate::ipam::{Ipam, IpamPeer, Ranges};

/// Why a call to the IPAM service failed.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// The service refused or could not be reached.
    #[error("liqo-ipam {call}: {message} ({code:?})")]
    Call {
        /// The call.
        call: &'static str,
        /// The status code.
        code: Code,
        /// The service's message.
        message: String,
    },
    /// The service answered with a value that is not a CIDR.
    #[error("liqo-ipam {call}: field {field} of the answer")]
    Answer {
        /// The call.
        call: &'static str,
        /// The field.
        field: &'static str,
        /// The cause.
        #[source]
        source: liqo_types::InvalidCidr,
    },
}

fn call(name: &'static str) -> impl FnOnce(tonic::Status) -> GrpcError {
    move |s| GrpcError::Call {
        call: name,
        code: s.code(),
        message: s.message().to_owned(),
    }
}

fn parse(call: &'static str, field: &'static str, s: &str) -> Result<Cidr, GrpcError> {
    s.parse().map_err(|source| GrpcError::Answer {
        call,
        field,
        source,
    })
}

fn peer_of(call: &'static str, p: &proto::PeerInfo) -> Result<IpamPeer, GrpcError> {
    let r = |a: &'static str, b: &'static str, x: &str, y: &str| -> Result<Ranges, GrpcError> {
        Ok(Ranges {
            pods: parse(call, a, x)?,
            external: parse(call, b, y)?,
        })
    };
    let seen_there = if p.our_pod_view.is_empty() || p.our_external_view.is_empty() {
        None
    } else {
        Some(r(
            "our_pod_view",
            "our_external_view",
            &p.our_pod_view,
            &p.our_external_view,
        )?)
    };
    Ok(IpamPeer {
        announced: r("pod_cidr", "external_cidr", &p.pod_cidr, &p.external_cidr)?,
        seen_here: r("pod_view", "external_view", &p.pod_view, &p.external_view)?,
        seen_there,
    })
}

impl<T> Ipam for IpamClient<T>
where
    T: GrpcService<tonic::body::Body> + Send,
    T::Future: Send,
    T::Error: Into<StdError>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    type Error = GrpcError;

    async fn external_cidr(&mut self) -> Result<Cidr, GrpcError> {
        let l = self.list(proto::Empty {}).await.map_err(call("list"))?;
        parse("list", "external_cidr", &l.into_inner().external_cidr)
    }

    async fn peer(&mut self, peer: &ClusterId) -> Result<Option<IpamPeer>, GrpcError> {
        let l = self.list(proto::Empty {}).await.map_err(call("list"))?;
        l.into_inner()
            .peers
            .iter()
            .find(|p| p.cluster_id == peer.as_str())
            .map(|p| peer_of("list", p))
            .transpose()
    }

    async fn remap(&mut self, peer: &ClusterId, a: Ranges) -> Result<Ranges, GrpcError> {
        let req = proto::RemapRequest {
            cluster_id: peer.to_string(),
            pod_cidr: a.pods.to_string(),
            external_cidr: a.external.to_string(),
        };
        let p = IpamClient::remap(self, req)
            .await
            .map_err(call("remap"))?
            .into_inner();
        Ok(peer_of("remap", &p)?.seen_here)
    }

    async fn set_peer_view(&mut self, peer: &ClusterId, v: Ranges) -> Result<(), GrpcError> {
        let req = proto::SetPeerViewRequest {
            cluster_id: peer.to_string(),
            our_pod_view: v.pods.to_string(),
            our_external_view: v.external.to_string(),
        };
        IpamClient::set_peer_view(self, req)
            .await
            .map_err(call("set-peer-view"))?;
        Ok(())
    }

    async fn clear_peer_view(&mut self, peer: &ClusterId) -> Result<bool, GrpcError> {
        let req = proto::PeerRef {
            cluster_id: peer.to_string(),
        };
        IpamClient::clear_peer_view(self, req)
            .await
            .map_err(call("clear-peer-view"))?;
        Ok(true)
    }

    async fn release(&mut self, peer: &ClusterId) -> Result<(), GrpcError> {
        let req = proto::PeerRef {
            cluster_id: peer.to_string(),
        };
        match IpamClient::release(self, req).await {
            Ok(_) => Ok(()),
            // Released already: what was asked for holds.
            Err(s) if s.code() == Code::NotFound => Ok(()),
            Err(s) => Err(call("release")(s)),
        }
    }
}

/// What the IPAM's `List` says of our external CIDR: the CIDR (`None`: not allocated yet) and
/// the endpoints mapped in it (a real address, its external address, the peers that reach it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct External {
    /// `List.external_cidr`.
    pub cidr: Option<Cidr>,
    /// `List.endpoints`.
    pub endpoints: Vec<EndpointMapping>,
}

/// Reads a `List` answer's external CIDR and endpoint mappings, typed: a value that does not
/// parse is named by its field (`external_cidr`, `endpoints[i].ip`, ...). The one reader of
/// that answer (the gateway operator and the lab use it).
pub fn external_of(l: &proto::ListResponse) -> Result<External, FieldError> {
    let cidr = match l.external_cidr.as_str() {
        "" => None,
        c => Some(field::parse("external_cidr", c)?),
    };
    let mut endpoints = Vec::with_capacity(l.endpoints.len());
    for (i, e) in l.endpoints.iter().enumerate() {
        let f = |x: &str| format!("endpoints[{i}].{x}");
        endpoints.push(EndpointMapping {
            ip: field::parse(&f("ip"), &e.ip)?,
            external_ip: field::parse(&f("external_ip"), &e.external_ip)?,
            peers: (e.peers.iter().enumerate())
                .map(|(j, p)| field::parse(&f(&format!("peers[{j}]")), p))
                .collect::<Result<_, _>>()?,
        });
    }
    Ok(External { cidr, endpoints })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_answer_is_read_typed_naming_a_bad_field() {
        let mut l = proto::ListResponse {
            external_cidr: "10.70.0.0/16".into(),
            endpoints: vec![proto::Endpoint {
                holds: Vec::new(),
                ip: "172.18.1.2".into(),
                external_ip: "10.70.0.1".into(),
                peers: vec!["rome".into()],
            }],
            ..Default::default()
        };
        let got = external_of(&l).unwrap();
        assert_eq!(got.cidr.unwrap().to_string(), "10.70.0.0/16");
        assert_eq!(got.endpoints[0].ip.to_string(), "172.18.1.2");
        assert_eq!(got.endpoints[0].peers[0].as_str(), "rome");
        l.endpoints[0].peers[0] = "Rome!".into();
        assert_eq!(external_of(&l).unwrap_err().field, "endpoints[0].peers[0]");
        l.endpoints[0].external_ip = "10.70.0".into();
        assert_eq!(
            external_of(&l).unwrap_err().field,
            "endpoints[0].external_ip"
        );
        l.external_cidr = "10.70.0.1/16".into();
        let e = external_of(&l).unwrap_err();
        assert!(
            e.field == "external_cidr" && e.problem.contains("host bits"),
            "{e}"
        );
        assert_eq!(
            external_of(&proto::ListResponse::default()).unwrap(),
            External::default()
        );
    }

    #[test]
    fn peer_info_is_read_typed_and_a_bad_answer_names_its_field() {
        let mut p = proto::PeerInfo {
            cluster_id: "milan".into(),
            pod_cidr: "10.200.0.0/16".into(),
            external_cidr: "10.70.0.0/16".into(),
            pod_view: "10.71.0.0/16".into(),
            external_view: "10.72.0.0/16".into(),
            our_pod_view: String::new(),
            our_external_view: String::new(),
        };
        let got = peer_of("list", &p).unwrap();
        assert_eq!(got.seen_here.pods.to_string(), "10.71.0.0/16");
        assert_eq!(got.seen_there, None);
        p.our_pod_view = "10.50.0.0/16".into();
        p.our_external_view = "10.51.0.0/16".into();
        assert_eq!(
            peer_of("list", &p)
                .unwrap()
                .seen_there
                .unwrap()
                .external
                .to_string(),
            "10.51.0.0/16"
        );
        p.pod_view = "10.71.0.1/16".into();
        let e = peer_of("list", &p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "liqo-ipam list: field pod_view of the answer"
        );
    }
}

#[cfg(test)]
mod service_tests {
    use ::ipam::{
        Config,
        service::{Overrides, Service, proto::ipam_server::IpamServer},
        store::MemStore,
    };
    use liqo_types::ClusterId;

    use super::*;
    use crate::ipam::{announce, decide, record, restore};

    fn client() -> IpamClient<IpamServer<Service>> {
        let cfg = Config::new(
            "10.200.0.0/16".parse().unwrap(),
            "10.96.0.0/12".parse().unwrap(),
        );
        let s = Service::open(cfg, Overrides::default(), Box::new(MemStore::default())).unwrap();
        IpamClient::new(IpamServer::new(s))
    }

    #[test]
    fn the_secured_client_is_an_ipam_too() {
        fn is_ipam<T: Ipam>() {}
        // `liqo-ipam`'s own client (TLS, bearer token) drives the exchange as it is.
        is_ipam::<::ipam::service::client::Client>();
        is_ipam::<IpamClient<tonic::transport::Channel>>();
    }

    #[tokio::test]
    async fn the_exchange_runs_over_the_service_api() {
        let (mut a, mut b) = (client(), client());
        let (rome, milan): (ClusterId, ClusterId) =
            ("rome".parse().unwrap(), "milan".parse().unwrap());
        let pod: Cidr = "10.200.0.0/16".parse().unwrap();
        let (ann_a, ann_b) = (
            announce(&mut a, pod).await.unwrap(),
            announce(&mut b, pod).await.unwrap(),
        );
        assert_eq!(Ipam::peer(&mut a, &milan).await.unwrap(), None);
        let da = decide(&mut a, &milan, ann_b).await.unwrap();
        let db = decide(&mut b, &rome, ann_a).await.unwrap();
        let va = record(&mut a, &milan, da, db).await.unwrap();
        let vb = record(&mut b, &rome, db, da).await.unwrap();
        assert_eq!(vb, va.mirrored());
        assert!(!va.remote_pods.overlaps(&pod), "{va:?}");
        let held = Ipam::peer(&mut a, &milan).await.unwrap().unwrap();
        assert_eq!(held.seen_there, Some(db));
        // Releasing is idempotent over the API, and a release is seen.
        restore(&mut a, &milan, None).await.unwrap();
        assert_eq!(Ipam::peer(&mut a, &milan).await.unwrap(), None);
        Ipam::release(&mut a, &milan).await.unwrap();
        // A refusal carries the service's message.
        let e = Ipam::set_peer_view(&mut a, &milan, db)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("liqo-ipam set-peer-view:") && e.contains("unknown peer milan"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_view_recorded_in_a_failed_attempt_is_forgotten_over_grpc() {
        let mut a = client();
        let milan: ClusterId = "milan".parse().unwrap();
        let pod: Cidr = "10.200.0.0/16".parse().unwrap();
        let ann = announce(&mut a, pod).await.unwrap();
        // Held without a view of us (an earlier exchange that stopped after step 1).
        let here = decide(&mut a, &milan, ann).await.unwrap();
        let before = Ipam::peer(&mut a, &milan).await.unwrap();
        assert_eq!(before.unwrap().seen_there, None);
        let there = Ranges {
            pods: "10.71.0.0/16".parse().unwrap(),
            external: "10.72.0.0/16".parse().unwrap(),
        };
        record(&mut a, &milan, here, there).await.unwrap();
        assert_eq!(
            Ipam::peer(&mut a, &milan)
                .await
                .unwrap()
                .unwrap()
                .seen_there,
            Some(there)
        );
        restore(&mut a, &milan, before).await.unwrap();
        assert_eq!(Ipam::peer(&mut a, &milan).await.unwrap(), before);
        // Putting back a state that holds already is a no-op (restore is idempotent).
        restore(&mut a, &milan, before).await.unwrap();
        assert_eq!(Ipam::peer(&mut a, &milan).await.unwrap(), before);
    }
}
