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

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::{Api, Client};

use super::{Binaries, Clusters, K8sError, Options, procs, sweep};

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
    /// The start of its sets' prefixes (at most 3 characters: the prefix adds a number, `x`
    /// and 4 digits of the process ID, and a prefix holds 10).
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
            Some(dead) => {
                // A process of the set died: the rest is torn down before a new set starts.
                drop(dead);
                self.start(bins, shape).await?
            }
            None => self.start(bins, shape).await?,
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
        let set = Clusters::up(bins, &opts).await?;
        for c in &set.clusters {
            settled(&c.client().await?).await?;
        }
        Ok(set)
    }
}

/// Whether every process of the set still runs.
fn alive(set: &Clusters) -> bool {
    set.clusters
        .iter()
        .flat_map(|c| &c.procs)
        .all(|p| procs::alive(p.pid))
}

/// The namespaces a cluster starts with.
const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Waits until the controller manager has made what it makes in every namespace (the root CA
/// ConfigMap, the `default` ServiceAccount) in the namespaces a cluster starts with: made after
/// the first listing, they would be taken for a test's, deleted and made again forever.
async fn settled(client: &Client) -> Result<(), K8sError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    for ns in SYSTEM_NAMESPACES {
        let cms = Api::<ConfigMap>::namespaced(client.clone(), ns);
        let sas = Api::<ServiceAccount>::namespaced(client.clone(), ns);
        loop {
            let cm = cms
                .get_opt("kube-root-ca.crt")
                .await
                .map_err(K8sError::kube(format!("reading {ns}/kube-root-ca.crt")))?;
            let sa = sas
                .get_opt("default")
                .await
                .map_err(K8sError::kube(format!("reading {ns}/default")))?;
            if cm.is_some() && sa.is_some() {
                break;
            }
            if Instant::now() > deadline {
                return Err(K8sError::Options(format!(
                    "namespace {ns}: no kube-root-ca.crt or default ServiceAccount after 30 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
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
    /// Removes what the test made (its API objects, its Liqo processes and files under the
    /// set's directory) and gives the set back for the next test. Call it once what runs in the
    /// test's own process (in-process servers and controllers, spawned tasks) has stopped: the
    /// release stops the processes, not those. If the cleanup fails, the set is torn down and
    /// the error returned: the test made something the pool cannot remove.
    pub async fn release(mut self) -> Result<(), K8sError> {
        let set = self.set.take().expect("released once");
        match clean(&set, &self.baseline).await {
            Ok(()) => {
                let mut idle = self.pool.idle.lock().unwrap_or_else(|p| p.into_inner());
                // One idle set per shape: a second one would only cost CPU until the end.
                let spare = if idle.iter().any(|k| k.shape == self.shape) {
                    Some(set)
                } else {
                    idle.push(Kept {
                        shape: self.shape,
                        set,
                    });
                    None
                };
                drop(idle);
                drop(spare); // Torn down, outside the lock.
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

/// Tears down every idle set of every pool (at exit). A set that cannot be torn down is named on
/// stderr (no test harness captures it any more; a tracing subscriber may be gone), with the
/// command that removes it.
extern "C" fn stop_all() {
    // Nothing may unwind out of an atexit handler: a panic is reported, not propagated.
    let done = std::panic::catch_unwind(|| {
        let pools = POOLS.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for pool in pools {
            let sets = std::mem::take(&mut *pool.idle.lock().unwrap_or_else(|p| p.into_inner()));
            for Kept { set, .. } in sets {
                let prefix = set.prefix.clone();
                // Torn down here, where the error can be said, rather than by its drop.
                set.detach();
                if let Err(e) = super::down(&prefix) {
                    eprintln!(
                        "error: tearing down the shared clusters {prefix} at exit: {}; run `liqo-lab --prefix {prefix} k8s down`",
                        liqo_types::chain(&e)
                    );
                }
            }
        }
    });
    if done.is_err() {
        eprintln!(
            "error: the shared clusters' teardown at exit panicked; `liqo-lab k8s down` with each prefix under {} removes what is left",
            super::ROOT
        );
    }
}

/// How long a cleanup may take before the set is given up.
const CLEAN_WITHIN: Duration = Duration::from_secs(60);

async fn baseline(set: &Clusters) -> Result<Baseline, K8sError> {
    let mut uids = Vec::new();
    for c in &set.clusters {
        uids.push(sweep::uids(&c.client().await?).await?);
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

/// Stops the test's processes (every Liqo or cluster program working in the set's directory
/// that is not the set's own), sweeps each cluster back to its baseline and removes the files
/// the test added.
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
        sweep::sweep(&c.client().await?, &c.name, uids, CLEAN_WITHIN).await?;
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
