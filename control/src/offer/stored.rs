//! [`OfferPod`]: a pod as the offer's store keeps it, read once into a [`PodInput`].

use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use serde::{Deserialize, Deserializer};

use super::{BadInput, PodInput};
use crate::consts::labels;

/// A pod as the offer's store keeps it: its name, namespace, UID and resource version (the
/// watch resumes from the last one it saw), and what the offer reads of it
/// ([`PodInput`], with only the labels the offer reads), or why that does not read (a bad
/// quantity: the offer names the pod, if it runs). Listed and watched as a Pod: a few hundred
/// bytes where the decoded pod takes ten kilobytes.
#[derive(Clone, Debug, PartialEq)]
pub struct OfferPod {
    /// The pod's name, namespace, UID and resource version only.
    pub metadata: ObjectMeta,
    /// Its phase is `Running` (the offer counts only those).
    pub running: bool,
    /// What the offer reads, or why it does not read.
    pub input: Result<PodInput, BadInput>,
}

impl OfferPod {
    /// What the offer's store keeps of `pod`.
    pub fn from_pod(pod: &Pod) -> Self {
        let input = PodInput::from_pod(pod).map(|mut i| {
            i.labels
                .retain(|k, _| k == labels::SHADOW_POD || k == labels::OFFLOADED_ORIGIN);
            i
        });
        Self {
            metadata: ObjectMeta {
                name: pod.metadata.name.clone(),
                namespace: pod.metadata.namespace.clone(),
                uid: pod.metadata.uid.clone(),
                // Without it, kube's watcher takes every event for an error and lists again.
                resource_version: pod.metadata.resource_version.clone(),
                ..ObjectMeta::default()
            },
            running: pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"),
            input,
        }
    }
}

impl<'de> Deserialize<'de> for OfferPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Pod::deserialize(d).map(|p| Self::from_pod(&p))
    }
}

crate::lean::resource::pod_resource!(OfferPod);

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(cpu: &str, phase: &str) -> serde_json::Value {
        serde_json::json!({
            "metadata": {"name": "p", "namespace": "n", "uid": "u", "resourceVersion": "42",
                "labels": {"app": "b", "liqo.io/shadowPod": "true"},
                "annotations": {"x": "y"}, "managedFields": [{}]},
            "spec": {"nodeName": "n1", "hostNetwork": true, "overhead": {"cpu": "10m"},
                "containers": [{"name": "c", "image": "i", "args": ["a"],
                    "resources": {"requests": {"cpu": cpu, "memory": "1Mi"}}}],
                "initContainers": [{"name": "s", "image": "i", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "5m"}}}]},
            "status": {"phase": phase, "podIP": "10.0.0.1"}
        })
    }

    #[test]
    fn it_reads_as_the_offer_reads_the_pod_keeping_only_the_offers_labels() {
        let full: Pod = serde_json::from_value(pod("100m", "Running")).unwrap();
        let stored: OfferPod = serde_json::from_value(pod("100m", "Running")).unwrap();
        let mut expected = PodInput::from_pod(&full).unwrap();
        expected.labels.remove("app");
        assert_eq!(stored.input, Ok(expected));
        assert_eq!(stored.metadata.name.as_deref(), Some("p"));
        assert_eq!(stored.metadata.namespace.as_deref(), Some("n"));
        assert_eq!(stored.metadata.uid.as_deref(), Some("u"));
        assert_eq!(stored.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(stored.metadata.annotations, None);
        assert!(stored.running);
        let pending: OfferPod = serde_json::from_value(pod("100m", "Pending")).unwrap();
        assert!(!pending.running);
    }

    #[test]
    fn a_bad_quantity_is_kept_as_the_error_naming_the_pod() {
        let stored: OfferPod = serde_json::from_value(pod("lots", "Pending")).unwrap();
        let err = stored.input.clone().unwrap_err();
        assert_eq!(err.object, "pod n/p");
        assert!(err.field.contains("cpu"), "{err:?}");
        assert!(!stored.running);
    }
}
