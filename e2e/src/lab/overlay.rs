//! The peering core's overlay sink in the lab: one `liqo-overlay run` per node (as a DaemonSet
//! would run them), each with its own config file, written from the core's plan; waits until
//! every agent reports that it runs the exact text written (`reload.applied.digest`), and
//! reports a refusal of it at once.

use liqo_peering::{OverlayPlan, plan::NodeOverlay};

use super::{
    Lab, LabError,
    daemons::{self, Poll, wait_for},
};
use crate::topology::Cluster;

/// How long the agents may take to apply a plan.
const APPLY_SECS: u64 = 20;

/// The config file of one agent.
pub fn config(n: &NodeOverlay) -> overlay::config::File {
    overlay::config::File {
        node: n.node.clone(),
        gateway: n.gateway_node.clone(),
        nodes: n.nodes.clone(),
        remote_cidrs: n.remote_cidrs.clone(),
        underlay_interface: Some("eth0".into()),
        ..Default::default()
    }
}

/// The overlay agents of a lab cluster.
pub(crate) struct LabOverlay {
    pub(crate) lab: Lab,
    pub(crate) cluster: Cluster,
}

/// The exact text of one agent's config file.
fn text(n: &NodeOverlay) -> Result<String, LabError> {
    serde_saphyr::to_string(&config(n))
        .map_err(|e| LabError::build("encoding an overlay config", e))
}

/// One look at an agent's status: whether it runs the text of digest `want` (a refusal of that
/// text is the error at once).
pub(crate) fn look(s: Result<overlay::status::Status, LabError>, want: &str) -> Poll<()> {
    match s {
        Ok(s) => daemons::runs(&s.reload, want),
        Err(e) => Poll::NotYet(e.to_string()),
    }
}

impl liqo_peering::Overlay for LabOverlay {
    type Error = LabError;

    async fn write(&mut self, plan: &OverlayPlan) -> Result<(), LabError> {
        let files = self.lab.files(&self.cluster);
        for n in plan.per_node() {
            daemons::write_config(&files.overlay_config(&n.node), &text(&n)?)?;
        }
        Ok(())
    }

    async fn wait_applied(&mut self, plan: &OverlayPlan) -> Result<(), LabError> {
        let (lab, c) = (&self.lab, &self.cluster);
        for n in plan.per_node() {
            let want = liqo_daemon::digest(&text(&n)?);
            let ns = lab.node(c, &n.node)?;
            let log = lab.files(c).overlay_log(&n.node);
            wait_for(
                APPLY_SECS,
                &format!(
                    "the overlay agent on {}/{} (see {})",
                    c.name,
                    n.node,
                    log.display()
                ),
                || look(daemons::overlay_status(&ns), &want),
            )
            .await?;
        }
        Ok(())
    }
}

/// Writes the first configuration of every agent of `c` and starts them (the caller waits).
pub(crate) async fn start(
    lab: &Lab,
    c: &Cluster,
    plan: &OverlayPlan,
) -> Result<LabOverlay, LabError> {
    let mut sink = LabOverlay {
        lab: lab.clone(),
        cluster: c.clone(),
    };
    liqo_peering::Overlay::write(&mut sink, plan).await?;
    for n in &c.nodes {
        daemons::spawn_overlay(lab, c, n.name.as_str())?;
    }
    Ok(sink)
}
