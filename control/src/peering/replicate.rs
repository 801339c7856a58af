//! The CRD replicator's decisions (§1.3, last paragraph) for one kind and one peer: sources
//! in our tenant namespace for the peer (`liqo.io/replication=true`, `liqo.io/remoteID=<peer>`)
//! against their copies in the peer's tenant namespace for us (`liqo.io/replicated=true`,
//! `liqo.io/originID=<us>`). Spec, labels and annotations flow to the copy, status flows back;
//! a source keeps the finalizer `crdReplicator.liqo.io` until its copy is gone, or, once the
//! ForeignCluster is deleted, until the peer has not answered for [`let_go_after`] ([`let_go`]).
//! An in-band peer's NetworkConfig copy goes last ([`holds`]).

use std::{collections::BTreeMap, time::Duration};

use crate::{
    consts::{labels, values},
    phase::ReplicatedKind,
};
use serde_json::Value;

/// A source object.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// Its name.
    pub name: String,
    /// Being deleted.
    pub deleting: bool,
    /// Carries `crdReplicator.liqo.io`.
    pub has_finalizer: bool,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Its spec.
    pub spec: Value,
    /// Its status.
    pub status: Option<Value>,
}

/// A copy at the peer.
#[derive(Debug, Clone, PartialEq)]
pub struct Replica {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Its spec.
    pub spec: Value,
    /// Its status.
    pub status: Option<Value>,
}

/// What a copy must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    /// Its name (the source's).
    pub name: String,
    /// The source's labels but `liqo.io/ownership`, with `replication=false`,
    /// `replicated=true`, `originID=<us>`.
    pub labels: BTreeMap<String, String>,
    /// The source's annotations.
    pub annotations: BTreeMap<String, String>,
    /// The source's spec.
    pub spec: Value,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Add the finalizer to a source.
    AddFinalizer(String),
    /// Create or update a copy.
    ApplyReplica(Desired),
    /// Delete a copy.
    DeleteReplica(String),
    /// Write a copy's status on its source.
    StatusBack(String, Value),
    /// Remove the finalizer from a source whose copy is gone (or let go: [`let_go`]).
    RemoveFinalizer(String),
}

/// The replicator's finalizer on a ForeignCluster: added once the peer can be reached
/// (`Some(true)`), removed once the ForeignCluster is deleted and none of our sources for the
/// peer is left (`Some(false)`), so that a deleted ForeignCluster waits for its copies to go
/// (or for its deleted sources to be let go: [`let_go`]).
pub fn fc_finalizer(
    deleting: bool,
    has: bool,
    reachable: bool,
    sources_left: usize,
) -> Option<bool> {
    match (deleting, has) {
        (false, false) if reachable => Some(true),
        (true, true) if sources_left == 0 => Some(false),
        _ => None,
    }
}

/// The most an in-band peer is waited for (see [`let_go_after`]).
pub const IN_BAND_WAIT: Duration = Duration::from_secs(30);

/// How long the sources of a deleted ForeignCluster wait for a peer that does not answer
/// before they are let go: the network's release grace (`--network-release-grace`, what a
/// teardown waits for the peer), at most [`IN_BAND_WAIT`] for an in-band peer, whose API
/// server is reached through the tunnel that this teardown (or the peer's) takes down.
pub fn let_go_after(in_band: bool, grace: Duration) -> Duration {
    if in_band {
        grace.min(IN_BAND_WAIT)
    } else {
        grace
    }
}

/// What a deleted ForeignCluster's replicator does when the peer has not answered for
/// `silent_for` (every request since failed without an answer): once that is at least
/// `after`, the sources being deleted lose our finalizer without their copies confirmed gone
/// (the peer's own teardown deletes them; else they are left there). Sources not deleted
/// wait (they go with the peering's handshakes, which need the peer).
pub fn let_go(sources: &[Source], silent_for: Duration, after: Duration) -> Vec<Action> {
    if silent_for < after {
        return Vec::new();
    }
    sources
        .iter()
        .filter(|s| s.has_finalizer && s.deleting)
        .map(|s| Action::RemoveFinalizer(s.name.clone()))
        .collect()
}

/// The copy of a source.
pub fn desired(source: &Source, local_id: &str) -> Desired {
    let mut labels = source.labels.clone();
    labels.remove(labels::OWNERSHIP);
    labels.insert(labels::REPLICATION.into(), values::FALSE.into());
    labels.insert(labels::REPLICATED.into(), values::TRUE.into());
    labels.insert(labels::ORIGIN_ID.into(), local_id.into());
    Desired {
        name: source.name.clone(),
        labels,
        annotations: source.annotations.clone(),
        spec: source.spec.clone(),
    }
}

/// Whether the copies of sources being deleted (or withdrawn) go now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletions {
    /// They go (then the sources' finalizer).
    Proceed,
    /// They wait, sources and copies as they are ([`holds`]).
    Hold,
}

/// Whether a deleted ForeignCluster's sources of `kind` wait for its other sources
/// (`others_left`, of the other kinds, deleted or not): an in-band peer's API server is
/// reached through the tunnel, which the network manager keeps while our NetworkConfig is
/// there; so that NetworkConfig's copy goes last.
pub fn holds(
    kind: ReplicatedKind,
    in_band: bool,
    fc_deleting: bool,
    others_left: usize,
) -> Deletions {
    if kind == ReplicatedKind::NetworkConfig && in_band && fc_deleting && others_left > 0 {
        Deletions::Hold
    } else {
        Deletions::Proceed
    }
}

/// The decisions for one kind: `allowed` says whether the peering phase replicates it
/// (`crate::phase::replicated_kinds`); a kind no longer allowed is withdrawn from the peer;
/// `deletions` says whether deleted or withdrawn sources are handled now.
pub fn decide(
    allowed: bool,
    deletions: Deletions,
    local_id: &str,
    sources: &[Source],
    replicas: &[Replica],
) -> Vec<Action> {
    let by_name: BTreeMap<&str, &Replica> = replicas.iter().map(|r| (r.name.as_str(), r)).collect();
    let mut actions = Vec::new();
    for source in sources {
        let replica = by_name.get(source.name.as_str());
        if source.deleting || !allowed {
            if deletions == Deletions::Hold {
                continue;
            }
            match replica {
                Some(_) => actions.push(Action::DeleteReplica(source.name.clone())),
                None if source.has_finalizer => {
                    actions.push(Action::RemoveFinalizer(source.name.clone()))
                }
                None => {}
            }
            continue;
        }
        if !source.has_finalizer {
            actions.push(Action::AddFinalizer(source.name.clone()));
        }
        let want = desired(source, local_id);
        // The peer may add annotations of its own to the copy (a refusal): only ours count.
        let same = replica.is_some_and(|r| {
            r.spec == want.spec
                && r.labels == want.labels
                && want
                    .annotations
                    .iter()
                    .all(|(k, v)| r.annotations.get(k) == Some(v))
        });
        if !same {
            actions.push(Action::ApplyReplica(want));
        }
        if let Some(status) = replica.and_then(|r| r.status.as_ref())
            && source.status.as_ref() != Some(status)
        {
            actions.push(Action::StatusBack(source.name.clone(), status.clone()));
        }
    }
    for replica in replicas {
        if !sources.iter().any(|s| s.name == replica.name) {
            actions.push(Action::DeleteReplica(replica.name.clone()));
        }
    }
    actions
}

#[cfg(test)]
#[path = "replicate_tests.rs"]
mod tests;
