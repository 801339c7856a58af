//! The replicator's pure conversions: an object read (source or copy) to the decider's input,
//! and the merge patch that removes the keys an object loses (a server-side apply that empties
//! an object it owned leaves it null, which a CRD may refuse, so the replicator first nulls the
//! keys gone). It never reads or writes the API.

use std::collections::BTreeMap;

use control::consts::finalizers;
use kube::{ResourceExt, api::DynamicObject};
use serde_json::Value;

use control::peering::replicate::{Replica, Source};

/// The merge patch removing from `old` the keys `new` lacks (nested objects included), if any.
pub(super) fn removed(old: &Value, new: &Value) -> Option<Value> {
    let (Value::Object(old), Value::Object(new)) = (old, new) else {
        return None;
    };
    let mut out = serde_json::Map::new();
    for (k, v) in old {
        match new.get(k) {
            None => {
                out.insert(k.clone(), Value::Null);
            }
            Some(n) => {
                if let Some(inner) = removed(v, n) {
                    out.insert(k.clone(), inner);
                }
            }
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// A label or annotation map, empty when absent.
fn meta_map(m: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    m.cloned().unwrap_or_default()
}

/// A top-level field, absent when null.
fn field(o: &DynamicObject, key: &str) -> Option<Value> {
    o.data.get(key).cloned().filter(|v| !v.is_null())
}

/// A source of ours as the decider sees it.
pub(super) fn source(o: &DynamicObject) -> Source {
    Source {
        name: o.name_any(),
        deleting: o.metadata.deletion_timestamp.is_some(),
        has_finalizer: o
            .finalizers()
            .iter()
            .any(|f| f == finalizers::CRD_REPLICATOR),
        labels: meta_map(o.metadata.labels.as_ref()),
        annotations: meta_map(o.metadata.annotations.as_ref()),
        spec: field(o, "spec").unwrap_or(Value::Null),
        status: field(o, "status"),
    }
}

/// A peer's copy as the decider sees it.
pub(super) fn replica(o: &DynamicObject) -> Replica {
    Replica {
        name: o.name_any(),
        labels: meta_map(o.metadata.labels.as_ref()),
        annotations: meta_map(o.metadata.annotations.as_ref()),
        spec: field(o, "spec").unwrap_or(Value::Null),
        status: field(o, "status"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn keys_the_new_value_lacks_are_nulled_nested_ones_too() {
        let old = json!({"desiredMapping": {"a": "a", "b": "b"}, "x": 1});
        let new = json!({"desiredMapping": {"b": "b"}, "x": 1});
        assert_eq!(
            super::removed(&old, &new),
            Some(json!({"desiredMapping": {"a": null}}))
        );
        assert_eq!(super::removed(&new, &new), None);
        assert_eq!(
            super::removed(&old, &json!({})),
            Some(json!({"desiredMapping": null, "x": null}))
        );
    }
}
