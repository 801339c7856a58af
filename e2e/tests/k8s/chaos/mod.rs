//! The chaos tests' lab: two clusters with Liqo per run, the peer command run on rome in the
//! background (and again if it fails), waits for the peering, by polling the API servers.

pub(crate) mod fingerprint;

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use control::api::discovery::{
    ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T,
};
use e2e::{
    k8s::{self, Cluster, Clusters, Options},
    liqo::{self, Liqo},
};
use kube::{Api, Client, api::ListParams};

static NEXT: AtomicUsize = AtomicUsize::new(0);
pub(crate) const MANAGER: &str = "liqo-controller-manager";
/// How long a peering may take to converge after the chaos (2 shared cores).
pub(crate) const CONVERGE_SECS: u64 = 90;

/// Tears a set down even when the test fails.
pub(crate) struct DownOnDrop(e2e::lab::Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        // Nothing to do about a failed teardown here; the test's own asserts report it.
        let _ = k8s::down(&self.0);
    }
}

pub(crate) fn options() -> Options {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Options {
        prefix: format!("cz{n}x{}", std::process::id() % 100_000)
            .parse()
            .unwrap(),
        clusters: 2,
        nodes: 1,
        overlapping: true,
    }
}

/// Two clusters with Liqo; the set is detached and torn down by the guard.
pub(crate) async fn lab() -> (Clusters, Liqo, DownOnDrop) {
    let t = Instant::now();
    let bins = k8s::binaries().unwrap();
    let set = Clusters::up(&bins, &options()).await.unwrap();
    let guard = DownOnDrop(set.prefix.clone());
    let installed = liqo::install(&set, &bins, &liqo::Options::default())
        .await
        .unwrap();
    eprintln!(
        "[{}] clusters and Liqo up in {:.1} s",
        set.prefix,
        t.elapsed().as_secs_f64()
    );
    (set, installed, guard)
}

pub(crate) fn get(set: &Clusters, name: &str) -> Cluster {
    set.get(name).unwrap().clone()
}

/// The command milan's liqoctl generates (`liqoctl peer out-of-band milan ...`).
pub(crate) fn peer_command(set: &Clusters, installed: &Liqo) -> String {
    let out = std::process::Command::new(installed.bin.join("liqoctl"))
        .args([
            "--context",
            "milan",
            "generate",
            "peer-command",
            "--only-command",
        ])
        .env("KUBECONFIG", &set.kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cmd = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        cmd.starts_with("liqoctl peer out-of-band milan "),
        "no command"
    );
    cmd
}

/// Runs the peer command on rome (its own kubeconfig) in the background.
pub(crate) fn start_peer(rome: &Cluster, installed: &Liqo, command: &str) -> tokio::process::Child {
    let path = format!(
        "{}:{}",
        installed.bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    tokio::process::Command::new("bash")
        .args(["-c", command])
        .env("KUBECONFIG", &rome.kubeconfig)
        .env("PATH", path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Waits for liqoctl; if it failed (its apiserver went away, say), runs it once more (it is
/// idempotent). Returns what happened, for the report.
pub(crate) async fn finish_peer(
    child: tokio::process::Child,
    rome: &Cluster,
    installed: &Liqo,
    command: &str,
) -> String {
    let t = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(150), child.wait_with_output())
        .await
        .expect("liqoctl peer did not end within 150 s")
        .unwrap();
    let first = format!(
        "first liqoctl: exit {:?} after {:.1} s more; stderr: {}",
        out.status.code(),
        t.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    if out.status.success() {
        return first;
    }
    let again = start_peer(rome, installed, command)
        .wait_with_output()
        .await
        .unwrap();
    assert!(
        again.status.success(),
        "{first}\nrerun failed: {}{}",
        String::from_utf8_lossy(&again.stdout),
        String::from_utf8_lossy(&again.stderr)
    );
    format!("{first}\nrerun succeeded")
}

pub(crate) async fn fc_for(client: &Client, id: &str) -> Option<ForeignCluster> {
    Api::<ForeignCluster>::all(client.clone())
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .find(|f| f.spec.cluster_identity.cluster_id.as_str() == id)
}

/// Polls `f` every 20 ms until it is true or `secs` pass (then panics).
pub(crate) async fn until<F, Fut>(secs: u64, what: &str, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let t = Instant::now();
    while !f().await {
        assert!(t.elapsed().as_secs() < secs, "{what}: not after {secs} s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    t.elapsed()
}

/// Waits until rome's outgoing and milan's incoming peering are Established.
pub(crate) async fn converged(set: &Clusters, installed: &Liqo) -> Duration {
    let (rome, milan) = (
        get(set, "rome").client().await.unwrap(),
        get(set, "milan").client().await.unwrap(),
    );
    let (rome_id, milan_id) = ids(installed);
    let t = Instant::now();
    let mut last;
    loop {
        let out = fc_for(&rome, &milan_id).await.map(|f| {
            let st = f.status.unwrap_or_default();
            (
                st.condition(T::AuthenticationStatus),
                st.condition(T::OutgoingPeering),
            )
        });
        let inc = fc_for(&milan, &rome_id)
            .await
            .map(|f| f.status.unwrap_or_default().condition(T::IncomingPeering));
        if out == Some((S::Established, S::Established)) && inc == Some(S::Established) {
            return t.elapsed();
        }
        last = format!("rome (auth, outgoing) {out:?}, milan incoming {inc:?}");
        if t.elapsed().as_secs() > CONVERGE_SECS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("not converged after {CONVERGE_SECS} s: {last}");
}

pub(crate) fn ids(installed: &Liqo) -> (String, String) {
    (
        installed.get("rome").unwrap().cluster_id.clone(),
        installed.get("milan").unwrap().cluster_id.clone(),
    )
}
