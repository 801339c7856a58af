//! What the offloading harness test shares: peering by liqoctl's own commands, the
//! NamespaceOffloading `liqoctl offload namespace` makes, its status read back as rows.

use std::{collections::BTreeMap, io::Write as _, process::Stdio};

use control::{
    api::{
        offloading::{NamespaceOffloading, NamespaceOffloadingStatus},
        sharing::ResourceOffer,
    },
    consts::labels,
};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Namespace, Node},
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use serde_json::json;
use testkit::{k8s::Clusters, liqo};

pub(crate) const REGION: &str = "topology.liqo.io/region";

/// `liqoctl generate peer-command` on `provider`, piped into bash with `consumer`'s kubeconfig.
pub(crate) fn peer(set: &Clusters, installed: &liqo::Liqo, consumer: &str, provider: &str) {
    let path = format!(
        "{}:{}",
        installed.bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new(installed.bin.join("liqoctl"))
        .args([
            "--context",
            provider,
            "generate",
            "peer-command",
            "--only-command",
        ])
        .env("KUBECONFIG", &set.kubeconfig)
        .env("PATH", &path)
        .output()
        .unwrap();
    // stdout holds a token: only stderr is shown.
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut bash = std::process::Command::new("bash")
        .env("KUBECONFIG", &set.get(consumer).unwrap().kubeconfig)
        .env("PATH", &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    bash.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let done = bash.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "peer {consumer} -> {provider}: {}",
        String::from_utf8_lossy(&done.stderr)
    );
}

/// Creates namespace `ns`; one that exists already is fine (the offloading is what counts),
/// any other failure is not.
pub(crate) async fn create_namespace(client: &Client, ns: &str) {
    match Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create namespace {ns}: {e}"),
    }
}

/// Runs the harness's `liqoctl` with `cluster`'s kubeconfig: (success, stdout, stderr).
pub(crate) fn liqoctl(
    set: &Clusters,
    installed: &liqo::Liqo,
    cluster: &str,
    args: &[&str],
) -> (bool, String, String) {
    let out = std::process::Command::new(installed.bin.join("liqoctl"))
        .args(args)
        .env("KUBECONFIG", &set.get(cluster).unwrap().kubeconfig)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What `liqoctl offload namespace <ns> --namespace-mapping-strategy EnforceSameName
/// --pod-offloading-strategy LocalAndRemote [--selector <region>=<value>]` creates, made
/// directly (no wait for the controller's verdict, e.g. to restart it mid-offload).
pub(crate) async fn offload(client: &Client, ns: &str, region: Option<&str>) {
    create_namespace(client, ns).await;
    let mut spec = json!({
        "namespaceMappingStrategy": "EnforceSameName",
        "podOffloadingStrategy": "LocalAndRemote",
    });
    if let Some(r) = region {
        spec["clusterSelector"] = json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": REGION, "operator": "In", "values": [r]}]}]});
    }
    let o: NamespaceOffloading = serde_json::from_value(json!({
        "apiVersion": "offloading.liqo.io/v1alpha1", "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading", "namespace": ns}, "spec": spec,
    }))
    .unwrap();
    Api::<NamespaceOffloading>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &o)
        .await
        .unwrap();
}

pub(crate) async fn status(client: &Client, ns: &str) -> Result<NamespaceOffloadingStatus, String> {
    Api::<NamespaceOffloading>::namespaced(client.clone(), ns)
        .get("offloading")
        .await
        .map_err(|e| e.to_string())
        .map(|o| o.status.unwrap_or_default())
}

/// The conditions as (type, status, reason, message), by map name.
pub(crate) fn conditions(s: &NamespaceOffloadingStatus) -> BTreeMap<String, Vec<[String; 4]>> {
    s.remote_namespaces_conditions
        .iter()
        .map(|(k, v)| {
            let v = serde_json::to_value(v).unwrap();
            let rows = v
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    ["type", "status", "reason", "message"]
                        .map(|f| c[f].as_str().unwrap_or_default().to_owned())
                })
                .collect();
            (k.clone(), rows)
        })
        .collect()
}

pub(crate) fn row(t: &str, s: &str, r: &str, m: &str) -> [String; 4] {
    [t, s, r, m].map(str::to_owned)
}

pub(crate) async fn ns_exists(client: &Client, name: &str) -> bool {
    Api::<Namespace>::all(client.clone())
        .get_opt(name)
        .await
        .unwrap()
        .is_some()
}

/// The namespaces on a provider made for rome.
pub(crate) async fn made_for(client: &Client, rome: &str) -> Vec<String> {
    Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().labels(&format!("{}={rome}", labels::REMOTE_CLUSTER_ID)))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect()
}

/// Node `node_name` on `client` as the offer of provider `pid` says (labels with its region,
/// taint, capacity = allocatable = the quota), its Lease held (40 s) and Ready True.
pub(crate) async fn virtual_node_as_offered(
    client: &Client,
    node_name: &str,
    pid: &str,
    region: &str,
) -> Result<(), String> {
    let node = Api::<Node>::all(client.clone())
        .get_opt(node_name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no node yet")?;
    let l = node.metadata.labels.clone().unwrap_or_default();
    let want = [
        (REGION, region),
        (labels::NODE_TYPE, "virtual-node"),
        (labels::REMOTE_CLUSTER_ID, pid),
    ];
    for (k, v) in want {
        if l.get(k).map(String::as_str) != Some(v) {
            return Err(format!("label {k}: {:?}", l.get(k)));
        }
    }
    let taints = serde_json::to_value(node.spec.clone().unwrap().taints).unwrap();
    let want = json!([{"key": "virtual-node.liqo.io/not-allowed", "value": "true", "effect": "NoExecute"}]);
    if taints != want {
        return Err(format!("taints {taints}"));
    }
    let offers = Api::<ResourceOffer>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    let offer = offers
        .items
        .iter()
        .find(|o| o.spec.cluster_id.as_str() == pid)
        .ok_or("no offer")?;
    if offer.spec.labels.get(REGION).map(String::as_str) != Some(region) {
        return Err(format!("offer labels {:?}", offer.spec.labels));
    }
    let quota = offer.spec.resource_quota.clone().unwrap().hard.unwrap();
    let st = node.status.clone().unwrap_or_default();
    if st.capacity.as_ref() != Some(&quota) || st.allocatable.as_ref() != Some(&quota) {
        return Err(format!("capacity {:?} != offer {quota:?}", st.capacity));
    }
    let lease = Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .get_opt(node_name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no Lease yet")?
        .spec
        .unwrap_or_default();
    if lease.holder_identity.as_deref() != Some(node_name)
        || lease.lease_duration_seconds != Some(40)
    {
        return Err(format!("Lease {lease:?}"));
    }
    let ready = st
        .conditions
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    ready.then_some(()).ok_or_else(|| "not Ready".to_owned())
}
