//! [`StoredPod`]: a pod as a store keeps it, its spec and status as compact JSON
//! ([`Compact`]).

use std::marker::PhantomData;

use k8s_openapi::{
    api::core::v1::{Pod, PodSpec, PodStatus},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use serde::{Deserialize, Deserializer, Serialize, de::DeserializeOwned};

/// A value kept as compact JSON, decoded only when it is read. Decoded, a small pod's spec
/// takes about 10 KiB and a small Running pod's status about 5 KiB (their many optional
/// fields, each an allocation); as JSON, about a tenth and a sixth of that.
pub struct Compact<T: Field> {
    json: Box<str>,
    // `fn() -> T`: holds no `T`, so it is `Send` and `Sync` whatever `T` is.
    of: PhantomData<fn() -> T>,
}

/// A part of a pod kept compact: its JSON always encodes (string-keyed maps only), and its
/// name says which part a [`CompactDecodeError`] is about. Sealed: the pod's spec and status.
pub trait Field: Serialize + DeserializeOwned + sealed::Sealed {
    /// The field's name in a pod (`spec`, `status`).
    const NAME: &'static str;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::PodSpec {}
    impl Sealed for super::PodStatus {}
}

impl Field for PodSpec {
    const NAME: &'static str = "spec";
}

impl Field for PodStatus {
    const NAME: &'static str = "status";
}

/// A pod's spec, compact.
pub type CompactSpec = Compact<PodSpec>;
/// A pod's status, compact.
pub type CompactStatus = Compact<PodStatus>;

/// A stored value that does not decode (never from [`Compact::new`]).
#[derive(Debug, thiserror::Error)]
#[error("a stored pod's {what} does not decode")]
pub struct CompactDecodeError {
    what: &'static str,
    #[source]
    source: serde_json::Error,
}

impl<T: Field> Compact<T> {
    /// The compact form of `value`.
    pub fn new(value: &T) -> Self {
        // A `Field` serializes to JSON without fail: its maps have string keys.
        Self {
            json: serde_json::to_string(value)
                .unwrap_or_default()
                .into_boxed_str(),
            of: PhantomData,
        }
    }

    /// The value, decoded.
    pub fn decode(&self) -> Result<T, CompactDecodeError> {
        serde_json::from_str(&self.json).map_err(|source| CompactDecodeError {
            what: T::NAME,
            source,
        })
    }

    /// The JSON kept.
    pub fn json(&self) -> &str {
        &self.json
    }
}

impl<T: Field> Clone for Compact<T> {
    fn clone(&self) -> Self {
        Self {
            json: self.json.clone(),
            of: PhantomData,
        }
    }
}

impl<T: Field> std::fmt::Debug for Compact<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Compact").field(&self.json).finish()
    }
}

impl<T: Field> PartialEq for Compact<T> {
    fn eq(&self, other: &Self) -> bool {
        self.json == other.json
    }
}

impl<T: Field> Eq for Compact<T> {}

impl<'de, T: Field> Deserialize<'de> for Compact<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(|v| Self::new(&v))
    }
}

/// A pod as a store keeps it: its metadata as the watch trimmed it, its spec and status
/// compact (the spec `None` for a store that never reads it: [`StoredPod::without_spec`]).
/// Listed and watched as a Pod (`/api/v1/pods`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StoredPod {
    /// The pod's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Its spec, compact.
    #[serde(default)]
    pub spec: Option<CompactSpec>,
    /// Its status, compact.
    #[serde(default)]
    pub status: Option<CompactStatus>,
}

impl StoredPod {
    /// The stored form of `pod`.
    pub fn from_pod(pod: &Pod) -> Self {
        Self {
            metadata: pod.metadata.clone(),
            spec: pod.spec.as_ref().map(CompactSpec::new),
            status: pod.status.as_ref().map(CompactStatus::new),
        }
    }

    /// The pod, its spec and status decoded.
    pub fn to_pod(&self) -> Result<Pod, CompactDecodeError> {
        Ok(Pod {
            metadata: self.metadata.clone(),
            spec: self.spec.as_ref().map(CompactSpec::decode).transpose()?,
            status: self
                .status
                .as_ref()
                .map(CompactStatus::decode)
                .transpose()?,
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
        assert_eq!(
            stored.status.unwrap().json(),
            r#"{"phase":"Running","podIP":"10.0.0.1"}"#
        );
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

    fn bad<T: Field>(json: &str) -> Compact<T> {
        Compact {
            json: json.into(),
            of: PhantomData,
        }
    }

    #[test]
    fn a_bad_stored_value_is_an_error_naming_the_field_not_a_panic() {
        let spec: CompactSpec = bad("{\"containers\": 3}");
        let e = spec.decode().unwrap_err();
        assert_eq!(e.to_string(), "a stored pod's spec does not decode");
        let status: CompactStatus = bad("{\"phase\": []}");
        let e = status.decode().unwrap_err();
        assert_eq!(e.to_string(), "a stored pod's status does not decode");
    }

    #[test]
    fn a_running_status_is_kept_as_its_json() {
        let status: PodStatus = serde_json::from_value(serde_json::json!({
            "phase": "Running", "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True",
                            "lastTransitionTime": "2026-12-01T09:00:00Z"}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true,
                "restartCount": 0, "state": {"running": {"startedAt": "2026-12-01T09:00:00Z"}}}]
        }))
        .unwrap();
        let kept = CompactStatus::new(&status);
        assert_eq!(kept.json(), serde_json::to_string(&status).unwrap());
        assert_eq!(kept.decode().unwrap(), status);
        assert_eq!(kept.clone(), kept);
    }

    #[test]
    fn it_is_listed_and_watched_as_pods() {
        use kube::Resource;
        assert_eq!(StoredPod::plural(&()), "pods");
        assert_eq!(StoredPod::api_version(&()), "v1");
        assert_eq!(StoredPod::kind(&()), "Pod");
    }
}
