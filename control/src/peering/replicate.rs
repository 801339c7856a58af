//! The CRD replicator's decisions (§1.3, last paragraph) for one kind and one peer: sources
//! in our tenant namespace for the peer (`liqo.io/replication=true`, `liqo.io/remoteID=<peer>`)
//! against their copies in the peer's tenant namespace for us (`liqo.io/replicated=true`,
//! `liqo.io/originID=<us>`). Spec, labels and annotations flow to the copy, status flows back;
//! a source keeps the finalizer `crdReplicator.liqo.io` until its copy is gone, or, once the
//! ForeignCluster is deleted, until the peer has not answered for [`let_go_after`] ([`let_go`]).

use std::{collections::BTreeMap, time::Duration};

use crate::{
    consts::{labels, values},
    phase::ReplicatedKind,
};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// A source object.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// Its name.
    pub name: String,
    /// Being deleted since then.
    pub deleting_since: Option<Timestamp>,
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
    /// Remove the finalizer from a source whose copy is gone.
    RemoveFinalizer(String),
}

/// The replicator's finalizer on a ForeignCluster: added once the peer can be reached
/// (`Some(true)`), removed once the ForeignCluster is deleted and none of our sources for the
/// peer is left (`Some(false)`), so that a deleted ForeignCluster waits for its copies to go.
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

/// What a deleted ForeignCluster's replicator does when the peer does not answer: the
/// sources being deleted for at least `after` (at `now`) lose our finalizer without their
/// copies confirmed gone (the peer's own teardown deletes them; else they are left there).
/// Sources not deleted, or deleted for less, wait.
pub fn let_go(sources: &[Source], now: Timestamp, after: Duration) -> Vec<Action> {
    sources
        .iter()
        .filter(|s| s.has_finalizer)
        .filter(|s| {
            s.deleting_since.is_some_and(|since| {
                now.duration_since(since)
                    .try_into()
                    .is_ok_and(|d: Duration| d >= after)
            })
        })
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
/// there; so that NetworkConfig goes last.
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
        if source.deleting_since.is_some() || !allowed {
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
mod tests {
    use serde_json::json;

    use super::*;

    fn source(name: &str, deleting: bool, has_finalizer: bool) -> Source {
        Source {
            name: name.into(),
            deleting_since: deleting.then(|| "2026-11-23T08:00:00Z".parse().unwrap()),
            has_finalizer,
            labels: [
                (labels::REPLICATION.to_string(), values::TRUE.to_string()),
                (labels::REMOTE_ID.to_string(), "milan-id".to_string()),
                (labels::OWNERSHIP.to_string(), "x".to_string()),
            ]
            .into(),
            annotations: [("a".to_string(), "b".to_string())].into(),
            spec: json!({"authUrl": "https://rome.example:443"}),
            status: None,
        }
    }

    fn replica_of(s: &Source, status: Option<Value>) -> Replica {
        let d = desired(s, "rome-id");
        Replica {
            name: d.name,
            labels: d.labels,
            annotations: d.annotations,
            spec: d.spec,
            status,
        }
    }

    #[test]
    fn the_copy_drops_ownership_and_marks_its_origin() {
        let d = desired(&source("rome", false, true), "rome-id");
        assert_eq!(d.labels.get(labels::OWNERSHIP), None);
        assert_eq!(d.labels[labels::REPLICATION], "false");
        assert_eq!(d.labels[labels::REPLICATED], "true");
        assert_eq!(d.labels[labels::ORIGIN_ID], "rome-id");
        assert_eq!(d.labels[labels::REMOTE_ID], "milan-id");
        assert_eq!(d.annotations["a"], "b");
    }

    #[test]
    fn a_new_source_gets_the_finalizer_and_a_copy() {
        let s = source("rome", false, false);
        let a = decide(
            true,
            Deletions::Proceed,
            "rome-id",
            std::slice::from_ref(&s),
            &[],
        );
        assert_eq!(
            a,
            vec![
                Action::AddFinalizer("rome".into()),
                Action::ApplyReplica(desired(&s, "rome-id"))
            ]
        );
    }

    #[test]
    fn an_up_to_date_copy_sends_its_status_back_once() {
        let mut s = source("rome", false, true);
        let status = json!({"offerState": "Created"});
        let r = replica_of(&s, Some(status.clone()));
        let a = decide(
            true,
            Deletions::Proceed,
            "rome-id",
            std::slice::from_ref(&s),
            std::slice::from_ref(&r),
        );
        assert_eq!(a, vec![Action::StatusBack("rome".into(), status.clone())]);
        s.status = Some(status);
        assert!(decide(true, Deletions::Proceed, "rome-id", &[s], &[r]).is_empty());
    }

    #[test]
    fn a_changed_spec_is_applied_again() {
        let s = source("rome", false, true);
        let mut r = replica_of(&s, None);
        r.spec = json!({"authUrl": "https://old.example"});
        let a = decide(
            true,
            Deletions::Proceed,
            "rome-id",
            std::slice::from_ref(&s),
            &[r],
        );
        assert_eq!(a, vec![Action::ApplyReplica(desired(&s, "rome-id"))]);
    }

    #[test]
    fn annotations_the_peer_adds_to_a_copy_are_left_alone() {
        let s = source("rome", false, true);
        let mut r = replica_of(&s, None);
        r.annotations
            .insert("net.liqo.io/refused".into(), "spec.podCIDR: bad".into());
        assert!(
            decide(
                true,
                Deletions::Proceed,
                "rome-id",
                std::slice::from_ref(&s),
                &[r.clone()]
            )
            .is_empty()
        );
        // One of ours missing or changed is applied again.
        r.annotations.insert("a".into(), "changed".into());
        assert_eq!(
            decide(
                true,
                Deletions::Proceed,
                "rome-id",
                std::slice::from_ref(&s),
                &[r]
            ),
            vec![Action::ApplyReplica(desired(&s, "rome-id"))]
        );
    }

    #[test]
    fn deletion_removes_the_copy_then_the_finalizer() {
        let s = source("rome", true, true);
        let r = replica_of(&s, None);
        assert_eq!(
            decide(
                true,
                Deletions::Proceed,
                "rome-id",
                std::slice::from_ref(&s),
                &[r]
            ),
            vec![Action::DeleteReplica("rome".into())]
        );
        assert_eq!(
            decide(
                true,
                Deletions::Proceed,
                "rome-id",
                std::slice::from_ref(&s),
                &[]
            ),
            vec![Action::RemoveFinalizer("rome".into())]
        );
        let gone = source("rome", true, false);
        assert!(decide(true, Deletions::Proceed, "rome-id", &[gone], &[]).is_empty());
    }

    #[test]
    fn a_kind_no_longer_allowed_is_withdrawn() {
        let s = source("rome", false, true);
        let r = replica_of(&s, None);
        assert_eq!(
            decide(
                false,
                Deletions::Proceed,
                "rome-id",
                std::slice::from_ref(&s),
                &[r]
            ),
            vec![Action::DeleteReplica("rome".into())]
        );
        assert_eq!(
            decide(false, Deletions::Proceed, "rome-id", &[s], &[]),
            vec![Action::RemoveFinalizer("rome".into())]
        );
        // Never replicated: nothing.
        assert!(
            decide(
                false,
                Deletions::Proceed,
                "rome-id",
                &[source("x", false, false)],
                &[]
            )
            .is_empty()
        );
    }

    #[test]
    fn the_foreign_cluster_waits_for_its_sources() {
        assert_eq!(fc_finalizer(false, false, true, 0), Some(true));
        assert_eq!(fc_finalizer(false, false, false, 0), None);
        assert_eq!(fc_finalizer(false, true, true, 3), None);
        assert_eq!(fc_finalizer(true, true, true, 1), None);
        assert_eq!(fc_finalizer(true, true, false, 0), Some(false));
        assert_eq!(fc_finalizer(true, false, true, 0), None);
    }

    #[test]
    fn an_orphan_copy_is_deleted() {
        let s = source("gone", false, true);
        let r = replica_of(&s, None);
        assert_eq!(
            decide(true, Deletions::Proceed, "rome-id", &[], &[r]),
            vec![Action::DeleteReplica("gone".into())]
        );
    }

    #[test]
    fn a_peer_that_does_not_answer_is_waited_for_then_its_sources_are_let_go() {
        let grace = Duration::from_secs(300);
        assert_eq!(let_go_after(false, grace), grace);
        assert_eq!(let_go_after(true, grace), IN_BAND_WAIT);
        assert_eq!(
            let_go_after(true, Duration::from_secs(5)),
            Duration::from_secs(5)
        );
        // Deleted at 08:00:00.
        let deleted = source("ours", true, true);
        let kept = source("kept", false, true);
        let released = source("released", true, false);
        let all = [deleted, kept, released];
        let at = |t: &str| t.parse::<Timestamp>().unwrap();
        assert!(let_go(&all, at("2026-11-23T08:00:29Z"), IN_BAND_WAIT).is_empty());
        assert_eq!(
            let_go(&all, at("2026-11-23T08:00:30Z"), IN_BAND_WAIT),
            vec![Action::RemoveFinalizer("ours".into())]
        );
        // A deletion from the future (clock skew) waits.
        assert!(let_go(&all, at("2026-11-23T07:00:00Z"), Duration::ZERO).is_empty());
    }

    #[test]
    fn an_in_band_network_config_goes_last() {
        use ReplicatedKind::*;
        assert_eq!(holds(NetworkConfig, true, true, 2), Deletions::Hold);
        for (kind, in_band, deleting, others) in [
            (NetworkConfig, true, true, 0),
            (NetworkConfig, false, true, 2),
            (NetworkConfig, true, false, 2),
            (ResourceRequest, true, true, 2),
        ] {
            assert_eq!(
                holds(kind, in_band, deleting, others),
                Deletions::Proceed,
                "{kind:?}"
            );
        }
        // Held: the deleted source and its copy stay as they are.
        let s = source("rome", true, true);
        let r = replica_of(&s, None);
        let held = |r: &[Replica]| {
            decide(
                true,
                Deletions::Hold,
                "rome-id",
                std::slice::from_ref(&s),
                r,
            )
        };
        assert!(held(std::slice::from_ref(&r)).is_empty());
        assert!(held(&[]).is_empty());
    }
}
