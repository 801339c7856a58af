//! What the controllers' stores keep of an object (pure): what no decision reads is dropped
//! before an object is stored, so that memory grows with what is used, not with what the API
//! server sends. The watchers of the virtual kubelet and the controller manager call these on
//! every object they store.
//!
//! It never drops a field a decision on the stored object reads. A pod's spec and status are
//! kept as compact JSON ([`StoredPod`], [`Compact`]), decoded for a decision on that pod only:
//! a tenth (the spec) and a sixth (a small Running pod's status) of their decoded memory.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::consts::reflection;

pub(crate) mod resource;

pub mod shrink;
mod stored_pod;
pub use stored_pod::{Compact, CompactDecodeError, CompactSpec, CompactStatus, StoredPod};

/// The finalizer the API server sets on an object deleted with `propagationPolicy: Orphan`
/// (`kubectl delete --cascade=orphan`): its dependents are to be kept.
pub const ORPHAN: &str = "orphan";

/// The annotation `kubectl apply` writes: a copy of the whole object as last applied.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops the managed fields (the server-side apply bookkeeping, often the largest part of an
/// object) and `kubectl apply`'s copy of the object.
pub fn meta(m: &mut ObjectMeta) {
    m.managed_fields = None;
    if let Some(a) = m.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
}

/// What [`trim`] keeps of an object's metadata besides its name, namespace, UID, resource
/// version and creation and deletion times.
struct Keep<'a> {
    labels: &'a [&'a str],
    annotations: &'a [&'a str],
    owners: bool,
    finalizers: &'a [&'a str],
}

fn trim(m: &mut ObjectMeta, keep: &Keep<'_>) {
    let taken = std::mem::take(m);
    let only = |map: Option<std::collections::BTreeMap<String, String>>, keys: &[&str]| {
        map.map(|l| {
            l.into_iter()
                .filter(|(k, _)| keys.contains(&k.as_str()))
                .collect()
        })
        .filter(|l: &std::collections::BTreeMap<String, String>| !l.is_empty())
    };
    *m = ObjectMeta {
        name: taken.name,
        namespace: taken.namespace,
        uid: taken.uid,
        resource_version: taken.resource_version,
        creation_timestamp: taken.creation_timestamp,
        deletion_timestamp: taken.deletion_timestamp,
        labels: only(taken.labels, keep.labels),
        annotations: only(taken.annotations, keep.annotations),
        owner_references: taken.owner_references.filter(|_| keep.owners),
        finalizers: taken
            .finalizers
            .map(|f| {
                f.into_iter()
                    .filter(|x| keep.finalizers.contains(&x.as_str()))
                    .collect::<Vec<_>>()
            })
            .filter(|f| !f.is_empty()),
        ..ObjectMeta::default()
    };
}

/// A remote ShadowPod as the stores keep it (its metadata only): its name, namespace, UID,
/// creation and deletion times, the reflection labels (whose it is), the digest of what
/// was forged ([`crate::consts::reflection::SHADOW_DIGEST`]) and the finalizer of a deletion
/// that orphans its pod ([`ORPHAN`]); everything else goes.
pub fn shadow(m: &mut ObjectMeta) {
    trim(
        m,
        &Keep {
            labels: &[reflection::ORIGIN, reflection::DESTINATION],
            annotations: &[reflection::SHADOW_DIGEST],
            owners: false,
            finalizers: &[ORPHAN],
        },
    );
}

/// A provider's pod as the virtual kubelet's store keeps its metadata: the reflection labels
/// (whose it is) and its owner references (which ShadowPod controls it) besides name,
/// namespace, UID and times.
pub fn remote_pod(m: &mut ObjectMeta) {
    trim(
        m,
        &Keep {
            labels: &[reflection::ORIGIN, reflection::DESTINATION],
            annotations: &[],
            owners: true,
            finalizers: &[],
        },
    );
}

/// A pod a ShadowPod made, as the provider's ShadowPod controller keeps its metadata: its
/// owner references (which ShadowPod controls it) besides name, namespace, UID and times.
pub fn owned_pod(m: &mut ObjectMeta) {
    trim(
        m,
        &Keep {
            labels: &[],
            annotations: &[],
            owners: true,
            finalizers: &[],
        },
    );
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};

    use super::*;

    #[test]
    fn managed_fields_and_the_applied_copy_go_labels_stay() {
        let mut m = ObjectMeta {
            name: Some("p".into()),
            uid: Some("u".into()),
            labels: Some(BTreeMap::from([("a".into(), "b".into())])),
            annotations: Some(BTreeMap::from([
                (LAST_APPLIED.into(), "{...}".into()),
                ("keep".into(), "me".into()),
            ])),
            managed_fields: Some(vec![ManagedFieldsEntry::default()]),
            ..ObjectMeta::default()
        };
        meta(&mut m);
        assert_eq!(m.managed_fields, None);
        let a = m.annotations.as_ref().unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a["keep"], "me");
        assert_eq!(m.labels.as_ref().unwrap()["a"], "b");
        assert_eq!(m.uid.as_deref(), Some("u"));
    }

    #[test]
    fn a_shadow_keeps_whose_it_is_its_digest_and_its_times() {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let mut m = ObjectMeta {
            name: Some("p".into()),
            namespace: Some("n".into()),
            uid: Some("u".into()),
            creation_timestamp: Some(now.clone()),
            deletion_timestamp: Some(now.clone()),
            labels: Some(BTreeMap::from([
                ("app".into(), "x".into()),
                (reflection::ORIGIN.into(), "home".into()),
                (reflection::DESTINATION.into(), "away".into()),
            ])),
            annotations: Some(BTreeMap::from([
                ("big".into(), "x".repeat(1000)),
                (reflection::SHADOW_DIGEST.into(), "d".into()),
            ])),
            managed_fields: Some(vec![ManagedFieldsEntry::default()]),
            finalizers: Some(vec!["f".into(), ORPHAN.into()]),
            ..ObjectMeta::default()
        };
        shadow(&mut m);
        assert_eq!(m.name.as_deref(), Some("p"));
        assert_eq!(m.namespace.as_deref(), Some("n"));
        assert_eq!(m.uid.as_deref(), Some("u"));
        assert_eq!(m.creation_timestamp, Some(now.clone()));
        assert_eq!(m.deletion_timestamp, Some(now));
        let labels = m.labels.unwrap();
        assert_eq!(labels.len(), 2);
        assert_eq!(labels[reflection::ORIGIN], "home");
        assert_eq!(
            m.annotations.unwrap(),
            BTreeMap::from([(reflection::SHADOW_DIGEST.into(), "d".into())])
        );
        assert_eq!(m.managed_fields, None);
        // Only the orphan finalizer (whether its pod is to be kept) stays.
        assert_eq!(m.finalizers, Some(vec![ORPHAN.to_owned()]));
    }

    #[test]
    fn a_remote_pod_keeps_whose_it_is_and_its_owner_an_owned_pod_its_owner() {
        let owner = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            kind: "ShadowPod".into(),
            uid: "s".into(),
            controller: Some(true),
            ..Default::default()
        };
        let full = ObjectMeta {
            name: Some("p".into()),
            uid: Some("u".into()),
            labels: Some(BTreeMap::from([
                ("app".into(), "x".into()),
                (reflection::ORIGIN.into(), "home".into()),
            ])),
            annotations: Some(BTreeMap::from([("a".into(), "b".into())])),
            owner_references: Some(vec![owner.clone()]),
            generate_name: Some("p-".into()),
            ..ObjectMeta::default()
        };
        let mut m = full.clone();
        remote_pod(&mut m);
        assert_eq!(
            m.labels,
            Some(BTreeMap::from([(reflection::ORIGIN.into(), "home".into())]))
        );
        assert_eq!(m.annotations, None);
        assert_eq!(m.owner_references, Some(vec![owner.clone()]));
        assert_eq!((m.generate_name, m.uid), (None, Some("u".into())));
        let mut m = full;
        owned_pod(&mut m);
        assert_eq!((m.labels, m.annotations), (None, None));
        assert_eq!(m.owner_references, Some(vec![owner]));
        assert_eq!(m.name.as_deref(), Some("p"));
    }
}
