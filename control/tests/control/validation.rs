//! What the apiserver will check in the generated CRDs: every schema is structural, every
//! pattern compiles (and means what it should), every printer column points at a field.

use crate::common;

use common::{field, schema};
use control::api::{crds, ids::LABEL_PATTERN};
use regex::Regex;
use serde_json::Value;

#[test]
fn printer_columns_point_at_fields() {
    for crd in crds() {
        let kind = crd.spec.names.kind.clone();
        let columns = crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap_or_default();
        for column in columns {
            if column.json_path.starts_with(".metadata.") {
                continue;
            }
            // Filters (`[?(@.type == 'X')]`) select list items: keep just "[]".
            let mut path = String::new();
            let mut depth = 0;
            for c in column.json_path.chars() {
                match c {
                    '[' => {
                        depth += 1;
                        if depth == 1 {
                            path.push_str("[]");
                        }
                    }
                    ']' => depth -= 1,
                    _ if depth == 0 => path.push(c),
                    _ => {}
                }
            }
            let mut node = schema(&kind);
            for step in path.trim_start_matches('.').split('.') {
                node = node["properties"][step.trim_end_matches("[]")].clone();
                if step.ends_with("[]") {
                    node = node["items"].clone();
                }
                assert!(
                    !node.is_null(),
                    "{kind}: column {} -> {}",
                    column.name,
                    column.json_path
                );
            }
        }
    }
}

/// Every pattern compiles, and accepts and refuses what it should.
#[test]
fn patterns() {
    let pattern = |kind: &str, path: &str| {
        Regex::new(field(kind, path)["pattern"].as_str().unwrap()).unwrap()
    };
    let id = pattern("ForeignCluster", "spec.clusterIdentity.clusterID");
    assert_eq!(id.as_str(), LABEL_PATTERN);
    assert!(id.is_match("b07938e3-d241-460c-a77b-e286c0f733c7") && id.is_match("milan"));
    assert!(!id.is_match("Milan") && !id.is_match("-a") && !id.is_match("a."));
    let auth = pattern("ForeignCluster", "spec.foreignAuthUrl");
    assert!(
        auth.is_match("https://172.18.0.2:31758") && auth.is_match("https://auth.milan.example")
    );
    assert!(!auth.is_match("http://172.18.0.2:31758"));
    let cidr = pattern("NetworkConfig", "spec.podCIDR");
    assert!(cidr.is_match("10.200.0.0/16") && cidr.is_match("0.0.0.0/0"));
    assert!(
        !cidr.is_match("10.200.0.0")
            && !cidr.is_match("10.256.0.0/16")
            && !cidr.is_match("10.0.0.0/33")
    );
    assert!(!cidr.is_match("None"));
    let nat = pattern("TunnelEndpoint", "spec.remoteNATPodCIDR");
    assert!(nat.is_match("None") && nat.is_match("10.71.0.0/16") && !nat.is_match("none"));
    let prices = field("ResourceOffer", "spec.prices");
    let quantity = Regex::new(prices["additionalProperties"]["pattern"].as_str().unwrap()).unwrap();
    assert!(quantity.is_match("100m") && quantity.is_match("8Gi") && quantity.is_match("1.5"));
    assert!(!quantity.is_match("lots"));
}

/// The apiserver refuses non-structural schemas: every node has a type (or is int-or-string or
/// kept as written), and no `$ref`, `oneOf`, `allOf` or `not`.
#[test]
fn schemas_are_structural() {
    fn walk(kind: &str, path: &str, node: &Value) {
        let obj = node
            .as_object()
            .unwrap_or_else(|| panic!("{kind} {path}: not an object"));
        for banned in ["$ref", "oneOf", "allOf", "not", "definitions", "$defs"] {
            assert!(!obj.contains_key(banned), "{kind} {path}: has {banned}");
        }
        let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
        let preserved = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        assert!(
            obj.get("type").is_some_and(Value::is_string) || int_or_string,
            "{kind} {path}: no type"
        );
        assert!(
            !obj.contains_key("anyOf") || int_or_string,
            "{kind} {path}: anyOf"
        );
        if preserved {
            assert_eq!(
                obj.get("properties"),
                None,
                "{kind} {path}: preserved object with fields"
            );
        }
        for (name, property) in obj
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            walk(kind, &format!("{path}.{name}"), property);
        }
        if let Some(items) = obj.get("items") {
            walk(kind, &format!("{path}[]"), items);
        }
        if let Some(additional) = obj.get("additionalProperties").filter(|v| v.is_object()) {
            walk(kind, &format!("{path}{{}}"), additional);
        }
    }
    for crd in crds() {
        let kind = crd.spec.names.kind.clone();
        walk(&kind, "", &schema(&kind));
    }
}
