//! What went wrong in an operation: refused before anything changed, or a step that failed
//! (after which every side was put back, or the error says what could not be).

use std::fmt;

use liqo_types::ClusterId;

use crate::plan::Refusal;

/// A boxed cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A step of an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Reading the cluster's inventory.
    Inventory,
    /// Reading the recorded peerings.
    LoadRecords,
    /// Reading the IPAM's external CIDR.
    ExternalCidr,
    /// Reading what the IPAM holds for a peer.
    ReadIpam(ClusterId),
    /// Remapping a peer's ranges.
    Remap(ClusterId),
    /// Recording how a peer sees us.
    SetPeerView(ClusterId),
    /// Forgetting how a peer sees us (undoing the first record of it).
    ClearPeerView(ClusterId),
    /// Releasing a peer's ranges.
    Release(ClusterId),
    /// Acquiring a peer's ranges again (undoing a release).
    Reacquire(ClusterId),
    /// Reading the gateway's public key.
    PublicKey,
    /// Building the plan.
    Plan,
    /// Writing the gateway's peer list.
    WriteGateway,
    /// Waiting for a session with a peer.
    Handshake(ClusterId),
    /// Waiting for the gateway to drop a peer.
    PeerGone(ClusterId),
    /// Writing the overlay agents' configuration.
    WriteOverlay,
    /// Waiting for every overlay agent to apply it.
    ApplyOverlay,
    /// Recording the peerings.
    SaveRecords,
    /// Stopping the gateway.
    StopGateway,
    /// Starting the gateway on a node.
    StartGateway(String),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Inventory => f.write_str("reading the inventory"),
            Step::LoadRecords => f.write_str("reading the recorded peerings"),
            Step::ExternalCidr => f.write_str("reading the IPAM's external CIDR"),
            Step::ReadIpam(p) => write!(f, "reading the IPAM's entry for {p}"),
            Step::Remap(p) => write!(f, "remapping {p}'s CIDRs in the IPAM"),
            Step::SetPeerView(p) => write!(f, "recording in the IPAM how {p} sees us"),
            Step::ClearPeerView(p) => write!(f, "forgetting in the IPAM how {p} sees us"),
            Step::Release(p) => write!(f, "releasing {p}'s ranges in the IPAM"),
            Step::Reacquire(p) => write!(f, "acquiring {p}'s ranges again in the IPAM"),
            Step::PublicKey => f.write_str("reading the gateway's public key"),
            Step::Plan => f.write_str("planning the overlay"),
            Step::WriteGateway => f.write_str("writing the gateway's peers"),
            Step::Handshake(p) => write!(f, "waiting for the gateway to handshake with {p}"),
            Step::PeerGone(p) => write!(f, "waiting for the gateway to drop {p}"),
            Step::WriteOverlay => f.write_str("writing the overlay agents' configuration"),
            Step::ApplyOverlay => f.write_str("waiting for every overlay agent to apply it"),
            Step::SaveRecords => f.write_str("recording the peerings"),
            Step::StopGateway => f.write_str("stopping the gateway"),
            Step::StartGateway(n) => write!(f, "starting the gateway on {n}"),
        }
    }
}

/// A step that failed, on which cluster, and why.
#[derive(Debug)]
pub(crate) struct StepError {
    pub(crate) step: Step,
    pub(crate) cluster: ClusterId,
    pub(crate) source: BoxError,
}

/// `step` on `cluster` failed with `e`.
pub(crate) fn at<E: std::error::Error + Send + Sync + 'static>(
    step: Step,
    cluster: &ClusterId,
) -> impl FnOnce(E) -> StepError {
    let cluster = cluster.clone();
    move |e| StepError {
        step,
        cluster,
        source: Box::new(e),
    }
}

/// A rollback step (or a second release) that failed too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackFailure {
    /// The step.
    pub step: Step,
    /// On which cluster.
    pub cluster: ClusterId,
    /// Why, with its causes.
    pub error: String,
}

impl RollbackFailure {
    pub(crate) fn from(e: StepError) -> RollbackFailure {
        RollbackFailure {
            error: liqo_types::chain(&*e.source),
            step: e.step,
            cluster: e.cluster,
        }
    }
}

impl fmt::Display for RollbackFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}: {}", self.step, self.cluster, self.error)
    }
}

fn rollback_note(r: &[RollbackFailure]) -> String {
    if r.is_empty() {
        " (everything was put back)".into()
    } else {
        let all: Vec<String> = r.iter().map(ToString::to_string).collect();
        format!("; putting things back failed too: {}", all.join("; "))
    }
}

/// Why `peer`, `unpeer` or `move_gateway` did not complete.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A cluster's inventory could not be read (nothing changed).
    #[error("reading a cluster's inventory")]
    Inventory(#[source] BoxError),
    /// Refused before anything changed.
    #[error("{op}")]
    Refused {
        /// The operation (`peering rome with milan`).
        op: String,
        /// Why.
        #[source]
        refusal: Refusal,
    },
    /// A step failed; every side was put back to its previous state, except what `rollback`
    /// lists.
    #[error("{op}: {step} on {cluster}{}", rollback_note(rollback))]
    Failed {
        /// The operation.
        op: String,
        /// The step that failed.
        step: Step,
        /// On which cluster.
        cluster: ClusterId,
        /// Why.
        #[source]
        source: BoxError,
        /// Rollback steps that failed too (empty: everything was put back).
        rollback: Vec<RollbackFailure>,
    },
    /// Unpeered (gateways, overlays and records no longer know the peer), but an IPAM could
    /// not release the peer's ranges: they are still held, and unpeering again releases them.
    #[error(
        "{op}: unpeered, but {cluster} could not release {peer}'s ranges, which stay held until \
         unpeering again releases them{}: {step} on {cluster} failed",
        also.as_ref().map(|r| format!(" (nor could the other side: {r})")).unwrap_or_default()
    )]
    StillHeld {
        /// The operation.
        op: String,
        /// The cluster whose IPAM still holds the ranges.
        cluster: ClusterId,
        /// The peer whose ranges it holds.
        peer: ClusterId,
        /// The step that failed (reading the IPAM's entry or releasing it).
        step: Step,
        /// Why.
        #[source]
        source: BoxError,
        /// The other side's release, when it failed too.
        also: Option<RollbackFailure>,
    },
}

impl Error {
    pub(crate) fn failed(op: &str, e: StepError, rollback: Vec<RollbackFailure>) -> Error {
        Error::Failed {
            op: op.into(),
            step: e.step,
            cluster: e.cluster,
            source: e.source,
            rollback,
        }
    }

    /// The refusal, if the operation was refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Error::Refused { refusal, .. } => Some(refusal),
            Error::Failed { .. } | Error::Inventory(_) | Error::StillHeld { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("connection lost: {0}")]
    struct Lost(#[source] std::io::Error);

    #[test]
    fn a_rollback_failure_says_each_cause_once() {
        let io = std::io::Error::other("reset by peer");
        let e = StepError {
            step: Step::WriteGateway,
            cluster: "rome".parse().unwrap(),
            source: Box::new(Lost(io)),
        };
        // The cause's text ends the message already: not said twice.
        assert_eq!(
            RollbackFailure::from(e).to_string(),
            "writing the gateway's peers on rome: connection lost: reset by peer"
        );
    }
}
