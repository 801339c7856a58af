//! Endpoint mappings in the lab: a cluster exposes one of its addresses (a node, a host-network
//! process) to a peer through its external CIDR with its IPAM (`MapIp`, direction `ENDPOINT`),
//! and its gateway's file is rewritten with what the IPAM then lists (the peers from the
//! cluster's recorded peerings, as the peering core writes them), waited for until the gateway
//! runs it.

use std::net::Ipv4Addr;

use ipam::service::proto;
use liqo_peering::{Gateway as _, plan};
use liqo_types::{Cidr, EndpointMapping};

use super::LabGateway;
use crate::{
    lab::{
        Lab, LabError,
        cluster::{LabRecords, find, id},
        daemons::{self, Poll, runs, wait_for},
    },
    topology::Cluster,
};

/// How long the IPAM service may take to answer (it may just have been started).
const IPAM_SECS: u64 = 20;
/// How long a reload may take.
const RELOAD_SECS: u64 = 20;

/// What `c`'s IPAM says about its external CIDR: the CIDR and the endpoints mapped in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct External {
    /// The external CIDR in use.
    pub(crate) cidr: Cidr,
    /// The endpoint mappings, as `List` gives them.
    pub(crate) endpoints: Vec<EndpointMapping>,
}

/// Reads a `List` answer's external CIDR and endpoints, naming a bad field.
pub(crate) fn external_of(l: &proto::ListResponse) -> Result<External, LabError> {
    let bad = |field: String, e: &dyn std::fmt::Display| {
        LabError::build("reading the IPAM's list", format!("{field}: {e}"))
    };
    let cidr = l
        .external_cidr
        .parse()
        .map_err(|e| bad("external_cidr".into(), &e))?;
    let mut endpoints = Vec::with_capacity(l.endpoints.len());
    for (i, e) in l.endpoints.iter().enumerate() {
        let f = |name: &str| format!("endpoints[{i}].{name}");
        endpoints.push(EndpointMapping {
            ip: e.ip.parse().map_err(|x| bad(f("ip"), &x))?,
            external_ip: e
                .external_ip
                .parse()
                .map_err(|x| bad(f("external_ip"), &x))?,
            peers: (e.peers.iter())
                .map(|p| p.parse().map_err(|x| bad(f("peers"), &x)))
                .collect::<Result<_, _>>()?,
        });
    }
    Ok(External { cidr, endpoints })
}

/// Asks `c`'s IPAM for its external CIDR and endpoint mappings.
pub(crate) async fn external(lab: &Lab, c: &Cluster) -> Result<External, LabError> {
    let mut ipam = daemons::ipam_client(lab, c, IPAM_SECS).await?;
    let l = ipam
        .list(proto::Empty {})
        .await
        .map_err(|e| LabError::build(format!("listing {}'s IPAM", c.name), e))?;
    external_of(&l.into_inner())
}

/// Rewrites `c`'s gateway file from its recorded peerings and its IPAM's current list, and
/// waits until the gateway runs it (a refusal is the error).
async fn rewrite(lab: &Lab, c: &Cluster) -> Result<(), LabError> {
    let peers = plan::gateway_peers(&LabRecords::of(lab, c).read()?);
    let mut gw = LabGateway {
        lab: lab.clone(),
        cluster: c.clone(),
        written: None,
    };
    gw.write(&peers).await?;
    let written = gw.written.clone().expect("written just now");
    let ns = gw.node()?;
    wait_for(
        RELOAD_SECS,
        &format!("{}'s gateway to run its new endpoint mappings", c.name),
        || match daemons::gateway_status(&ns) {
            Ok(s) => runs(&s.reload, &written),
            Err(e) => Poll::NotYet(liqo_types::chain(&e)),
        },
    )
    .await
}

/// The IPAM request about `ip` for `peer`.
fn request(peer: &Cluster, ip: Ipv4Addr) -> proto::MapIpRequest {
    proto::MapIpRequest {
        cluster_id: id(peer).to_string(),
        ip: ip.to_string(),
        direction: proto::Direction::Endpoint.into(),
    }
}

/// Lets `peer`'s pods reach `ip`, an address of `cluster` that is not a pod (a node, a
/// host-network process), through `cluster`'s external CIDR; returns the address they reach it
/// at (in `peer`'s view of that CIDR). The clusters must be peered.
pub fn map_endpoint(
    lab: &Lab,
    cluster: &str,
    peer: &str,
    ip: Ipv4Addr,
) -> Result<Ipv4Addr, LabError> {
    let op = format!("mapping {ip} of {cluster} for {peer}");
    let (c, p) = (find(lab, cluster, &op)?, find(lab, peer, &op)?);
    daemons::block_on(async {
        let mut ipam = daemons::ipam_client(lab, c, IPAM_SECS).await?;
        let r = ipam
            .map_ip(request(p, ip))
            .await
            .map_err(|e| LabError::build(op.clone(), e))?
            .into_inner();
        if r.external_ip.is_empty() {
            return Err(LabError::build(
                op.clone(),
                format!("{ip} is a pod or external address of {cluster}, not an endpoint"),
            ));
        }
        let seen: Ipv4Addr = r.ip.parse().map_err(|e| {
            LabError::build(op.clone(), format!("the IPAM answered {:?}: {e}", r.ip))
        })?;
        rewrite(lab, c).await?;
        Ok(seen)
    })?
}

/// Undoes [`map_endpoint`]: `peer` no longer reaches `ip` (the IPAM frees its external address
/// when no peer uses it any more).
pub fn unmap_endpoint(lab: &Lab, cluster: &str, peer: &str, ip: Ipv4Addr) -> Result<(), LabError> {
    let op = format!("unmapping {ip} of {cluster} for {peer}");
    let (c, p) = (find(lab, cluster, &op)?, find(lab, peer, &op)?);
    daemons::block_on(async {
        let mut ipam = daemons::ipam_client(lab, c, IPAM_SECS).await?;
        ipam.unmap_endpoint(request(p, ip))
            .await
            .map_err(|e| LabError::build(op.clone(), e))?;
        rewrite(lab, c).await
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_answer_is_read_typed_naming_a_bad_field() {
        let mut l = proto::ListResponse {
            external_cidr: "10.70.0.0/16".into(),
            endpoints: vec![proto::Endpoint {
                ip: "172.18.1.2".into(),
                external_ip: "10.70.0.1".into(),
                peers: vec!["rome".into()],
            }],
            ..Default::default()
        };
        let got = external_of(&l).unwrap();
        assert_eq!(got.cidr.to_string(), "10.70.0.0/16");
        assert_eq!(got.endpoints[0].ip.to_string(), "172.18.1.2");
        assert_eq!(got.endpoints[0].peers[0].as_str(), "rome");
        l.endpoints[0].external_ip = "10.70.0".into();
        let e = liqo_types::chain(&external_of(&l).unwrap_err());
        assert!(e.contains("endpoints[0].external_ip"), "{e}");
        l.external_cidr = "10.70.0.1/16".into();
        let e = liqo_types::chain(&external_of(&l).unwrap_err());
        assert!(
            e.contains("external_cidr") && e.contains("host bits"),
            "{e}"
        );
    }
}
