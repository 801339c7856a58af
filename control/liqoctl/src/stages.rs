//! Where a peering (or an unpeering) stands, decided from the ForeignCluster's status alone:
//! the stages passed so far, in order, and whether we are done, still waiting (for which
//! stage) or failed (at which stage, with the condition's reason and message). The waiting
//! loop in [`crate::peer`] prints the new stage lines after each change and stops on
//! done/failed/timeout; this module reads no clock and talks to nothing.
//!
//! The peering stages, as upstream's `liqoctl peer`: authentication, network, outgoing
//! peering, node. Two are not waited for in liqo-rs yet: the network while its condition is
//! absent (no network manager runs), and the node (no virtual kubelet runs).

use std::fmt;

use control::{
    api::discovery::{
        ForeignClusterStatus, PeeringCondition, PeeringConditionStatus as S,
        PeeringConditionType as T,
    },
    conditions,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A stage of the peering (or of its teardown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `AuthenticationStatus` Established.
    Authentication,
    /// `NetworkStatus` Established (or absent: not managed yet).
    Network,
    /// `OutgoingPeering` Established.
    OutgoingPeering,
    /// The virtual node exists and is Ready.
    Node,
    /// `OutgoingPeering` back to None after `outgoingPeeringEnabled: No`.
    OutgoingTeardown,
}

impl Stage {
    /// What waiting for this stage means, for a timeout message.
    pub fn waiting_for(self, cluster: &str) -> String {
        match self {
            Stage::Authentication => format!("authentication to the remote cluster {cluster:?}"),
            Stage::Network => format!("the network to the remote cluster {cluster:?}"),
            Stage::OutgoingPeering => {
                format!("the outgoing peering to the remote cluster {cluster:?} to be activated")
            }
            Stage::Node => format!("the virtual node of the remote cluster {cluster:?}"),
            Stage::OutgoingTeardown => {
                format!("the outgoing peering to the remote cluster {cluster:?} to be torn down")
            }
        }
    }

    /// The condition this stage reads, if any.
    pub fn condition(self) -> Option<T> {
        match self {
            Stage::Authentication => Some(T::AuthenticationStatus),
            Stage::Network => Some(T::NetworkStatus),
            Stage::OutgoingPeering | Stage::OutgoingTeardown => Some(T::OutgoingPeering),
            Stage::Node => None,
        }
    }
}

/// A stage passed, with how (one printed line each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passed {
    /// Authenticated.
    Authenticated,
    /// The tunnel is up.
    NetworkEstablished,
    /// No network condition: nothing manages the network yet; not waited for.
    NetworkNotManaged,
    /// Outgoing peering Established.
    OutgoingActivated,
    /// The virtual node is Ready.
    NodeCreated,
    /// No Ready virtual node: no virtual kubelet runs yet; not waited for.
    NodeNotCreated,
    /// Outgoing peering None.
    OutgoingDisabled,
}

impl Passed {
    /// Its line.
    pub fn line(self, cluster: &str) -> String {
        match self {
            Passed::Authenticated => format!("Authenticated to cluster {cluster:?}"),
            Passed::NetworkEstablished => {
                format!("Network established to the remote cluster {cluster:?}")
            }
            Passed::NetworkNotManaged => format!(
                "Network to the remote cluster {cluster:?} not managed yet (NetworkStatus None): \
                 not waiting for it"
            ),
            Passed::OutgoingActivated => {
                format!("Outgoing peering activated to the remote cluster {cluster:?}")
            }
            Passed::NodeCreated => format!("Node created for the remote cluster {cluster:?}"),
            Passed::NodeNotCreated => format!(
                "Node for the remote cluster {cluster:?} not created: no virtual kubelet runs \
                 yet (not waiting for it)"
            ),
            Passed::OutgoingDisabled => {
                format!("Outgoing peering to the remote cluster {cluster:?} disabled")
            }
        }
    }
}

/// A condition as read, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its type.
    pub type_: T,
    /// Its status (`None` when absent).
    pub status: S,
    /// Its reason, if any.
    pub reason: Option<String>,
    /// Its message, if any.
    pub message: Option<String>,
}

/// The condition of a type in `status`, as seen (`None` when absent).
pub fn seen(status: Option<&ForeignClusterStatus>, type_: T) -> Seen {
    Seen::of(status.map_or(&[][..], |s| &s.peering_conditions[..]), type_)
}

impl Seen {
    fn of(conds: &[PeeringCondition], type_: T) -> Self {
        let c = conditions::get(conds, type_);
        Self {
            type_,
            status: c.map_or(S::None, |c| c.status),
            reason: c.and_then(|c| c.reason.clone()),
            message: c.and_then(|c| c.message.clone()),
        }
    }
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {:?}", self.type_, self.status)?;
        if let Some(r) = &self.reason {
            write!(f, " ({r})")?;
        }
        if let Some(m) = self.message.as_deref().filter(|m| !m.is_empty()) {
            write!(f, ": {m}")?;
        }
        Ok(())
    }
}

/// Where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every stage passed.
    Done,
    /// Waiting for this stage (its condition as seen, if it has one).
    Waiting(Stage, Option<Seen>),
    /// This stage failed, because of this condition.
    Failed(Stage, Seen),
}

/// The stages passed and the outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The stages passed, in order.
    pub passed: Vec<Passed>,
    /// Where it stands.
    pub outcome: Outcome,
}

/// The virtual node, as found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// A Ready virtual node for the remote cluster.
    Ready,
    /// A virtual node, not Ready.
    NotReady,
    /// None (or not looked for yet).
    Absent,
}

/// Now, to the second below (conditions' times have whole seconds): what [`peering`] compares
/// a refusal's time with.
pub fn since_now() -> Time {
    let now = k8s_openapi::jiff::Timestamp::now();
    Time(k8s_openapi::jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// Since when a refusal answers our write: `at` (when we wrote the token and the
/// ForeignCluster, to the second) and whether the authentication was seen not refused since
/// (the controller records every request as Pending first).
#[derive(Debug, Clone, Copy)]
pub struct Since<'a> {
    /// When we wrote.
    pub at: &'a Time,
    /// Whether a state other than a refusal was seen since.
    pub retried: bool,
}

/// The reason of `AuthenticationStatus` when the remote end is another cluster.
const WRONG_CLUSTER: &str =
    conditions::Condition::Authentication(conditions::Authentication::WrongCluster).reason();

/// Whether the authentication condition in `status` is a refusal (Denied or EmptyDenied) or
/// says the remote end is another cluster.
pub fn refused(status: Option<&ForeignClusterStatus>) -> bool {
    let auth = seen(status, T::AuthenticationStatus);
    matches!(auth.status, S::Denied | S::EmptyDenied)
        || (auth.status == S::Error && auth.reason.as_deref() == Some(WRONG_CLUSTER))
}

/// The peering's progress from the ForeignCluster's status and the virtual node. A refusal
/// older than `since` answered an earlier attempt: it is waited past, not reported (times have
/// whole seconds: one of the same second counts once a retry was seen).
pub fn peering(
    status: Option<&ForeignClusterStatus>,
    node: NodeState,
    since: Option<Since<'_>>,
) -> Progress {
    let conds = status.map_or(&[][..], |s| &s.peering_conditions[..]);
    let mut passed = Vec::new();
    let outcome = peering_outcome(conds, node, since, &mut passed);
    Progress { passed, outcome }
}

fn peering_outcome(
    conds: &[PeeringCondition],
    node: NodeState,
    since: Option<Since<'_>>,
    passed: &mut Vec<Passed>,
) -> Outcome {
    let process = Seen::of(conds, T::ProcessForeignClusterStatus);
    let auth = Seen::of(conds, T::AuthenticationStatus);
    let stale = |type_| {
        let changed = conditions::get(conds, type_).and_then(|c| c.last_transition_time.as_ref());
        match (since, changed) {
            (Some(since), Some(changed)) => {
                changed < since.at || (changed == since.at && !since.retried)
            }
            _ => false,
        }
    };
    // A ForeignCluster that cannot be processed fails whatever stage we are at.
    let stop = |stage: Stage| {
        (process.status == S::Error).then(|| Outcome::Failed(stage, process.clone()))
    };
    // The remote end is another cluster: no retry changes that by itself.
    let wrong = auth.status == S::Error && auth.reason.as_deref() == Some(WRONG_CLUSTER);
    match auth.status {
        S::Established => passed.push(Passed::Authenticated),
        _ if wrong && !stale(T::AuthenticationStatus) => {
            return stop(Stage::Authentication)
                .unwrap_or(Outcome::Failed(Stage::Authentication, auth));
        }
        // Refused: no retry will change that. Unreachable (`Error`) is retried by the
        // controller, so it is waited for (the timeout line names it).
        S::Denied | S::EmptyDenied if stale(T::AuthenticationStatus) => {
            return stop(Stage::Authentication)
                .unwrap_or(Outcome::Waiting(Stage::Authentication, Some(auth)));
        }
        S::Denied | S::EmptyDenied => {
            return stop(Stage::Authentication)
                .unwrap_or(Outcome::Failed(Stage::Authentication, auth));
        }
        _ => {
            return stop(Stage::Authentication)
                .unwrap_or(Outcome::Waiting(Stage::Authentication, Some(auth)));
        }
    }
    if let Some(failed) = stop(Stage::Network) {
        return failed;
    }
    let network = Seen::of(conds, T::NetworkStatus);
    match (network.status, network.reason.as_deref()) {
        (S::Established, _) => passed.push(Passed::NetworkEstablished),
        (S::None, Some("TunnelEndpointError")) => {
            return Outcome::Waiting(Stage::Network, Some(network));
        }
        (S::None, _) => passed.push(Passed::NetworkNotManaged),
        _ => return Outcome::Waiting(Stage::Network, Some(network)),
    }
    if let Some(failed) = stop(Stage::OutgoingPeering) {
        return failed;
    }
    let outgoing = Seen::of(conds, T::OutgoingPeering);
    if outgoing.status != S::Established {
        return Outcome::Waiting(Stage::OutgoingPeering, Some(outgoing));
    }
    passed.push(Passed::OutgoingActivated);
    passed.push(match node {
        NodeState::Ready => Passed::NodeCreated,
        NodeState::NotReady | NodeState::Absent => Passed::NodeNotCreated,
    });
    Outcome::Done
}

/// The outgoing teardown's progress (after `outgoingPeeringEnabled: No`).
pub fn unpeering(status: Option<&ForeignClusterStatus>) -> Progress {
    let conds = status.map_or(&[][..], |s| &s.peering_conditions[..]);
    let outgoing = Seen::of(conds, T::OutgoingPeering);
    if outgoing.status == S::None {
        Progress {
            passed: vec![Passed::OutgoingDisabled],
            outcome: Outcome::Done,
        }
    } else {
        Progress {
            passed: Vec::new(),
            outcome: Outcome::Waiting(Stage::OutgoingTeardown, Some(outgoing)),
        }
    }
}

/// The line of a failed stage.
pub fn failure_line(stage: Stage, seen: &Seen, cluster: &str) -> String {
    let what = match stage {
        Stage::Authentication => format!("Authentication to the remote cluster {cluster:?}"),
        Stage::Network => format!("The network to the remote cluster {cluster:?}"),
        Stage::OutgoingPeering => format!("The outgoing peering to the remote cluster {cluster:?}"),
        Stage::Node => format!("The virtual node of the remote cluster {cluster:?}"),
        Stage::OutgoingTeardown => {
            format!("The teardown of the outgoing peering to the remote cluster {cluster:?}")
        }
    };
    if seen.type_ == T::ProcessForeignClusterStatus {
        return format!(
            "The ForeignCluster of the remote cluster {cluster:?} cannot be processed (while \
             waiting for {}): {seen}",
            stage.waiting_for(cluster)
        );
    }
    format!("{what} failed: {seen}")
}

/// The line of a timeout.
pub fn timeout_line(stage: Stage, seen: Option<&Seen>, cluster: &str, timeout: &str) -> String {
    let mut line = format!(
        "Timed out after {timeout} waiting for {}",
        stage.waiting_for(cluster)
    );
    if let Some(seen) = seen {
        line.push_str(&format!(" (last seen: {seen})"));
    }
    line
}

#[cfg(test)]
mod tests;
