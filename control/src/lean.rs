//! What the controllers' stores keep of an object (pure): what no decision reads is dropped
//! before an object is stored, so that memory grows with what is used, not with what the API
//! server sends. The watchers of the virtual kubelet and the controller manager call these on
//! every object they store.
//!
//! It never drops a field a decision of this repository reads: labels, annotations, owner
//! references, UIDs, deletion timestamps and finalizers stay.

use k8s_openapi::{
    api::core::v1::{Container, Pod, PodSpec, PodStatus},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

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

/// A provider's pod as the virtual kubelet reads it: its metadata and status (the status comes
/// home; the owner reference names its ShadowPod); the spec is the ShadowPod's, never read
/// from the pod.
pub fn remote_pod(p: &mut Pod) {
    meta(&mut p.metadata);
    p.spec = None;
}

/// A pod as the ResourceOffer reads it (`crate::offer`'s `PodInput`): its name, namespace,
/// UID and labels; its node; each container's name, restart policy and resources; the pod's
/// resources and overhead; its phase. Everything else is dropped.
pub fn offer_pod(p: &mut Pod) {
    let m = std::mem::take(&mut p.metadata);
    p.metadata = ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        labels: m.labels,
        resource_version: m.resource_version,
        ..ObjectMeta::default()
    };
    let container = |c: Container| Container {
        name: c.name,
        restart_policy: c.restart_policy,
        resources: c.resources,
        ..Container::default()
    };
    p.spec = p.spec.take().map(|s| PodSpec {
        node_name: s.node_name,
        containers: s.containers.into_iter().map(container).collect(),
        init_containers: s
            .init_containers
            .map(|cs| cs.into_iter().map(container).collect()),
        resources: s.resources,
        overhead: s.overhead,
        ..PodSpec::default()
    });
    p.status = p.status.take().map(|s| PodStatus {
        phase: s.phase,
        ..PodStatus::default()
    });
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::{
        api::core::v1::{PodSpec, PodStatus},
        apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry,
    };

    use super::*;

    #[test]
    fn managed_fields_and_the_applied_copy_go_labels_and_status_stay() {
        let mut p = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                uid: Some("u".into()),
                labels: Some(BTreeMap::from([("a".into(), "b".into())])),
                annotations: Some(BTreeMap::from([
                    (LAST_APPLIED.into(), "{...}".into()),
                    ("keep".into(), "me".into()),
                ])),
                managed_fields: Some(vec![ManagedFieldsEntry::default()]),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec::default()),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                ..PodStatus::default()
            }),
        };
        remote_pod(&mut p);
        assert_eq!(p.metadata.managed_fields, None);
        let a = p.metadata.annotations.as_ref().unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a["keep"], "me");
        assert_eq!(p.metadata.labels.as_ref().unwrap()["a"], "b");
        assert_eq!(p.metadata.uid.as_deref(), Some("u"));
        assert!(p.spec.is_none());
        assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"));
    }

    #[test]
    fn an_offer_pod_keeps_what_the_offer_reads_and_computes_the_same() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "n", "uid": "u", "labels": {"a": "b"},
                "annotations": {"x": "y"}, "managedFields": [{}]},
            "spec": {"nodeName": "n1", "hostNetwork": true, "overhead": {"cpu": "10m"},
                "containers": [{"name": "c", "image": "i", "args": ["a"],
                    "resources": {"requests": {"cpu": "100m", "memory": "1Mi"}}}],
                "initContainers": [{"name": "s", "image": "i", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "5m"}}}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1"}
        }))
        .unwrap();
        let mut lean = pod.clone();
        offer_pod(&mut lean);
        assert_eq!(
            crate::offer::PodInput::from_pod(&lean).unwrap(),
            crate::offer::PodInput::from_pod(&pod).unwrap()
        );
        let spec = lean.spec.as_ref().unwrap();
        assert_eq!(spec.containers[0].image, None);
        assert_eq!(spec.host_network, None);
        assert_eq!(lean.metadata.annotations, None);
        assert_eq!(lean.status.unwrap().pod_ip, None);
    }
}
