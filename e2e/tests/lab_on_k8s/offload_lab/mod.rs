//! Helpers of the offloading test on the lab: clients, waiting, the virtual kubelet's process,
//! the Deployment, the pods on each side.

use std::{
    collections::BTreeMap,
    future::Future,
    time::{Duration, Instant},
};

use e2e::lab::k8s::K8sLab;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;

pub(crate) mod api;
pub(crate) mod reach;
pub(crate) mod services;
pub(crate) mod storage;
pub(crate) mod storage_guard;

/// The offloaded namespace (same name remotely: EnforceSameName).
pub(crate) const NS: &str = "liqo-demo";
/// The Deployment.
pub(crate) const APP: &str = "web";

/// The admin client of a lab cluster.
pub(crate) async fn client(k: &K8sLab, cluster: &str) -> Client {
    k.set.get(cluster).unwrap().client().await.unwrap()
}

/// Polls `f` every 250 ms until it returns `Some`, for at most `secs`; panics naming `what`
/// and the last answer otherwise.
pub(crate) async fn until<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let last = match f().await {
            Ok(v) => return v,
            Err(e) => e,
        };
        assert!(
            Instant::now() < deadline,
            "{what}: not within {secs} s (last: {last})"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Runs a tool of the lab (`kubectl`, `liqoctl`) on `cluster`; panics on a failure.
pub(crate) fn run(k: &K8sLab, tool: &str, cluster: &str, args: &[&str]) -> String {
    let out = k.tool(tool, cluster, args).unwrap();
    assert!(
        out.status.success(),
        "{tool} {args:?} on {cluster}: exit {:?}: {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The pid of the virtual kubelet `home` runs for `provider` (a child of its
/// controller-manager), if one runs.
pub(crate) fn vk_pid(prefix: &str, home: &str, provider: &str) -> Option<u32> {
    // A child of one of this lab's controller-managers: another lab or bench running at the
    // same time names its clusters rome and milan too.
    let managers = crate::lab_k8s::managers_of(prefix);
    dataplane::procs::find(|p| {
        p.program() == "liqo-virtual-kubelet"
            && p.parent().is_some_and(|parent| managers.contains(&parent))
            && p.has_flag("--home-cluster-name", home)
            && p.has_flag("--foreign-cluster-name", provider)
    })
    .expect("listing /proc")
    .last()
    .map(|p| p.pid)
}

/// The pid of a cluster's kube-apiserver.
pub(crate) fn apiserver_pid(k: &K8sLab, cluster: &str) -> u32 {
    k.set
        .get(cluster)
        .unwrap()
        .procs
        .iter()
        .find(|p| p.name == "kube-apiserver")
        .unwrap()
        .pid
}

/// Sends `sig` to `pid`.
pub(crate) fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
}

/// Applies Deployment [`APP`] in [`NS`] with `replicas` (tiny requests: the virtual node's
/// pod count is what limits it).
pub(crate) async fn deployment(rome: &Client, replicas: i32) {
    let api: Api<Deployment> = Api::namespaced(rome.clone(), NS);
    let d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": APP, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": APP}},
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {"containers": [{
                    "name": "main", "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                }]},
            },
        },
    });
    api.patch(
        APP,
        &PatchParams::apply("offload-test").force(),
        &Patch::Apply(&d),
    )
    .await
    .unwrap();
}

/// The pods of [`APP`] in [`NS`].
pub(crate) async fn pods(client: &Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("app={APP}")))
        .await
        .unwrap()
        .items
}

/// `n` home pods of [`APP`], all Running on `node` and none terminating: their names.
pub(crate) async fn running_on(rome: &Client, node: &str, n: usize) -> Result<Vec<Pod>, String> {
    let pods: Vec<Pod> = pods(rome)
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let running: Vec<Pod> = pods
        .iter()
        .filter(|p| {
            p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .cloned()
        .collect();
    if running.len() == n && pods.len() == n {
        Ok(running)
    } else {
        Err(format!(
            "{} pods, {} Running on {node}",
            pods.len(),
            running.len()
        ))
    }
}

/// A pod's containers' restart counts.
pub(crate) fn restarts(p: &Pod) -> Vec<i32> {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).collect())
        .unwrap_or_default()
}

/// Name → UID of the objects listed.
pub(crate) fn uids<K: kube::Resource>(items: &[K]) -> BTreeMap<String, String> {
    items
        .iter()
        .map(|o| {
            (
                o.meta().name.clone().unwrap_or_default(),
                o.meta().uid.clone().unwrap_or_default(),
            )
        })
        .collect()
}
