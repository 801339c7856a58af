//! The gateway's Service(s) in the Liqo namespace (label `net.liqo.io/gateway=true`): the
//! gateway operator writes annotation `net.liqo.io/gatewayNodeIP` = its node's InternalIP, which
//! the network manager announces to peers when the Service is a NodePort (it has no ingress
//! address). Only that annotation is written (a merge patch), only when it differs.

use control::consts::{net, values};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams},
};

use super::error::{KubeError, api};

/// The label selector of the gateway's Services.
pub fn selector() -> String {
    format!("{}={}", net::GATEWAY_SERVICE_LABEL, values::TRUE)
}

/// The Services (by name) whose node-IP annotation is not `ip`, with the merge patch that sets
/// it.
pub fn patches(services: &[Service], ip: &str) -> Vec<(String, serde_json::Value)> {
    services
        .iter()
        .filter(|s| {
            s.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(net::GATEWAY_NODE_IP_ANNOTATION))
                .map(String::as_str)
                != Some(ip)
        })
        .filter_map(|s| {
            let name = s.metadata.name.clone()?;
            let patch = serde_json::json!({"metadata": {
                // A precondition: never written to a newer Service of the same name.
                "uid": s.metadata.uid,
                "annotations": {net::GATEWAY_NODE_IP_ANNOTATION: ip},
            }});
            Some((name, patch))
        })
        .collect()
}

/// Writes `ip` on every gateway Service of namespace `ns` that does not say it yet; returns
/// the names written.
pub async fn annotate_node_ip(
    client: &Client,
    ns: &str,
    ip: &str,
    manager: &str,
) -> Result<Vec<String>, KubeError> {
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let list = services
        .list(&ListParams::default().labels(&selector()))
        .await
        .map_err(api(format!("listing the gateway Services in {ns}")))?;
    let mut written = Vec::new();
    for (name, patch) in patches(&list.items, ip) {
        services
            .patch(
                &name,
                &PatchParams {
                    field_manager: Some(manager.into()),
                    ..PatchParams::default()
                },
                &Patch::Merge(patch),
            )
            .await
            .map_err(api(format!(
                "writing {} on Service {ns}/{name}",
                net::GATEWAY_NODE_IP_ANNOTATION
            )))?;
        written.push(name);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str, ip: Option<&str>) -> Service {
        let mut s = Service::default();
        s.metadata.name = Some(name.into());
        s.metadata.uid = Some(format!("uid-{name}"));
        s.metadata.annotations = ip.map(|ip| {
            [
                (net::GATEWAY_NODE_IP_ANNOTATION.to_owned(), ip.to_owned()),
                ("other".to_owned(), "kept".to_owned()),
            ]
            .into()
        });
        s
    }

    #[test]
    fn only_services_without_the_nodes_ip_are_patched_and_only_the_annotation() {
        let list = [
            svc("none", None),
            svc("stale", Some("172.30.0.9")),
            svc("ok", Some("172.30.0.1")),
        ];
        let p = patches(&list, "172.30.0.1");
        let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["none", "stale"]);
        assert_eq!(
            p[1].1,
            serde_json::json!({"metadata": {"uid": "uid-stale",
                "annotations": {"net.liqo.io/gatewayNodeIP": "172.30.0.1"}}})
        );
        assert!(patches(&list[2..], "172.30.0.1").is_empty());
        assert_eq!(selector(), "net.liqo.io/gateway=true");
    }
}
