//! Cluster DNS of a lab with real nodes: CoreDNS (built from the Go module proxy) as a process
//! in the API node's namespace, serving `cluster.local` at the node's LAN address with a
//! certificate of `system:coredns`, and the `kube-dns` Service (the service CIDR's tenth
//! address, the kubelets' `clusterDNS`) whose one endpoint is that address; kube-proxy on every
//! node sends the pods' queries there.

use k8s_openapi::api::{
    core::v1::Service,
    discovery::v1::EndpointSlice,
    rbac::v1::{ClusterRole, ClusterRoleBinding},
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::json;

use super::{
    io::{spawn_in, write},
    paths::NodePaths,
    render,
};
use crate::{
    k8s::Binaries,
    lab::k8s::{K8sLabError, relay},
    topology::{Cluster, Node as LabNode},
};
use dataplane::supervisor::Spec;

pub(super) fn coredns(
    paths: &NodePaths,
    bins: &Binaries,
    ns: &str,
    cgroup: &str,
    n: &LabNode,
) -> Result<(), K8sLabError> {
    let conf = paths.file("Corefile");
    write(
        &conf,
        &render::corefile(n.lan_addr.addr(), &paths.kubeconfig("coredns")),
        false,
    )?;
    let spec = Spec::new("coredns", "nsenter", paths.log("coredns"))
        .args([ns])
        .args([bins.path("coredns")])
        .args(["-conf".into(), conf]);
    spawn_in(spec, cgroup).map(drop)
}

/// CoreDNS's role, and the `kube-dns` Service whose endpoint is the API node's CoreDNS.
pub(super) async fn objects(client: &Client, c: &Cluster) -> Result<(), K8sLabError> {
    let dns = render::cluster_dns(c.service_cidr);
    let at = relay::api_node(c).lan_addr.addr().to_string();
    let objects = [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "system:coredns"},
               "rules": [{"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
                         {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "system:coredns"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:coredns"}]}),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
               "spec": {"clusterIP": dns.to_string(), "ports": [
                   {"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "kube-dns-lab", "namespace": "kube-system", "labels": {
                   "kubernetes.io/service-name": "kube-dns", "endpointslice.kubernetes.io/managed-by": "lab.liqo.io"}},
               "addressType": "IPv4",
               "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}],
               "endpoints": [{"addresses": [at], "conditions": {"ready": true}}]}),
    ];
    let [role, binding, service, slice] = objects;
    apply(Api::<ClusterRole>::all(client.clone()), &role).await?;
    apply(Api::<ClusterRoleBinding>::all(client.clone()), &binding).await?;
    apply(
        Api::<Service>::namespaced(client.clone(), "kube-system"),
        &service,
    )
    .await?;
    apply(
        Api::<EndpointSlice>::namespaced(client.clone(), "kube-system"),
        &slice,
    )
    .await
}

/// Server-side applies `o` (field manager `liqo-lab`).
async fn apply<K>(api: Api<K>, o: &serde_json::Value) -> Result<(), K8sLabError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    api.patch(
        name,
        &PatchParams::apply("liqo-lab").force(),
        &Patch::Apply(o),
    )
    .await
    .map_err(K8sLabError::kube(format!("applying {} {name}", o["kind"])))?;
    Ok(())
}
