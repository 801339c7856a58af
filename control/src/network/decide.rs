//! The network manager's decisions for one peer (§1.5, §1.7 step 8 of the control-plane spec):
//! a pure function of what was observed (the ForeignCluster, our NetworkConfig, the peer's
//! copy, what the IPAM holds for the peer, the TunnelEndpoint, the time) returning the writes
//! and IPAM calls, in order.

use std::time::Duration;

use crate::{
    api::{
        ClusterId,
        discovery::{ClusterIdentity, NetworkingEnabled},
        net::{NetworkConfigSpec, NetworkConfigStatus, TunnelEndpointSpec},
    },
    phase::{PeeringPhase, network_needed, network_wanted},
};
use k8s_openapi::jiff::Timestamp;
use liqo_types::view::{IpamPeer, Ranges};
use liqo_types::{FieldError, PeerView};
use serde_json::Value;

pub use super::specs::{Local, at_peer, copy_status, nat, own_spec, spec_digest, tunnel_spec};
use super::validate;

/// Our NetworkConfig for the peer (the replicator's source).
#[derive(Debug, Clone, PartialEq)]
pub struct Own {
    /// Its spec as stored.
    pub spec: Value,
    /// Since when it is being deleted.
    pub deleting_since: Option<Timestamp>,
    /// Its status as the peer wrote it (copied back by the replicator).
    pub status: Option<Value>,
}

/// The peer's NetworkConfig for us (the copy its replicator keeps in our tenant namespace).
#[derive(Debug, Clone, PartialEq)]
pub struct Copy {
    /// Its spec as stored.
    pub spec: Value,
    /// Its status (ours to write).
    pub status: Option<Value>,
    /// Our refusal, as annotated on it.
    pub refused: Option<String>,
    /// The digest ([`spec_digest`]) of the spec we refused, as annotated on it.
    pub refused_spec: Option<String>,
    /// It is being deleted.
    pub deleting: bool,
}

/// Our TunnelEndpoint for the peer.
#[derive(Debug, Clone, PartialEq)]
pub struct Tunnel {
    /// Its spec as stored.
    pub spec: Value,
    /// Since when it is being deleted (the operators' finalizers hold it).
    pub deleting_since: Option<Timestamp>,
}

/// Everything the decision needs about one peer.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// Now.
    pub now: Timestamp,
    /// How long a teardown waits for the TunnelEndpoint and our NetworkConfig to go before it
    /// releases the IPAM ranges anyway.
    pub grace: Duration,
    /// Our cluster ID.
    pub local_id: ClusterId,
    /// The peer.
    pub peer: ClusterIdentity,
    /// The ForeignCluster can be processed (`ProcessForeignClusterStatus` Success): not our
    /// own cluster, not a younger duplicate of another ForeignCluster for the same peer.
    pub processable: bool,
    /// The ForeignCluster is being deleted.
    pub fc_deleting: bool,
    /// Its `spec.networkingEnabled`.
    pub networking: NetworkingEnabled,
    /// Its peering phase.
    pub phase: PeeringPhase,
    /// It is an in-band peering (`spec.foreignProxyUrl` set, as `liqoctl peer in-band`
    /// writes it): the network comes first, before any direction is pending, since the
    /// authentication and the API traffic go through the tunnel.
    pub in_band: bool,
    /// Our tenant namespace for the peer is known.
    pub tenant_known: bool,
    /// It carries `net.liqo.io/network-manager`.
    pub has_finalizer: bool,
    /// What we announce, or why we cannot yet.
    pub local: Result<Local, String>,
    /// Our NetworkConfig.
    pub own: Option<Own>,
    /// The peer's.
    pub copy: Option<Copy>,
    /// What the IPAM holds for the peer.
    pub ipam: Option<IpamPeer>,
    /// Our TunnelEndpoint.
    pub tunnel: Option<Tunnel>,
}

/// One thing to do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Put `net.liqo.io/network-manager` on the ForeignCluster.
    AddFinalizer,
    /// Create or update our NetworkConfig.
    ApplyOwn(Box<NetworkConfigSpec>),
    /// Refuse the peer's NetworkConfig: a Warning Event, the annotations (the message and the
    /// [`spec_digest`] of the refused spec) and status `{processed: false, refused: message}`
    /// (no NAT fields: a decision taken for an earlier spec is withdrawn), nothing else.
    Refuse(String),
    /// Drop the refusal annotations (the peer corrected its NetworkConfig).
    ClearRefusal,
    /// `Remap` the peer's announced ranges, then write the copy's status
    /// ([`copy_status`]); the IPAM refusing them is a refusal of the copy, and ends the pass
    /// (the actions after it are not carried out).
    Remap(Ranges),
    /// Write the copy's status.
    WriteCopyStatus(NetworkConfigStatus),
    /// Record where the peer shows our ranges (the peering core's `ipam::record`).
    SetPeerView {
        /// Where we show the peer's ranges.
        here: Ranges,
        /// Where the peer shows ours.
        there: Ranges,
    },
    /// Create or update the TunnelEndpoint.
    ApplyTunnel(Box<TunnelEndpointSpec>),
    /// Delete our NetworkConfig.
    DeleteOwn,
    /// Delete the TunnelEndpoint.
    DeleteTunnel,
    /// Delete the peer's copy in our tenant namespace (its replicator may not be allowed to
    /// any more).
    DeleteCopy,
    /// Free the peer's ranges; `forced`: what was still there when the grace ran out.
    Release {
        /// Why the wait was cut short, if it was.
        forced: Option<String>,
    },
    /// Drop `net.liqo.io/network-manager` from the ForeignCluster.
    RemoveFinalizer,
}

/// Whether we keep a network with the peer: Liqo handles it, a direction is pending or
/// established (or the peering is in-band), the ForeignCluster is not being deleted and our
/// tenant namespace exists.
pub fn wanted(o: &Observed) -> bool {
    !o.fc_deleting && network_wanted(o.phase, o.networking, o.in_band) && o.tenant_known
}

fn json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("a spec serializes")
}

/// The decisions for one peer.
pub fn decide(o: &Observed) -> Vec<Action> {
    if !o.processable {
        // Another ForeignCluster owns this peer's network (or it names us): touch nothing of
        // the peer's, only let this one go.
        return if o.has_finalizer {
            vec![Action::RemoveFinalizer]
        } else {
            Vec::new()
        };
    }
    if wanted(o) { build(o) } else { teardown(o) }
}

fn build(o: &Observed) -> Vec<Action> {
    let mut actions = Vec::new();
    if !o.has_finalizer {
        actions.push(Action::AddFinalizer);
    }
    // Our NetworkConfig (a deleted one is recreated once gone).
    // Why we cannot announce yet (no key Secret, no gateway endpoint) is reported by the
    // reconciler, once per reason (`Manager::waiting`); here it only means: nothing of ours yet.
    let local = o.local.as_ref().ok();
    let own_current = match (local, &o.own) {
        (Some(l), own) => {
            let want = own_spec(&o.peer, l);
            match own {
                None => {
                    actions.push(Action::ApplyOwn(Box::new(want)));
                    false
                }
                Some(own) if own.deleting_since.is_some() => false,
                Some(own) if own.spec != json(&want) => {
                    actions.push(Action::ApplyOwn(Box::new(want)));
                    false
                }
                Some(_) => true,
            }
        }
        (None, _) => false,
    };
    // The peer's NetworkConfig: checked, then remapped here.
    let Some(copy) = &o.copy else { return actions };
    let digest = spec_digest(&copy.spec);
    let refused_this = copy.refused.is_some() && copy.refused_spec.as_deref() == Some(&digest);
    let theirs = match validate::peer_config(&copy.spec, &o.local_id) {
        Err(e) => {
            let message = e.to_string();
            if !refused_this || copy.refused.as_deref() != Some(message.as_str()) {
                actions.push(Action::Refuse(message));
            }
            return actions;
        }
        Ok(p) => p,
    };
    let held = match o.ipam {
        Some(h) if h.announced == theirs.announced => {
            // Held for these ranges: any refusal is for an earlier spec.
            if copy.refused.is_some() {
                actions.push(Action::ClearRefusal);
            }
            h
        }
        // This very spec was refused (by the IPAM): kept until the spec changes, never asked
        // again (each try would be a new refusal, Event and write).
        _ if refused_this => return actions,
        // Not held, or held for other ranges (then the IPAM refuses, naming them); a refusal
        // of an earlier spec goes once the remap succeeded.
        _ => {
            actions.push(Action::Remap(theirs.announced));
            if copy.refused.is_some() {
                actions.push(Action::ClearRefusal);
            }
            return actions;
        }
    };
    let status = copy_status(theirs.announced, held.seen_here);
    let written = copy
        .status
        .clone()
        .and_then(|s| serde_json::from_value::<NetworkConfigStatus>(s).ok());
    if written.as_ref() != Some(&status) {
        actions.push(Action::WriteCopyStatus(status));
    }
    // Our NetworkConfig processed by the peer: its decision recorded, then the tunnel.
    let (Some(l), Some(own)) = (local, &o.own) else {
        return actions;
    };
    if !own_current {
        return actions;
    }
    let there = match at_peer(own.status.as_ref(), l.ranges) {
        Ok(Some(t)) => t,
        // Not processed yet; a bad status is logged by the caller ([`own_status_error`]).
        _ => return actions,
    };
    if held.seen_there != Some(there) {
        actions.push(Action::SetPeerView {
            here: held.seen_here,
            there,
        });
    }
    let view = PeerView::of(held.seen_here, there);
    let want = tunnel_spec(&o.peer.cluster_id, l.ranges, view, &theirs);
    match &o.tunnel {
        Some(t) if t.deleting_since.is_some() => {}
        Some(t) if t.spec == json(&want) => {}
        _ => actions.push(Action::ApplyTunnel(Box::new(want))),
    }
    actions
}

/// Whether `since` is more than the grace ago.
fn overdue(o: &Observed, since: Option<Timestamp>) -> bool {
    since.is_some_and(|s| {
        o.now
            .duration_since(s)
            .try_into()
            .is_ok_and(|d: Duration| d >= o.grace)
    })
}

fn teardown(o: &Observed) -> Vec<Action> {
    let mut actions = Vec::new();
    let mut waiting = Vec::new();
    let mut forced = Vec::new();
    if let Some(own) = &o.own {
        match own.deleting_since {
            None => {
                actions.push(Action::DeleteOwn);
                waiting.push(());
            }
            s if overdue(o, s) => {
                forced.push("our NetworkConfig (the peer did not remove its copy)")
            }
            Some(_) => waiting.push(()),
        }
    }
    // In-band, the peer's API server is reached through the tunnel: it stays while our
    // NetworkConfig waits for its copy there to go (the replicator deletes that copy last), at most
    // the grace from its deletion; past that it goes even if the replicator still needs the
    // peer (what is left there is named by the replicator's let-go).
    let own_waits = o.in_band
        && o.own
            .as_ref()
            .is_some_and(|own| !overdue(o, own.deleting_since));
    if let Some(t) = &o.tunnel {
        match t.deleting_since {
            None if own_waits => waiting.push(()),
            None => {
                actions.push(Action::DeleteTunnel);
                waiting.push(());
            }
            s if overdue(o, s) => {
                forced.push("the TunnelEndpoint (a gateway or route operator did not drop it)")
            }
            Some(_) => waiting.push(()),
        }
    }
    // The peer's copy goes with the peering (the FC deleted, no direction left), once: while
    // only we do not handle the network (ours No, the peer's Yes), deleting it would only
    // have the peer's replicator make it again.
    let peering_gone = o.fc_deleting || !network_needed(o.phase, o.in_band);
    if o.copy.as_ref().is_some_and(|c| !c.deleting) && peering_gone {
        actions.push(Action::DeleteCopy);
    }
    if !waiting.is_empty() {
        return actions;
    }
    if o.ipam.is_some() {
        let forced = (!forced.is_empty()).then(|| {
            format!(
                "released the IPAM ranges after the {} s grace with {} still present",
                o.grace.as_secs(),
                forced.join(" and ")
            )
        });
        actions.push(Action::Release { forced });
    }
    if o.has_finalizer {
        actions.push(Action::RemoveFinalizer);
    }
    actions
}

/// Why our NetworkConfig's status (written by the peer) cannot be used, if it cannot.
pub fn own_status_error(o: &Observed) -> Option<FieldError> {
    let (Ok(l), Some(own)) = (&o.local, &o.own) else {
        return None;
    };
    at_peer(own.status.as_ref(), l.ranges).err()
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "decide_refusal_tests.rs"]
mod refusal_tests;

#[cfg(test)]
#[path = "decide_teardown_tests.rs"]
mod teardown_tests;
