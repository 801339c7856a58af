//! What a lab cluster's IPAM says of its external CIDR ([`external`]): the CIDR and its
//! endpoint mappings, which the gateway's file carries.

use ipam::service::proto;
use liqo_peering::grpc::{External, external_of};

use crate::{
    lab::{Lab, LabError, daemons},
    topology::Cluster,
};

/// How long the IPAM service may take to answer (it may just have been started).
pub(super) const IPAM_SECS: u64 = 20;

/// Asks `c`'s IPAM for its external CIDR and endpoint mappings (read by
/// [`liqo_peering::grpc::external_of`]); an IPAM without an external CIDR is an error here (the
/// lab's IPAM allocates it when it starts).
pub(crate) async fn external(lab: &Lab, c: &Cluster) -> Result<External, LabError> {
    let mut ipam = daemons::ipam_client(lab, c, IPAM_SECS).await?;
    let l = ipam
        .list(proto::Empty {})
        .await
        .map_err(|e| LabError::build(format!("listing {}'s IPAM", c.name), e))?;
    let what = || format!("reading {}'s IPAM list", c.name);
    let e = external_of(&l.into_inner()).map_err(|e| LabError::build(what(), e))?;
    if e.cidr.is_none() {
        return Err(LabError::build(what(), "it has no external CIDR"));
    }
    Ok(e)
}
