//! `peer`, `unpeer` and `move_gateway` in the lab: `liqo-peering`'s orchestration on the lab's
//! implementations of its traits (the typed IPAM client dialled in the cluster's node, the
//! gateway's and the overlay agents' files and processes, the topology, the recorded
//! peerings).

use ipam::service::client::Client;
use liqo_peering::{Moved, Side};
use liqo_types::PeerView;

use super::{
    Lab, LabError,
    cluster::{LabInventory, LabRecords, find},
    daemons,
    gateway::{LabGateway, lab_gateway},
    overlay::{LabOverlay, lab_overlay},
};
use crate::topology::Cluster;

/// A lab cluster as the peering core drives it.
type LabSide<I> = Side<I, LabGateway, LabOverlay, LabInventory, LabRecords>;

fn side<I>(lab: &Lab, c: &Cluster, ipam: I) -> LabSide<I> {
    Side {
        ipam,
        gateway: lab_gateway(lab, c),
        overlay: lab_overlay(lab, c),
        inventory: LabInventory {
            lab: lab.clone(),
            cluster: c.clone(),
        },
        records: LabRecords::of(lab, c),
    }
}

async fn with_ipam(lab: &Lab, c: &Cluster) -> Result<LabSide<Client>, LabError> {
    Ok(side(lab, c, daemons::ipam_client(lab, c, 5).await?))
}

/// Peers clusters `a` and `b` (idempotent); returns how each sees the other. On failure
/// everything is as before, or the error says what could not be put back.
pub fn peer(lab: &Lab, a: &str, b: &str) -> Result<(PeerView, PeerView), LabError> {
    let op = format!("peering {a} with {b}");
    let (ca, cb) = (find(lab, a, &op)?, find(lab, b, &op)?);
    daemons::block_on(async {
        let (mut sa, mut sb) = (with_ipam(lab, ca).await?, with_ipam(lab, cb).await?);
        Ok(liqo_peering::peer(&mut sa, &mut sb).await?)
    })?
}

/// Undoes [`peer`]: each gateway drops the other, the overlays follow, the IPAM ranges are
/// released. Both sides are checked before anything changes.
pub fn unpeer(lab: &Lab, a: &str, b: &str) -> Result<(), LabError> {
    let op = format!("unpeering {a} and {b}");
    let (ca, cb) = (find(lab, a, &op)?, find(lab, b, &op)?);
    daemons::block_on(async {
        let (mut sa, mut sb) = (with_ipam(lab, ca).await?, with_ipam(lab, cb).await?);
        Ok(liqo_peering::unpeer(&mut sa, &mut sb).await?)
    })?
}

/// Moves the gateway of `cluster` to `node` (its public address follows it); a failure puts it
/// back where it was.
pub async fn move_gateway(lab: &Lab, cluster: &str, node: &str) -> Result<Moved, LabError> {
    let c = find(lab, cluster, &format!("moving the gateway of {cluster}"))?;
    Ok(liqo_peering::move_gateway(&mut side(lab, c, ()), node).await?)
}
