//! The peering core's overlay sink in the lab: one `liqo-overlay run` per node (as a DaemonSet
//! would run them), each with its own config file, driven through the shared
//! [`FileOverlay`](liqo_netops::files::sinks::FileOverlay): files written from the core's plan
//! over the lab's base, and waits until every agent reports that it runs the exact text written
//! (`reload.applied.digest`; a refusal of it is the error at once), each agent's status read
//! inside its node.

use control::network::routes::overlay_file;
use liqo_netops::files::sinks::FileOverlay;
use liqo_peering::{OverlayPlan, plan::NodeOverlay};

use super::{Lab, LabError, daemons};
use crate::topology::Cluster;

/// How long the agents may take to apply a plan.
const APPLY_SECS: u64 = 20;

/// The lab's fixed overlay settings: the underlay is each node's `eth0`.
fn base() -> overlay::config::File {
    overlay::config::File {
        underlay_interface: Some("eth0".into()),
        ..Default::default()
    }
}

/// The config file of one agent.
pub fn config(n: &NodeOverlay) -> overlay::config::File {
    overlay_file(&base(), n)
}

/// Why a node's agent status could not be read, and where the agent's log is (the message
/// carries the cause's chain: the overlay sink shows the message alone).
#[derive(Debug, thiserror::Error)]
#[error("{} (see {})", liqo_types::chain(.cause), .log.display())]
pub(crate) struct AgentStatusError {
    cause: LabError,
    log: std::path::PathBuf,
}

/// How the lab reads a node's agent status (or why it could not).
pub(crate) type StatusOf =
    Box<dyn FnMut(&str) -> Result<overlay::status::Status, AgentStatusError> + Send>;

/// The overlay agents of a lab cluster.
pub(crate) type LabOverlay = FileOverlay<StatusOf>;

/// The overlay agents of `c` as the peering core drives them.
pub(crate) fn lab_overlay(lab: &Lab, c: &Cluster) -> LabOverlay {
    let files = lab.files(c);
    let (lab, cluster) = (lab.clone(), c.clone());
    let status: StatusOf = Box::new(move |node: &str| {
        let log = lab.files(&cluster).overlay_log(node);
        lab.node(&cluster, node)
            .and_then(|ns| daemons::overlay_status(&ns))
            .map_err(|cause| AgentStatusError { cause, log })
    });
    FileOverlay {
        base: base(),
        files: (c.nodes.iter())
            .map(|n| (n.name.to_string(), files.overlay_config(n.name.as_str())))
            .collect(),
        status,
        secs: APPLY_SECS,
    }
}

/// Writes the first configuration of every agent of `c` and starts them (the caller waits).
pub(crate) async fn start(
    lab: &Lab,
    c: &Cluster,
    plan: &OverlayPlan,
) -> Result<LabOverlay, LabError> {
    let mut sink = lab_overlay(lab, c);
    liqo_peering::Overlay::write(&mut sink, plan).await?;
    for n in &c.nodes {
        daemons::spawn_overlay(lab, c, n.name.as_str())?;
    }
    Ok(sink)
}
