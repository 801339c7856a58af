//! Cluster sets shared by the tests of one binary: a [`Pool`] starts a set of a given
//! [`Shape`] once and lends it to one test at a time. A test gives it back with
//! [`Lease::release`], which first removes every API object and process the test made (what was
//! not there when the set started); a set that cannot be cleaned, or whose test failed (the
//! lease is dropped unreleased, by a panic or an early return), is torn down instead, so a
//! failed test never hands its leftovers to the next one. The sets still idle when the binary
//! exits are torn down by an `atexit` handler.
//!
//! What a test must not do on a shared set (it keeps its own clusters, saying why): restart,
//! stop or break a cluster's processes, or change what was there at the start (the kwok nodes,
//! `default`, `kube-system`, ...). CustomResourceDefinitions are kept across tests (every test
//! applies the same chart's CRDs, and server-side apply makes that a no-op); their objects go.

use std::{
    collections::HashSet,
    fs,
    path::PathBuf,
    sync::{
        Mutex, Once,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams},
    discovery::{ApiCapabilities, ApiResource, Discovery, Scope, verbs},
};

use super::{Binaries, Clusters, K8sError, Options, procs};

/// What a test needs: how many clusters, kwok nodes each, the same CIDRs or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Clusters (rome, milan, ...).
    pub clusters: usize,
    /// kwok nodes per cluster.
    pub nodes: usize,
    /// Every cluster with the same pod and service CIDRs.
    pub overlapping: bool,
}

impl Shape {
    /// One cluster's CIDRs are the same either way: a one-cluster shape ignores `overlapping`.
    fn normal(self) -> Shape {
        Shape {
            overlapping: self.overlapping && self.clusters > 1,
            ..self
        }
    }
}

/// The sets of one test binary, by shape.
pub struct Pool {
    /// The start of its sets' prefixes (at most 4 characters: the prefix adds a number and the
    /// process ID).
    stem: &'static str,
    idle: Mutex<Vec<Kept>>,
    next: AtomicUsize,
    registered: Once,
}

/// An idle set, clean.
struct Kept {
    shape: Shape,
    set: Clusters,
}

/// What a set had when it was lent (clean, by construction): per cluster, the UIDs of its API
/// objects; its files. Taken at each lease, so that what the clusters' own controllers made
/// since the start (a ConfigMap, a node's Event) is never taken for the test's.
struct Baseline {
    uids: Vec<HashSet<String>>,
    files: HashSet<PathBuf>,
}

/// The pools to tear down at exit.
static POOLS: Mutex<Vec<&'static Pool>> = Mutex::new(Vec::new());

impl Pool {
    /// A pool whose sets are named `<stem><n>x<pid>`.
    pub const fn new(stem: &'static str) -> Pool {
        Pool {
            stem,
            idle: Mutex::new(Vec::new()),
            next: AtomicUsize::new(0),
            registered: Once::new(),
        }
    }

    /// A set of `shape` for this test alone: an idle one, or a new one.
    pub async fn lease(&'static self, bins: &Binaries, shape: Shape) -> Result<Lease, K8sError> {
        let shape = shape.normal();
        self.registered.call_once(|| {
            POOLS.lock().unwrap_or_else(|p| p.into_inner()).push(self);
            register_teardown();
        });
        let kept = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            idle.iter()
                .position(|k| k.shape == shape)
                .map(|i| idle.swap_remove(i))
        };
        let set = match kept {
            Some(k) if alive(&k.set) => k.set,
            // A process of the set died (`k` drops: the rest is torn down): a new set.
            _ => self.start(bins, shape).await?,
        };
        let baseline = baseline(&set).await?;
        Ok(Lease {
            pool: self,
            shape,
            set: Some(set),
            baseline,
        })
    }

    async fn start(&self, bins: &Binaries, shape: Shape) -> Result<Clusters, K8sError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("{}{n}x{}", self.stem, std::process::id() % 10_000)
            .parse()
            .map_err(|e| K8sError::Options(format!("pool {}: {e}", self.stem)))?;
        let opts = Options {
            prefix,
            clusters: shape.clusters,
            nodes: shape.nodes,
            overlapping: shape.overlapping,
        };
        Clusters::up(bins, &opts).await
    }
}

/// Whether every process of the set still runs (a zombie does not).
fn alive(set: &Clusters) -> bool {
    set.clusters.iter().flat_map(|c| &c.procs).all(|p| {
        fs::read_to_string(format!("/proc/{}/stat", p.pid))
            .ok()
            .and_then(|s| Some(s[s.rfind(')')? + 1..].trim_start().starts_with(['Z', 'X'])))
            == Some(false)
    })
}

/// A set lent to one test. Dropped unreleased, it is torn down.
pub struct Lease {
    pool: &'static Pool,
    shape: Shape,
    set: Option<Clusters>,
    baseline: Baseline,
}

impl std::ops::Deref for Lease {
    type Target = Clusters;
    fn deref(&self) -> &Clusters {
        self.set
            .as_ref()
            .expect("a lease holds its set until released")
    }
}

impl Lease {
    /// Removes what the test made (its API objects, its processes and files under the set's
    /// directory) and gives the set back for the next test. Call it once the test's own
    /// components have stopped. If the cleanup fails, the set is torn down and the error
    /// returned: the test made something the pool cannot remove.
    pub async fn release(mut self) -> Result<(), K8sError> {
        let set = self.set.take().expect("released once");
        match clean(&set, &self.baseline).await {
            Ok(()) => {
                let kept = Kept {
                    shape: self.shape,
                    set,
                };
                self.pool
                    .idle
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(kept);
                Ok(())
            }
            Err(e) => Err(e), // `set` drops here: torn down.
        }
    }
}

/// Has [`stop_all`] run when the binary exits (libtest returns from `main` or calls
/// `process::exit`: both run the C library's exit handlers). Once per process.
#[expect(
    unsafe_code,
    reason = "atexit(3) is the only hook at the exit of a libtest binary: statics are never dropped"
)]
fn register_teardown() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `stop_all` is a plain `extern "C" fn()` that never unwinds, as atexit needs.
        if unsafe { libc::atexit(stop_all) } != 0 {
            tracing::warn!("atexit refused the pools' teardown: idle sets outlive the binary");
        }
    });
}

/// Tears down every idle set of every pool (at exit).
extern "C" fn stop_all() {
    // Nothing may unwind out of an atexit handler.
    let _ = std::panic::catch_unwind(|| {
        let pools = POOLS.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for pool in pools {
            let sets = std::mem::take(&mut *pool.idle.lock().unwrap_or_else(|p| p.into_inner()));
            drop(sets); // Clusters::drop stops the processes and removes the files.
        }
    });
}

/// The label of the APIServices the API server manages itself.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// How long a cleanup may take before the set is given up.
const CLEAN_WITHIN: Duration = Duration::from_secs(60);

async fn baseline(set: &Clusters) -> Result<Baseline, K8sError> {
    let mut uids = Vec::new();
    for c in &set.clusters {
        let client = c.client().await?;
        let objects = everything(&client, &resources(&client).await?).await?;
        uids.push(objects.into_iter().map(|o| o.uid).collect());
    }
    Ok(Baseline {
        uids,
        files: files(set)?,
    })
}

/// The set's files two levels down (its state, kubeconfig, each cluster's directories).
fn files(set: &Clusters) -> Result<HashSet<PathBuf>, K8sError> {
    let mut out = HashSet::new();
    for top in fs::read_dir(&set.dir).map_err(|e| K8sError::io(&set.dir, e))? {
        let top = top.map_err(|e| K8sError::io(&set.dir, e))?.path();
        if top.is_dir() {
            for sub in fs::read_dir(&top).map_err(|e| K8sError::io(&top, e))? {
                out.insert(sub.map_err(|e| K8sError::io(&top, e))?.path());
            }
        }
        out.insert(top);
    }
    Ok(out)
}

/// One API object: where it is, and whether it holds finalizers or is going.
struct Object {
    resource: ApiResource,
    namespaced: bool,
    namespace: Option<String>,
    name: String,
    uid: String,
    finalizers: bool,
    deleting: bool,
}

/// Every resource that can be listed and deleted, except Events of the `events.k8s.io` group
/// (the same objects as the core ones) and CRDs (kept).
async fn resources(client: &Client) -> Result<Vec<(ApiResource, ApiCapabilities)>, K8sError> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .map_err(K8sError::kube("discovering the API"))?;
    Ok(discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .filter(|(r, caps)| !kept_apart(r, caps))
        .collect())
}

/// Every object of `resources`, except the API server's own APIServices.
async fn everything(
    client: &Client,
    resources: &[(ApiResource, ApiCapabilities)],
) -> Result<Vec<Object>, K8sError> {
    let mut out = Vec::new();
    for (resource, caps) in resources {
        list(client, resource.clone(), caps, &mut out).await?;
    }
    Ok(out)
}

fn kept_apart(r: &ApiResource, caps: &ApiCapabilities) -> bool {
    !caps.supports_operation(verbs::LIST)
        || !caps.supports_operation(verbs::DELETE)
        || r.kind == "CustomResourceDefinition"
        || (r.group == "events.k8s.io" && r.kind == "Event")
}

async fn list(
    client: &Client,
    resource: ApiResource,
    caps: &ApiCapabilities,
    out: &mut Vec<Object>,
) -> Result<(), K8sError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let items = api
        .list_metadata(&ListParams::default())
        .await
        .map_err(K8sError::kube(format!("listing {}", resource.plural)))?
        .items;
    let namespaced = caps.scope == Scope::Namespaced;
    for o in items {
        let m = o.metadata;
        // The API server's own APIServices, one per group it serves (CRDs' groups included):
        // it makes them again as long as the group is served.
        if m.labels
            .as_ref()
            .is_some_and(|l| l.contains_key(AUTOMANAGED))
        {
            continue;
        }
        out.push(Object {
            resource: resource.clone(),
            namespaced,
            namespace: m.namespace,
            name: m.name.unwrap_or_default(),
            uid: m.uid.unwrap_or_default(),
            finalizers: m.finalizers.is_some_and(|f| !f.is_empty()),
            deleting: m.deletion_timestamp.is_some(),
        });
    }
    Ok(())
}

/// Deletes what the test made in each cluster (admission webhooks and API services first: a
/// webhook whose server is gone would refuse the rest; namespaces last, once emptied) until a
/// listing shows none of it, and stops the test's processes and removes its files.
async fn clean(set: &Clusters, baseline: &Baseline) -> Result<(), K8sError> {
    let set_procs: HashSet<u32> = set
        .clusters
        .iter()
        .flat_map(|c| c.procs.iter().map(|p| p.pid))
        .collect();
    let theirs: Vec<_> = procs::using(&set.dir)
        .into_iter()
        .filter(|p| !set_procs.contains(&p.pid))
        .collect();
    procs::stop(&theirs, Duration::from_secs(10));
    for (c, uids) in set.clusters.iter().zip(&baseline.uids) {
        let client = c.client().await?;
        let all = resources(&client).await?;
        let deadline = Instant::now() + CLEAN_WITHIN;
        // Each round lists only the resources that still held something of the test's (a
        // listing of everything is some sixty requests); when none does, a listing of
        // everything confirms it.
        let mut hot: Vec<(ApiResource, ApiCapabilities)> = Vec::new();
        loop {
            let scope = if hot.is_empty() { &all } else { &hot };
            let mut made: Vec<Object> = everything(&client, scope)
                .await?
                .into_iter()
                .filter(|o| !uids.contains(&o.uid))
                .collect();
            if made.is_empty() {
                if hot.is_empty() {
                    break;
                }
                hot.clear();
                continue;
            }
            if Instant::now() > deadline {
                let names: Vec<String> = made.iter().take(10).map(describe).collect();
                return Err(K8sError::Options(format!(
                    "{}: {} objects the test made are still there after {} s: {}",
                    c.name,
                    made.len(),
                    CLEAN_WITHIN.as_secs(),
                    names.join(", ")
                )));
            }
            made.sort_by_key(rank);
            for o in &made {
                remove(&client, o).await?;
            }
            hot = all
                .iter()
                .filter(|(r, _)| made.iter().any(|o| o.resource == *r))
                .cloned()
                .collect();
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    for f in files(set)?.difference(&baseline.files) {
        let removed = if f.is_dir() {
            fs::remove_dir_all(f)
        } else {
            fs::remove_file(f)
        };
        match removed {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(K8sError::io(f, e)),
        }
    }
    Ok(())
}

fn rank(o: &Object) -> u8 {
    match (o.resource.kind.as_str(), o.namespaced) {
        ("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" | "APIService", _) => 0,
        ("Namespace", _) => 3,
        (_, true) => 1,
        (_, false) => 2,
    }
}

fn describe(o: &Object) -> String {
    match &o.namespace {
        Some(ns) => format!("{} {ns}/{}", o.resource.kind, o.name),
        None => format!("{} {}", o.resource.kind, o.name),
    }
}

/// Strips its finalizers (the controllers that would remove them are gone) and deletes it at
/// once (grace 0: a pod on a node without a kubelet would wait forever). An object already gone
/// is fine.
async fn remove(client: &Client, o: &Object) -> Result<(), K8sError> {
    let api: Api<DynamicObject> = match (&o.namespace, o.namespaced) {
        (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &o.resource),
        _ => Api::all_with(client.clone(), &o.resource),
    };
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409);
    if o.finalizers {
        let strip = serde_json::json!({"metadata": {"finalizers": null}});
        if let Err(e) = api
            .patch(&o.name, &PatchParams::default(), &Patch::Merge(&strip))
            .await
            && !gone(&e)
        {
            return Err(K8sError::Kube {
                what: format!("removing the finalizers of {}", describe(o)),
                source: e,
            });
        }
    }
    if o.deleting {
        return Ok(());
    }
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::background()
    };
    match api.delete(&o.name, &dp).await {
        Ok(_) => Ok(()),
        Err(e) if gone(&e) => Ok(()),
        Err(e) => Err(K8sError::Kube {
            what: format!("deleting {}", describe(o)),
            source: e,
        }),
    }
}
