//! Helpers shared by the CRD tests: a kind's CRD, its schema, one field's schema.

use control::api::crds;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// The CRD of a kind.
pub(crate) fn crd(kind: &str) -> CustomResourceDefinition {
    crds()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"))
}

/// The openAPIV3Schema of a kind, as JSON.
pub(crate) fn schema(kind: &str) -> Value {
    let crd = crd(kind);
    let schema = crd.spec.versions[0].schema.as_ref().unwrap();
    serde_json::to_value(schema.open_api_v3_schema.as_ref().unwrap()).unwrap()
}

/// The schema of a field, by its dotted path (`spec.clusterSelector`).
pub(crate) fn field(kind: &str, path: &str) -> Value {
    let mut node = schema(kind);
    for name in path.split('.') {
        node = node["properties"][name].clone();
        assert!(!node.is_null(), "{kind}: no field {path}");
    }
    node
}
