//! The chart's YAML files read as Kubernetes objects ([`documents`]), for applying them
//! (`objects`) and for checking how they are rewritten (`webhooks`).

use std::path::Path;

use kube::api::{DynamicObject, GroupVersionKind};

use super::error::LiqoError;

/// The objects of a YAML file of one or more documents (empty documents skipped), each with
/// its kind and a name.
pub(super) fn documents(
    path: &Path,
    text: &str,
) -> Result<Vec<(GroupVersionKind, DynamicObject)>, LiqoError> {
    let bad = |problem: String| LiqoError::Chart {
        path: path.to_owned(),
        problem,
    };
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_str_multiple(text).map_err(|e| bad(e.to_string()))?;
    let mut out = Vec::new();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        let obj: DynamicObject =
            serde_json::from_value(doc).map_err(|e| bad(format!("not an object: {e}")))?;
        let types = obj
            .types
            .as_ref()
            .ok_or_else(|| bad("an object without apiVersion/kind".into()))?;
        let gvk = GroupVersionKind::try_from(types).map_err(|e| bad(e.to_string()))?;
        if obj.metadata.name.as_deref().is_none_or(str::is_empty) {
            return Err(bad(format!("a {} without a name", gvk.kind)));
        }
        out.push((gvk, obj));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_may_hold_several_objects_and_each_needs_a_kind_and_a_name() {
        let p = Path::new("roles.yaml");
        let text = "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: a\nrules: []\n---\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: b\n  namespace: x\n";
        let objs = documents(p, text).unwrap();
        let got: Vec<(String, String, Option<String>)> = objs
            .iter()
            .map(|(g, o)| {
                (
                    g.kind.clone(),
                    o.metadata.name.clone().unwrap(),
                    o.metadata.namespace.clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("ClusterRole".into(), "a".into(), None),
                ("ServiceAccount".into(), "b".into(), Some("x".into()))
            ]
        );
        assert_eq!(objs[0].0.group, "rbac.authorization.k8s.io");
        let e = documents(p, "kind: ClusterRole\nmetadata:\n  name: a\n").unwrap_err();
        assert!(e.to_string().contains("roles.yaml"), "{e}");
        let e = documents(p, "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n").unwrap_err();
        assert!(e.to_string().contains("ConfigMap without a name"), "{e}");
        assert!(documents(p, "").unwrap().is_empty());
    }
}
