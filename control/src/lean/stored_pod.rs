//! [`StoredPod`]: a pod as a store keeps it, its spec as compact JSON.

use k8s_openapi::{
    api::core::v1::{Pod, PodSpec, PodStatus},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use serde::{Deserialize, Deserializer};

/// A pod's spec as compact JSON: decoded (about 10 KiB for a small pod) only when it is read;
/// stored, its JSON is about a tenth of that.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactSpec(Box<str>);

/// A stored spec that does not decode (never from [`CompactSpec::new`]).
#[derive(Debug, thiserror::Error)]
#[error("a stored pod spec does not decode")]
pub struct SpecDecodeError(#[source] serde_json::Error);

impl CompactSpec {
    /// The compact form of `spec`.
    pub fn new(spec: &PodSpec) -> Self {
        // A PodSpec serializes to JSON without fail: its maps have string keys.
        Self(
            serde_json::to_string(spec)
                .unwrap_or_default()
                .into_boxed_str(),
        )
    }

    /// The spec, decoded.
    pub fn decode(&self) -> Result<PodSpec, SpecDecodeError> {
        serde_json::from_str(&self.0).map_err(SpecDecodeError)
    }

    /// The JSON kept.
    pub fn json(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for CompactSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        PodSpec::deserialize(d).map(|s| Self::new(&s))
    }
}

/// A pod as a store keeps it: its metadata and status as the API server sent them, its spec
/// compact (`None` for a store that never reads it: [`StoredPod::without_spec`]). Listed and
/// watched as a Pod (`/api/v1/pods`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StoredPod {
    /// The pod's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Its spec, compact.
    #[serde(default)]
    pub spec: Option<CompactSpec>,
    /// Its status.
    #[serde(default)]
    pub status: Option<PodStatus>,
}

impl StoredPod {
    /// The stored form of `pod`.
    pub fn from_pod(pod: &Pod) -> Self {
        Self {
            metadata: pod.metadata.clone(),
            spec: pod.spec.as_ref().map(CompactSpec::new),
            status: pod.status.clone(),
        }
    }

    /// The pod, its spec decoded.
    pub fn to_pod(&self) -> Result<Pod, SpecDecodeError> {
        Ok(Pod {
            metadata: self.metadata.clone(),
            spec: self.spec.as_ref().map(CompactSpec::decode).transpose()?,
            status: self.status.clone(),
        })
    }

    /// Drops the spec (a store that reads only the metadata and the status).
    pub fn without_spec(&mut self) {
        self.spec = None;
    }
}

crate::lean::resource::pod_resource!(StoredPod);

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "uid": "u", "labels": {"a": "b"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "100m"}}}],
                "volumes": [{"name": "v", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1"}
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_read_as_stored_gives_back_the_same_pod() {
        let json = serde_json::to_string(&pod()).unwrap();
        let stored: StoredPod = serde_json::from_str(&json).unwrap();
        assert_eq!(stored.to_pod().unwrap(), pod());
        assert_eq!(StoredPod::from_pod(&pod()).to_pod().unwrap(), pod());
        assert!(stored.spec.unwrap().json().len() < json.len());
    }

    #[test]
    fn without_spec_keeps_metadata_and_status() {
        let mut stored = StoredPod::from_pod(&pod());
        stored.without_spec();
        let back = stored.to_pod().unwrap();
        assert_eq!(back.spec, None);
        assert_eq!(back.metadata, pod().metadata);
        assert_eq!(back.status, pod().status);
    }

    #[test]
    fn a_bad_stored_spec_is_an_error_not_a_panic() {
        let bad = CompactSpec("{\"containers\": 3}".into());
        assert!(bad.decode().is_err());
    }

    #[test]
    fn it_is_listed_and_watched_as_pods() {
        use kube::Resource;
        assert_eq!(StoredPod::plural(&()), "pods");
        assert_eq!(StoredPod::api_version(&()), "v1");
        assert_eq!(StoredPod::kind(&()), "Pod");
    }
}
