//! The gateway operator's own pod with active/standby replicas: labelled
//! [`net::GATEWAY_ACTIVE_LABEL`] while it is the active one (the gateway Service selects that
//! label), the label removed while it is a standby. A merge patch of that one label.

use control::consts::net;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams},
};

use super::error::{KubeError, api};

/// The label patch: `"true"` when active, removed otherwise.
pub fn label_patch(active: bool) -> serde_json::Value {
    let value = if active {
        serde_json::Value::from("true")
    } else {
        serde_json::Value::Null
    };
    serde_json::json!({"metadata": {"labels": {net::GATEWAY_ACTIVE_LABEL: value}}})
}

/// Labels pod `ns/name` active or standby.
pub async fn mark(client: &Client, ns: &str, name: &str, active: bool) -> Result<(), KubeError> {
    let state = if active { "active" } else { "standby" };
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(label_patch(active)),
        )
        .await
        .map_err(api(format!("labelling pod {ns}/{name} {state}")))?;
    Ok(())
}

/// Removes the label from every pod of `ns` carrying it but `me`.
pub async fn unmark_others(client: &Client, ns: &str, me: &str) -> Result<(), KubeError> {
    let marked = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("{}=true", net::GATEWAY_ACTIVE_LABEL)))
        .await
        .map_err(api(format!("listing the pods of {ns} marked active")))?;
    for p in marked.items {
        let name = p.metadata.name.unwrap_or_default();
        if name != me {
            tracing::info!(pod = %name, "unmarking another pod marked active");
            mark(client, ns, &name, false).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_patch_sets_or_removes_the_one_label() {
        let on = super::label_patch(true);
        assert_eq!(
            on["metadata"]["labels"]["net.liqo.io/gateway-active"],
            "true"
        );
        let off = super::label_patch(false);
        assert!(off["metadata"]["labels"]["net.liqo.io/gateway-active"].is_null());
        assert_eq!(off["metadata"]["labels"].as_object().unwrap().len(), 1);
    }
}
