//! What the virtual kubelet's apiserver tests share: clusters torn down on drop, tasks aborted
//! on drop, polling, object helpers.

pub(crate) mod ipam;
pub(crate) mod pods;

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use kube::{
    Api, Config,
    api::{Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use testkit::k8s::{self, Cluster, Options};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Tears the clusters down even when the test fails.
pub(crate) struct DownOnDrop(pub(crate) testkit::Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        // Best effort in a destructor: a failure here cannot be reported better than the
        // test's own.
        let _ = k8s::down(&self.0);
    }
}

/// Aborts a task when dropped (a virtual kubelet part run by a test).
pub(crate) struct AbortOnDrop<T>(pub(crate) tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Options of a set of `clusters` clusters with one kwok node each, distinct CIDRs, under a
/// prefix unique to this test process and call.
pub(crate) fn options(clusters: usize) -> Options {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Options {
        prefix: format!("vk{n}x{}", std::process::id() % 100_000)
            .parse()
            .unwrap(),
        clusters,
        nodes: 1,
        overlapping: false,
    }
}

/// The repository's `path`.
pub(crate) fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// The admin kube `Config` of a cluster (as the virtual kubelet's remote client would have).
pub(crate) async fn config(c: &Cluster) -> Config {
    let kc = Kubeconfig::read_from(&c.kubeconfig).unwrap();
    Config::from_custom_kubeconfig(
        kc,
        &KubeConfigOptions {
            context: Some(c.name.clone()),
            ..KubeConfigOptions::default()
        },
    )
    .await
    .unwrap()
}

/// Polls `f` every 200 ms until it is `Ok`; panics with its last error after `secs`.
pub(crate) async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("{what} after {secs} s: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Creates an object from JSON.
pub(crate) async fn create<K>(api: &Api<K>, value: Value) -> K
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {obj:?}: {e}"))
}

/// Merge-patches the status subresource of a namespaced object.
pub(crate) async fn patch_status<K>(api: &Api<K>, name: &str, status: Value)
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": status })),
    )
    .await
    .unwrap_or_else(|e| panic!("status of {name}: {e}"));
}

/// The NamespaceMaps' listing as resource reflection waits for it: done (the test gives the
/// mapping itself).
pub(crate) fn listed() -> tokio::sync::watch::Receiver<bool> {
    tokio::sync::watch::channel(true).1
}
