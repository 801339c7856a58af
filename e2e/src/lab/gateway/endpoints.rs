//! Endpoint mappings in the lab: a cluster exposes one of its addresses (a node, a host-network
//! process) to a peer through its external CIDR with its IPAM (`MapIp`, direction `ENDPOINT`),
//! and its gateway's file is rewritten with what the IPAM then lists (the peers from the
//! cluster's recorded peerings, as the peering core writes them), waited for until the gateway
//! runs it.

use std::net::Ipv4Addr;

use ipam::service::proto;
use liqo_peering::{Gateway as _, plan};

use super::{external::IPAM_SECS, sink::lab_gateway};
use crate::{
    lab::{
        Lab, LabError,
        cluster::{LabRecords, find, id},
        daemons::{self, Poll, runs, wait_for},
    },
    topology::Cluster,
};

/// How long a reload may take.
const RELOAD_SECS: u64 = 20;

/// Rewrites `c`'s gateway file from its recorded peerings and its IPAM's current list, and
/// waits until the gateway runs it (a refusal is the error).
async fn rewrite(lab: &Lab, c: &Cluster) -> Result<(), LabError> {
    let peers = plan::gateway_peers(&LabRecords::of(lab, c).read()?);
    let mut gw = lab_gateway(lab, c);
    gw.write(&peers).await?;
    let written = gw.written.clone().expect("written just now");
    let ns = gw.host.node()?;
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
        // The lab's own holds (a node, a host-network process).
        holder: "liqo-lab".into(),
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
