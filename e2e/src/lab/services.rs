//! Starting a cluster's services when the lab comes up: the IPAM service and the gateway on
//! `nodes[0]` (the gateway with no peer yet), an overlay agent on every node, each waited for.

use std::fs;

use liqo_peering::{Gateway as _, Overlay as _, Peerings, plan};

use super::{
    Lab, LabError,
    cluster::{self, overlay_nodes},
    daemons,
    gateway::lab_gateway,
    overlay,
};
use crate::topology::Cluster;

/// Starts the services of `c` and waits until all answer.
pub(crate) async fn start(lab: &Lab, c: &Cluster) -> Result<(), LabError> {
    let dir = lab.files(c).dir().to_owned();
    fs::create_dir_all(&dir)
        .map_err(|e| LabError::build(format!("creating {}", dir.display()), e))?;
    daemons::start_ipam(lab, c)?;

    let node = c.gateway().name.to_string();
    let mut gw = lab_gateway(lab, c);
    gw.write(&[]).await?;
    gw.start(&node).await?;

    let plan = plan::overlay(&cluster::id(c), &overlay_nodes(c), &node, &Peerings::new())
        .map_err(|e| LabError::build(format!("planning the overlay of {}", c.name), e))?;
    let mut agents = overlay::start(lab, c, &plan).await?;
    agents.wait_applied(&plan).await?;
    daemons::ipam_client(lab, c, 20).await?;
    Ok(())
}
