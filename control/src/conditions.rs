//! The ForeignCluster's peering conditions: each condition type with the status/reason pairs
//! it may take (upstream Liqo v0.5's, as typed enums, so a reason can never be paired with the
//! wrong status), and the one way to write them ([`set`]) and read them ([`status`], [`get`],
//! [`ForeignClusterStatus::condition`], [`Condition::read`]).
//!
//! A condition's `lastTransitionTime` changes only when its status changes; its reason and
//! message follow every write. A missing condition reads as `None`. Time is an input: nothing
//! here reads a clock.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::discovery::{
    ForeignClusterStatus, PeeringCondition, PeeringConditionStatus, PeeringConditionStatus as S,
    PeeringConditionType,
};

/// `ProcessForeignClusterStatus`: whether the ForeignCluster can be processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    /// `Success/ForeignClusterProcessable`.
    Processable,
    /// `Error/LocalCluster`: it names our own cluster ID.
    LocalCluster,
    /// `Error/ClusterIDRepetition`: another ForeignCluster has the same cluster ID.
    ClusterIdRepetition,
    /// `Error/InvalidProxyURL`: `foreignProxyUrl` is not a URL.
    InvalidProxyUrl,
}

/// `AuthenticationStatus`: our identity at the remote cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authentication {
    /// `Established/IdentityAccepted`: the remote cluster signed our certificate.
    Accepted,
    /// `Denied/IdentityDenied`: refused although we sent a token.
    Denied,
    /// `EmptyDenied/IdentityEmptyDenied`: refused and we had no token to send.
    EmptyDenied,
    /// `Pending/IdentityPending`: asked, no answer yet (or an answer we could not use).
    Pending,
    /// `Error/AuthNotReachable`: the auth service could not be reached.
    NotReachable,
    /// `Error/ClusterIDMismatch`: the auth service (or, once we hold an identity, the API
    /// server behind it) answers for another cluster than the ForeignCluster names; nothing is
    /// sent to it.
    WrongCluster,
}

/// `OutgoingPeering` and `IncomingPeering`: a peering direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peering {
    /// `None/NoResourceRequest`.
    None,
    /// `Pending/ResourceRequestPending`: no ResourceOffer yet.
    ResourceRequestPending,
    /// `Pending/KubeletPending`: a ResourceOffer, but its virtual kubelet is not created.
    KubeletPending,
    /// `Established/ResourceRequestAccepted`.
    Accepted,
    /// `Disconnecting/ResourceRequestDeleting`.
    Deleting,
}

/// `NetworkStatus`: the network interconnection (its TunnelEndpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// `None/TunnelEndpointNotFound`.
    NotFound,
    /// `Pending/TunnelEndpointConnecting`.
    Connecting,
    /// `Established/TunnelEndpointAvailable`.
    Available,
    /// `None/TunnelEndpointError` (the message is the TunnelEndpoint's).
    Error,
}

/// A condition type with its status/reason pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// `ProcessForeignClusterStatus`.
    Process(Process),
    /// `AuthenticationStatus`.
    Authentication(Authentication),
    /// `OutgoingPeering`: we consume the remote cluster's resources.
    Outgoing(Peering),
    /// `IncomingPeering`: the remote cluster consumes ours.
    Incoming(Peering),
    /// `NetworkStatus`.
    Network(Network),
}

/// Every pair: (condition, status, reason, default message). The single table the accessors
/// and [`Condition::read`] use.
const fn row(c: Condition) -> (S, &'static str, &'static str) {
    match c {
        Condition::Process(p) => match p {
            Process::Processable => (
                S::Success,
                "ForeignClusterProcessable",
                "The ForeignCluster can be processed",
            ),
            Process::LocalCluster => (
                S::Error,
                "LocalCluster",
                "The ForeignCluster names the local cluster",
            ),
            Process::ClusterIdRepetition => (
                S::Error,
                "ClusterIDRepetition",
                "Another ForeignCluster has the same cluster ID",
            ),
            Process::InvalidProxyUrl => (
                S::Error,
                "InvalidProxyURL",
                "The foreign proxy URL is not a valid URL",
            ),
        },
        Condition::Authentication(a) => match a {
            Authentication::Accepted => (
                S::Established,
                "IdentityAccepted",
                "The remote cluster accepted our identity",
            ),
            Authentication::Denied => (
                S::Denied,
                "IdentityDenied",
                "The remote cluster refused the authentication token",
            ),
            Authentication::EmptyDenied => (
                S::EmptyDenied,
                "IdentityEmptyDenied",
                "The remote cluster requires a token and we have none for it",
            ),
            Authentication::Pending => (
                S::Pending,
                "IdentityPending",
                "Waiting for the remote cluster to accept our identity",
            ),
            Authentication::NotReachable => (
                S::Error,
                "AuthNotReachable",
                "The remote authentication service is not reachable",
            ),
            Authentication::WrongCluster => (
                S::Error,
                "ClusterIDMismatch",
                "The remote cluster is not the cluster this ForeignCluster names",
            ),
        },
        Condition::Outgoing(p) | Condition::Incoming(p) => match p {
            Peering::None => (S::None, "NoResourceRequest", "No ResourceRequest"),
            Peering::ResourceRequestPending => (
                S::Pending,
                "ResourceRequestPending",
                "The provider has not made a ResourceOffer yet",
            ),
            Peering::KubeletPending => (
                S::Pending,
                "KubeletPending",
                "The consumer has not started the virtual kubelet yet",
            ),
            Peering::Accepted => (
                S::Established,
                "ResourceRequestAccepted",
                "The ResourceRequest has been accepted and the virtual kubelet runs",
            ),
            Peering::Deleting => (
                S::Disconnecting,
                "ResourceRequestDeleting",
                "The ResourceRequest is being withdrawn",
            ),
        },
        Condition::Network(n) => match n {
            Network::NotFound => (
                S::None,
                "TunnelEndpointNotFound",
                "No TunnelEndpoint for the remote cluster",
            ),
            Network::Connecting => (
                S::Pending,
                "TunnelEndpointConnecting",
                "The tunnel to the remote cluster is not connected yet",
            ),
            Network::Available => (
                S::Established,
                "TunnelEndpointAvailable",
                "The tunnel to the remote cluster is connected",
            ),
            Network::Error => (
                S::None,
                "TunnelEndpointError",
                "The tunnel to the remote cluster failed",
            ),
        },
    }
}

impl Condition {
    /// Every condition, in table order (for tests and documentation).
    pub const ALL: [Condition; 24] = {
        use Authentication as A;
        use Network as N;
        use Peering as P;
        use Process as R;
        [
            Condition::Process(R::Processable),
            Condition::Process(R::LocalCluster),
            Condition::Process(R::ClusterIdRepetition),
            Condition::Process(R::InvalidProxyUrl),
            Condition::Authentication(A::Accepted),
            Condition::Authentication(A::Denied),
            Condition::Authentication(A::EmptyDenied),
            Condition::Authentication(A::Pending),
            Condition::Authentication(A::NotReachable),
            Condition::Authentication(A::WrongCluster),
            Condition::Outgoing(P::None),
            Condition::Outgoing(P::ResourceRequestPending),
            Condition::Outgoing(P::KubeletPending),
            Condition::Outgoing(P::Accepted),
            Condition::Outgoing(P::Deleting),
            Condition::Incoming(P::None),
            Condition::Incoming(P::ResourceRequestPending),
            Condition::Incoming(P::KubeletPending),
            Condition::Incoming(P::Accepted),
            Condition::Incoming(P::Deleting),
            Condition::Network(N::NotFound),
            Condition::Network(N::Connecting),
            Condition::Network(N::Available),
            Condition::Network(N::Error),
        ]
    };

    /// The condition's type.
    pub const fn type_(self) -> PeeringConditionType {
        match self {
            Condition::Process(_) => PeeringConditionType::ProcessForeignClusterStatus,
            Condition::Authentication(_) => PeeringConditionType::AuthenticationStatus,
            Condition::Outgoing(_) => PeeringConditionType::OutgoingPeering,
            Condition::Incoming(_) => PeeringConditionType::IncomingPeering,
            Condition::Network(_) => PeeringConditionType::NetworkStatus,
        }
    }

    /// Its status.
    pub const fn status(self) -> PeeringConditionStatus {
        row(self).0
    }

    /// Its reason (UpperCamelCase, as upstream).
    pub const fn reason(self) -> &'static str {
        row(self).1
    }

    /// The message written when the caller gives none.
    pub const fn default_message(self) -> &'static str {
        row(self).2
    }

    /// This condition with a message of the caller's (e.g. the TunnelEndpoint's error).
    pub fn with_message(self, message: impl Into<String>) -> NewCondition {
        NewCondition {
            condition: self,
            message: message.into(),
        }
    }

    /// The typed condition a stored one holds (by type and reason), `None` for a reason this
    /// table does not know (written by someone else).
    pub fn read(stored: &PeeringCondition) -> Option<Condition> {
        let reason = stored.reason.as_deref()?;
        Self::ALL
            .into_iter()
            .find(|c| c.type_() == stored.type_ && c.reason() == reason)
    }
}

/// A condition to write, with its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCondition {
    /// Type, status and reason.
    pub condition: Condition,
    /// Human-readable details.
    pub message: String,
}

impl From<Condition> for NewCondition {
    fn from(condition: Condition) -> Self {
        condition.with_message(condition.default_message())
    }
}

/// The stored condition of a type, if any.
pub fn get(
    conditions: &[PeeringCondition],
    type_: PeeringConditionType,
) -> Option<&PeeringCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The status of the condition of a type; `None` when it is missing (as upstream).
pub fn status(
    conditions: &[PeeringCondition],
    type_: PeeringConditionType,
) -> PeeringConditionStatus {
    get(conditions, type_).map_or(PeeringConditionStatus::None, |c| c.status)
}

impl ForeignClusterStatus {
    /// The status of the condition of the given type (`None` when absent, as upstream).
    pub fn condition(&self, type_: PeeringConditionType) -> PeeringConditionStatus {
        status(&self.peering_conditions, type_)
    }
}

/// Writes a condition: added (at the end) when missing; otherwise its reason and message are
/// replaced, and its status and `lastTransitionTime` (= `now`) only when the status changes.
/// Returns whether anything changed, so the caller writes the status only then.
pub fn set(
    conditions: &mut Vec<PeeringCondition>,
    new: impl Into<NewCondition>,
    now: &Time,
) -> bool {
    let NewCondition { condition, message } = new.into();
    let reason = Some(condition.reason().to_owned());
    let message = Some(message);
    let Some(old) = conditions.iter_mut().find(|c| c.type_ == condition.type_()) else {
        conditions.push(PeeringCondition {
            type_: condition.type_(),
            status: condition.status(),
            last_transition_time: Some(now.clone()),
            reason,
            message,
        });
        return true;
    };
    let mut changed = false;
    if old.status != condition.status() || old.last_transition_time.is_none() {
        old.status = condition.status();
        old.last_transition_time = Some(now.clone());
        changed = true;
    }
    if old.reason != reason {
        old.reason = reason;
        changed = true;
    }
    if old.message != message {
        old.message = message;
        changed = true;
    }
    changed
}

#[cfg(test)]
mod tests;
