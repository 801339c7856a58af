//! The ForeignCluster controller's decisions (§1.2 step 3, §1.3, §1.7): whether a
//! ForeignCluster can be processed, what to do about our identity at the peer, and, once
//! authenticated, the ResourceRequest, the peering conditions and the peering RoleBindings.

use std::collections::BTreeSet;

use crate::{
    api::{
        ClusterId,
        discovery::{OfferState, PeeringEnabled},
        sharing::VirtualKubeletStatus,
    },
    conditions::{Condition, Network, NewCondition, Peering, Process},
    phase::{PeeringPhase, RoleSet},
};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Whether a ForeignCluster can be processed: not our own cluster, and the oldest of the
/// ForeignClusters naming its cluster ID (`older_duplicate`: another one was there first).
pub fn process(fc_id: &ClusterId, local_id: &ClusterId, older_duplicate: bool) -> Process {
    if fc_id == local_id {
        Process::LocalCluster
    } else if older_duplicate {
        Process::ClusterIdRepetition
    } else {
        Process::Processable
    }
}

/// Whether a ForeignCluster waits before naming its tenant namespace (§1.2 step 3c): the
/// namespace is `terminating` (an earlier peering's, deleted by an unpeer), so nothing can be
/// made in it. One that already names it (`named`) keeps it, so that the replicator and the
/// network manager clean up what it holds and it can go; one being deleted (`deleting`) is
/// never held back.
pub fn wait_for_tenant(terminating: bool, named: bool, deleting: bool) -> bool {
    terminating && !named && !deleting
}

/// Our identity at the peer, as the identity Secret in our tenant namespace says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityState {
    /// No identity Secret.
    Missing,
    /// A key and CSR, not signed yet (asked and refused, or never answered).
    Unsigned,
    /// Signed: the peer's tenant namespace for us.
    Signed {
        /// The peer's tenant namespace for us.
        namespace: String,
    },
}

/// What to do about our identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthStep {
    /// Make a key and CSR, store them, then ask the peer to sign.
    CreateAndRequest,
    /// Ask the peer to sign the stored CSR.
    Request,
    /// Nothing: the identity is signed (`AuthenticationStatus=Established`).
    Done,
}

/// The next step for our identity.
pub fn auth_step(identity: &IdentityState) -> AuthStep {
    match identity {
        IdentityState::Missing => AuthStep::CreateAndRequest,
        IdentityState::Unsigned => AuthStep::Request,
        IdentityState::Signed { .. } => AuthStep::Done,
    }
}

/// How long to wait before asking the peer again after `failures` failed identity requests
/// in a row (of the same attempt): `base`, doubled with each failure, at most
/// [`AUTH_RETRY_MAX`]. A refusing or unreachable peer is not asked on every event.
pub fn auth_retry_delay(failures: u32, base: std::time::Duration) -> std::time::Duration {
    let doublings = failures.saturating_sub(1).min(16);
    base.saturating_mul(1 << doublings).min(AUTH_RETRY_MAX)
}

/// The longest wait between two identity requests of a failing attempt.
pub const AUTH_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(300);

/// The message of a failed identity request: why (the auth service's answer, or what failed),
/// how many attempts failed in a row and when the next is (a time: the message stays true while
/// it is shown).
pub fn auth_failure_message(why: &str, failures: u32, next_at: Timestamp) -> String {
    match failures {
        0 | 1 => format!("{why}; asking again at {next_at:.0}"),
        n => format!("{why}; {n} attempts failed in a row, asking again at {next_at:.0}"),
    }
}

/// A ResourceRequest as the ForeignCluster controller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestState {
    /// Being deleted.
    pub deleting: bool,
    /// `spec.withdrawalTimestamp` is set.
    pub withdrawing: bool,
    /// `status.offerState`.
    pub offer_state: OfferState,
    /// `status.offerWithdrawalTimestamp` is set.
    pub offer_withdrawn: bool,
}

/// What the ForeignCluster controller observes once the peer is processable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The ForeignCluster is being deleted.
    pub deleting: bool,
    /// `spec.outgoingPeeringEnabled`.
    pub outgoing_enabled: PeeringEnabled,
    /// `status.tenantNamespace.remote` is known (we hold a signed identity).
    pub remote_tenant_known: bool,
    /// Our ResourceRequest to the peer (source, in our tenant namespace).
    pub request: Option<RequestState>,
    /// The peer's ResourceOffer to us (copy, `liqo.io/originID=<peer>`): its virtual kubelet
    /// status.
    pub offer_from_peer: Option<VirtualKubeletStatus>,
    /// The peer's ResourceRequest to us (copy, `liqo.io/originID=<peer>`).
    pub request_from_peer: Option<RequestState>,
    /// Our ResourceOffer to the peer (source): its virtual kubelet status.
    pub offer_to_peer: Option<VirtualKubeletStatus>,
    /// The role sets bound now (a RoleBinding for each of their ClusterRoles).
    pub bound: BTreeSet<RoleSet>,
    /// Our TunnelEndpoint for the peer (the network manager's), if any.
    pub tunnel: Option<TunnelState>,
    /// The peer refused our NetworkConfig.
    pub own_refused: Option<OwnRefused>,
    /// Now (the gateway Lease's freshness is judged at this time).
    pub now: Timestamp,
}

/// A TunnelEndpoint's `status.connection`, as the gateway operator writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TunnelState {
    /// No status yet, or `Connecting`.
    Connecting,
    /// `Connected`: the gateway saw a recent handshake, when the operator wrote it (it writes
    /// only on change): current only while the operator's Lease is fresh.
    Connected(GatewayLease),
    /// `Error`, with the operator's message.
    Error(String),
    /// Being deleted (whatever its status says): the tunnel is going, never Established.
    Deleting,
}

/// The gateway operator's Lease (`liqo-gateway` in the Liqo namespace) as read beside a
/// `Connected` TunnelEndpoint: the operator renews it while it runs, so a `Connected` it wrote
/// is current only while the Lease is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayLease {
    /// `<namespace>/<name>`, for the message.
    pub name: String,
    /// Its renewal (`Ok(None)`: there is no Lease; `Err`: it could not be read, why).
    pub held: Result<Option<LeaseTimes>, String>,
}

/// When a Lease was last renewed and for how long. Its freshness is judged as client-go's
/// leader election does, on OUR clock: by when we last saw it change (`observed`), never by
/// its `renewTime` (written with the gateway node's clock, which may be skewed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimes {
    /// `spec.renewTime` (the holder's clock: only for the message).
    pub renewed: Option<Timestamp>,
    /// `spec.leaseDurationSeconds`.
    pub duration_secs: Option<i32>,
    /// Our time when its spec (its renewal) was last seen to change; the first time we saw it
    /// after a start.
    pub observed: Timestamp,
}

/// NETWORKING's message while the TunnelEndpoint is being deleted.
pub const TUNNEL_DELETING: &str = "the TunnelEndpoint is being deleted";

/// NETWORKING and, when it holds only until a moment, how long until then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Networking {
    /// The condition.
    pub condition: NewCondition,
    /// `Established` lasts until the gateway Lease expires: reconcile again after this long.
    pub recheck: Option<std::time::Duration>,
}

/// Whether a Lease is fresh at `now` (`Ok`: how long it stays so) or why not (`Err`): fresh
/// until `leaseDurationSeconds` after we last saw it renewed (both times ours).
pub fn lease_freshness(
    lease: &GatewayLease,
    now: Timestamp,
) -> Result<std::time::Duration, String> {
    let name = &lease.name;
    let held = match &lease.held {
        Err(e) => return Err(format!("cannot read Lease {name}: {e}")),
        Ok(None) => return Err(format!("no Lease {name}: no gateway operator runs")),
        Ok(Some(held)) => held,
    };
    let Some(renewed) = held.renewed else {
        return Err(format!("the Lease {name} was never renewed (no renewTime)"));
    };
    let Some(secs) = held.duration_secs.filter(|s| *s > 0) else {
        return Err(format!("the Lease {name} has no leaseDurationSeconds"));
    };
    let since = held.observed.duration_until(now);
    let left = SignedDuration::from_secs(secs.into()).saturating_sub(since);
    if left.is_negative() {
        // The renewal time, not its age: the message (and the status) stays the same while
        // the Lease stays expired, so a resync does not rewrite it.
        return Err(format!(
            "the gateway operator's Lease {name} was last renewed at {renewed:.0} (valid for {secs}s): its Connected is not current"
        ));
    }
    Ok(left.unsigned_abs())
}

/// The peer refused our NetworkConfig (its `status.refused`, copied back by the replicator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnRefused {
    /// The peer's cluster name.
    pub peer: String,
    /// Its message, naming the bad field.
    pub why: String,
}

/// NETWORKING from our TunnelEndpoint at `now`: missing → `None/TunnelEndpointNotFound`;
/// connecting → `Pending`; connected → `Established` while the gateway operator's Lease is
/// fresh (rechecked when it expires), else `Pending` saying why; an error →
/// `None/TunnelEndpointError` with its message; being deleted → `Pending` saying so.
/// While there is no tunnel (none, or connecting), a refusal of our NetworkConfig by the
/// peer is the message ("milan refused our NetworkConfig: spec.podCIDR: ...").
pub fn network(
    tunnel: Option<&TunnelState>,
    refused: Option<&OwnRefused>,
    now: Timestamp,
) -> Networking {
    let refusal = |n: Network| match refused {
        Some(r) => Condition::Network(n)
            .with_message(format!("{} refused our NetworkConfig: {}", r.peer, r.why)),
        None => Condition::Network(n).into(),
    };
    let condition = match tunnel {
        Some(TunnelState::Deleting) => {
            Condition::Network(Network::Connecting).with_message(TUNNEL_DELETING)
        }
        None => refusal(Network::NotFound),
        Some(TunnelState::Connecting) => refusal(Network::Connecting),
        Some(TunnelState::Connected(lease)) => {
            return match lease_freshness(lease, now) {
                Ok(left) => Networking {
                    condition: Condition::Network(Network::Available).into(),
                    // Just past the expiry, so that the recheck finds it expired.
                    recheck: Some(left + std::time::Duration::from_millis(500)),
                },
                Err(why) => Networking {
                    condition: Condition::Network(Network::Connecting).with_message(why),
                    // A Lease we could not read is read again soon (an apiserver blip must not
                    // hold Pending for a whole resync); an expired one waits for its renewal.
                    recheck: lease
                        .held
                        .is_err()
                        .then_some(std::time::Duration::from_secs(2)),
                },
            };
        }
        Some(TunnelState::Error(m)) if !m.is_empty() => {
            Condition::Network(Network::Error).with_message(m.clone())
        }
        Some(TunnelState::Error(_)) => Condition::Network(Network::Error).into(),
    };
    Networking {
        condition,
        recheck: None,
    }
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create or update our ResourceRequest (no withdrawal timestamp).
    ApplyRequest,
    /// Stamp `spec.withdrawalTimestamp` on our ResourceRequest.
    WithdrawRequest,
    /// Delete our ResourceRequest (the peer withdrew its offer).
    DeleteRequest,
    /// Write a condition.
    SetCondition(Condition),
    /// Write NETWORKING (its message the TunnelEndpoint's on an error).
    SetNetwork(NewCondition),
    /// Reconcile again after this long at the latest (NETWORKING is `Established` until the
    /// gateway Lease expires).
    RecheckAfter(std::time::Duration),
    /// Bind a role set's ClusterRoles to the peer's user in our tenant namespace.
    Bind(RoleSet),
    /// Delete the RoleBindings of a role set.
    Unbind(RoleSet),
}

/// Whether we want to consume the peer: not deleting, its tenant namespace known, and
/// outgoing `Yes` (`Auto` joins only LAN-discovered clusters, which we do not discover).
pub fn outgoing_desired(o: &Observed) -> bool {
    !o.deleting && o.remote_tenant_known && o.outgoing_enabled == PeeringEnabled::Yes
}

/// The condition of a direction from its request and its offer.
fn direction(request: Option<&RequestState>, offer: Option<VirtualKubeletStatus>) -> Peering {
    match (request, offer) {
        (None, _) => Peering::None,
        (Some(r), _) if r.deleting || r.withdrawing => Peering::Deleting,
        (Some(_), None) => Peering::ResourceRequestPending,
        (Some(_), Some(VirtualKubeletStatus::Created)) => Peering::Accepted,
        (Some(_), Some(_)) => Peering::KubeletPending,
    }
}

/// The decisions after authentication: the ResourceRequest (§1.2 f, §1.7 steps 2 and 7), the
/// two peering conditions, and the RoleBindings of the outgoing and incoming sets for the
/// phase those conditions make (the basic set is `liqo-auth`'s).
pub fn decide(o: &Observed) -> Vec<Action> {
    let mut actions = Vec::new();
    let outgoing = match (outgoing_desired(o), &o.request) {
        (true, Some(r)) if !r.withdrawing && !r.deleting => {
            // Keep it as it is; its offer decides the condition.
            actions.push(Action::ApplyRequest);
            if r.offer_state == OfferState::Created {
                direction(Some(r), o.offer_from_peer)
            } else {
                Peering::ResourceRequestPending
            }
        }
        (true, _) if o.request.is_some_and(|r| r.deleting) => Peering::Deleting,
        (true, _) => {
            // Missing, or withdrawn and wanted again: apply drops the withdrawal.
            actions.push(Action::ApplyRequest);
            Peering::ResourceRequestPending
        }
        (false, None) => Peering::None,
        (false, Some(r)) if r.deleting => Peering::Deleting,
        // The peer withdrew its offer (or never made one) and its copy here is gone: the
        // peer needs our outgoing role until then, to delete that copy.
        // Disconnecting until the request is gone (its finalizer waits for the peer's copy):
        // None before that would flap back, and `liqoctl unpeer` would return early.
        (false, Some(r))
            if o.offer_from_peer.is_none()
                && (r.offer_withdrawn || (r.withdrawing && r.offer_state == OfferState::None)) =>
        {
            actions.push(Action::DeleteRequest);
            Peering::Deleting
        }
        (false, Some(r)) => {
            if !r.withdrawing {
                actions.push(Action::WithdrawRequest);
            }
            Peering::Deleting
        }
    };
    let incoming = direction(o.request_from_peer.as_ref(), o.offer_to_peer);
    actions.push(Action::SetCondition(Condition::Outgoing(outgoing)));
    actions.push(Action::SetCondition(Condition::Incoming(incoming)));
    // Without a TunnelEndpoint NETWORKING reads None rather than nothing.
    let networking = network(o.tunnel.as_ref(), o.own_refused.as_ref(), o.now);
    actions.push(Action::SetNetwork(networking.condition));
    actions.extend(networking.recheck.map(Action::RecheckAfter));
    let phase = phase_of(outgoing, incoming);
    for set in [RoleSet::Outgoing, RoleSet::Incoming] {
        match (set.bound(phase), o.bound.contains(&set)) {
            (true, false) => actions.push(Action::Bind(set)),
            (false, true) => actions.push(Action::Unbind(set)),
            _ => {}
        }
    }
    actions
}

/// Whether to delete a ForeignCluster (§1.2 step 3 i): one the ResourceRequest controller made
/// for a cluster that peered with us (`discovered`), with neither direction left.
pub fn delete_discovered(
    discovered: bool,
    deleting: bool,
    outgoing: Peering,
    incoming: Peering,
) -> bool {
    discovered && !deleting && outgoing == Peering::None && incoming == Peering::None
}

/// The phase two direction conditions make (authentication aside: it only matters when no
/// direction is active, and binds nothing of ours).
fn phase_of(outgoing: Peering, incoming: Peering) -> PeeringPhase {
    let active = |p: Peering| p != Peering::None;
    match (active(outgoing), active(incoming)) {
        (true, true) => PeeringPhase::Bidirectional,
        (true, false) => PeeringPhase::Outgoing,
        (false, true) => PeeringPhase::Incoming,
        (false, false) => PeeringPhase::None,
    }
}

#[cfg(test)]
#[path = "fc_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "fc_network_tests.rs"]
mod network_tests;
