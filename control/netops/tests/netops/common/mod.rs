//! What the harness tests of the operators share: a cluster with Liqo's objects installed
//! (testkit::liqo, no component started), a kubeconfig per operator ServiceAccount bound to the
//! chart's ClusterRole, the operators as processes, and fake daemons that serve the `/status`
//! a daemon running the config file would.

pub(crate) mod daemons;
pub(crate) mod ipam;
pub(crate) mod objects;
mod wait;

pub(crate) use wait::eventually;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use testkit::k8s::{self, Cluster, Clusters, Options};

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

/// One cluster (one kwok node) with Liqo's namespace, identity, CRDs and chart files (the
/// operators' ClusterRoles among them) installed; detached and torn down by the guard.
pub(crate) async fn cluster() -> (Cluster, Client, DownOnDrop) {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let opts = Options {
        // At most 10 characters (a Prefix) up to n = 99.
        prefix: format!("ops{n}x{}", std::process::id() % 10_000)
            .parse()
            .unwrap(),
        clusters: 1,
        nodes: 1,
        overlapping: true,
    };
    let bins = k8s::binaries().unwrap();
    let set = Clusters::up(&bins, &opts).await.unwrap();
    let guard = DownOnDrop(set.prefix.clone());
    let liqo = testkit::liqo::Options {
        start: Vec::new(),
        ..testkit::liqo::Options::default()
    };
    testkit::liqo::install(&set, &bins, &liqo).await.unwrap();
    let c = set.clusters[0].clone();
    set.detach();
    let client = c.client().await.unwrap();
    (c, client, guard)
}

/// ServiceAccount `liqo/<name>` bound to the chart's ClusterRole `<name>` (as the installer
/// binds them) and a kubeconfig with a token of it, in the cluster's directory (teardown finds
/// the processes that use it).
pub(crate) async fn service_account(c: &Cluster, admin: &Client, name: &str) -> PathBuf {
    let dir = c.dir.join("liqo");
    std::fs::create_dir_all(&dir).unwrap();
    testkit::liqo::service_account(admin, c, name, &dir, None)
        .await
        .unwrap()
}

/// Node `name` (not simulated: nothing else writes it) with this InternalIP and pod CIDR.
pub(crate) async fn node(admin: &Client, name: &str, ip: &str, pod_cidr: &str) {
    let api = Api::<Node>::all(admin.clone());
    let n: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr],
            "taints": [{"key": "liqo-netops-test", "effect": "NoSchedule"}]},
    }))
    .unwrap();
    api.create(&PostParams::default(), &n).await.unwrap();
    let status = serde_json::json!({"status": {"addresses": [
        {"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name},
    ]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// An operator process; SIGKILLed on drop if still running.
pub(crate) struct Op {
    pub(crate) name: String,
    pub(crate) child: Child,
    pub(crate) log: PathBuf,
}

impl Op {
    /// Starts `program` with `args` and `KUBECONFIG=kubeconfig`, logging to `dir/<name>.log`.
    pub(crate) fn start(
        program: &str,
        name: &str,
        kubeconfig: &Path,
        dir: &Path,
        args: &[String],
    ) -> Op {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(program)
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,kube=warn")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Op {
            name: name.into(),
            child,
            log,
        }
    }

    /// Its log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, and its exit status (within 20 s).
    pub(crate) fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(ok.success());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not stop:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Its exit status, once it exits on its own (within `secs`).
    pub(crate) fn exited(&mut self, secs: u64) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{} still runs:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // Best effort: the process may have exited meanwhile.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A free loopback port.
pub(crate) fn free_port() -> u16 {
    // The harness's pick: below the ephemeral range, so no outgoing connection takes it.
    testkit::k8s::free_port().unwrap()
}

/// What every operator test starts from: one cluster, a kubeconfig per operator
/// ServiceAccount, the first node(s), tenant namespaces and the operators' base configs.
pub(crate) struct Setup {
    pub(crate) admin: Client,
    pub(crate) gw_kc: PathBuf,
    pub(crate) rt_kc: PathBuf,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) gw_base: PathBuf,
    pub(crate) ov_base: PathBuf,
    // Last: the cluster goes down after everything above is dropped.
    _down: DownOnDrop,
}

/// [`Setup`] with `nodes` of [`objects::NODES`] and a tenant namespace per peer.
pub(crate) async fn setup(nodes: usize, peers: &[&str]) -> Setup {
    let (c, admin, down) = cluster().await;
    let gw_kc = service_account(&c, &admin, "liqo-gateway-operator").await;
    let rt_kc = service_account(&c, &admin, "liqo-route-operator").await;
    for (i, n) in objects::NODES.iter().take(nodes).enumerate() {
        node(
            &admin,
            n,
            &format!("172.30.0.{}", i + 1),
            &format!("10.244.{i}.0/24"),
        )
        .await;
    }
    for peer in peers {
        let ns: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(
            serde_json::json!({"metadata": {"name": format!("liqo-tenant-{peer}")}}),
        )
        .unwrap();
        Api::all(admin.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let gw_base = dir.path().join("gateway-base.yaml");
    std::fs::write(&gw_base, "localPodCIDR: 10.244.0.0/16\nlistenPort: 51840\n").unwrap();
    let ov_base = dir.path().join("overlay-base.yaml");
    std::fs::write(&ov_base, "underlayInterface: eth0\n").unwrap();
    Setup {
        admin,
        gw_kc,
        rt_kc,
        dir,
        gw_base,
        ov_base,
        _down: down,
    }
}

/// Least privilege is enough: no call (or watch) of these operators was forbidden.
pub(crate) fn none_forbidden<'a>(ops: impl IntoIterator<Item = &'a Op>) {
    for op in ops {
        let log = op.log();
        assert!(
            !log.to_lowercase().contains("forbidden"),
            "{}:\n{log}",
            op.name
        );
    }
}
