//! Shared fixtures: the two clusters, the namespace pair, the virtual node, and helpers to
//! build objects from JSON and to unwrap actions.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::{
    api::ClusterId,
    reflection::{Action, Ctx, Inputs, ServiceState},
};

/// The home (consumer) cluster.
pub(super) const HOME: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
/// The provider.
pub(super) const FOREIGN: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";
/// Another cluster (neither home nor the provider).
pub(super) const OTHER: &str = "11111111-2222-4333-8444-555555555555";
/// The local namespace.
pub(super) const LOCAL_NS: &str = "demo";
/// The remote namespace it is offloaded to.
pub(super) const REMOTE_NS: &str = "demo-rome";
/// The provider's virtual node.
pub(super) const NODE: &str = "liqo-milan";

/// The reflection labels, spelled as the spec does.
pub(super) const ORIGIN: &str = "virtualkubelet.liqo.io/origin";
pub(super) const DESTINATION: &str = "virtualkubelet.liqo.io/destination";

/// The cluster IDs, parsed (a [`Ctx`] borrows them).
pub(super) struct Ids {
    pub(super) home: ClusterId,
    pub(super) foreign: ClusterId,
}

pub(super) fn ids() -> Ids {
    Ids {
        home: HOME.parse().unwrap(),
        foreign: FOREIGN.parse().unwrap(),
    }
}

impl Ids {
    /// The context of namespace [`LOCAL_NS`] offloaded to [`REMOTE_NS`].
    pub(super) fn ctx(&self) -> Ctx<'_> {
        self.ctx_in(LOCAL_NS)
    }

    /// The context of local namespace `ns` offloaded to [`REMOTE_NS`].
    pub(super) fn ctx_in<'a>(&'a self, ns: &'a str) -> Ctx<'a> {
        Ctx {
            home: &self.home,
            foreign: &self.foreign,
            local_namespace: ns,
            remote_namespace: REMOTE_NS,
            node: NODE,
        }
    }
}

/// No inputs (every kind but EndpointSlices).
pub(super) fn no_inputs() -> Inputs {
    Inputs::default()
}

/// The inputs of an EndpointSlice whose Service stands at `service`, with address answers.
pub(super) fn slice_inputs(service: ServiceState, addresses: &[(&str, &str)]) -> Inputs {
    Inputs {
        addresses: addresses
            .iter()
            .map(|(l, r)| ((*l).to_owned(), (*r).to_owned()))
            .collect(),
        service,
        ..Inputs::default()
    }
}

/// An object from its JSON.
pub(super) fn obj<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The JSON of an object.
pub(super) fn json_of<T: serde::Serialize>(o: &T) -> Value {
    serde_json::to_value(o).unwrap()
}

/// The reflection labels of a copy made by home for the provider, plus `more`.
pub(super) fn ours_labels(more: Value) -> Value {
    let mut l = json!({ ORIGIN: HOME, DESTINATION: FOREIGN });
    if let (Value::Object(l), Value::Object(m)) = (&mut l, more) {
        l.extend(m);
    }
    l
}

/// What the API server adds to the metadata of any object it stores.
pub(super) fn server_meta(name: &str, uid: &str) -> Value {
    json!({
        "name": name, "namespace": REMOTE_NS, "uid": uid, "resourceVersion": "4242",
        "creationTimestamp": "2026-03-04T05:06:07Z", "generation": 1,
        "managedFields": [{"manager": "reflection.liqo.io", "operation": "Apply",
                           "apiVersion": "v1", "time": "2026-03-04T05:06:07Z"}]
    })
}

/// The labels of `meta` (empty if none).
pub(super) fn labels(meta: &ObjectMeta) -> BTreeMap<String, String> {
    meta.labels.clone().unwrap_or_default()
}

/// The object of an [`Action::Create`], or a panic naming the action.
pub(super) fn created<K: std::fmt::Debug>(a: Action<K>) -> K {
    match a {
        Action::Create(k) => *k,
        other => panic!("expected Create, got {other:?}"),
    }
}

/// The object of an [`Action::Apply`], or a panic naming the action.
pub(super) fn applied<K: std::fmt::Debug>(a: Action<K>) -> K {
    match a {
        Action::Apply(k) => *k,
        other => panic!("expected Apply, got {other:?}"),
    }
}

/// Asserts that `meta` is that of a copy: name, remote namespace, the reflection labels and
/// nothing the API server sets.
pub(super) fn assert_copy_meta(meta: &ObjectMeta, name: &str) {
    assert_eq!(meta.name.as_deref(), Some(name));
    assert_eq!(meta.namespace.as_deref(), Some(REMOTE_NS));
    let l = labels(meta);
    assert_eq!(l.get(ORIGIN).map(String::as_str), Some(HOME), "{l:?}");
    assert_eq!(
        l.get(DESTINATION).map(String::as_str),
        Some(FOREIGN),
        "{l:?}"
    );
    assert_eq!(meta.uid, None);
    assert_eq!(meta.resource_version, None);
    assert_eq!(meta.creation_timestamp, None);
    assert_eq!(meta.managed_fields, None);
    assert_eq!(meta.owner_references, None);
}
