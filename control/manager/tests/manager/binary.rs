//! The `liqo-controller-manager` binary: bad flags are refused naming the value; its allocator
//! is the one `LIQO_MALLOC` names (another name is refused); on a real
//! cluster, under its own ServiceAccount token bound by the chart's ClusterRole, it serves its
//! metrics, reconciles, and stops on SIGTERM, also when a reconcile waits on a peer that never
//! answers (bounded by `--shutdown-grace`).

use crate::common;

use common::{ONE, POOL, service_account_kubeconfig};
use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use control::api::discovery::{
    ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T,
};
use kube::{Api, api::PostParams};
use testkit::k8s;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_liqo-controller-manager");
const ROME_ID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";

fn refused(args: &[&str], value: &str) {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(value), "{args:?}: {err}");
}

#[test]
fn the_allocator_is_the_one_liqo_malloc_names_and_another_name_is_refused() {
    // A bad flag ends the run just after the allocator is announced (exit 2); a bad
    // allocator name ends it before (exit 1, naming the value).
    let run = |value: Option<&str>| {
        let mut cmd = Command::new(BIN);
        match value {
            Some(v) => cmd.env("LIQO_MALLOC", v),
            None => cmd.env_remove("LIQO_MALLOC"),
        };
        let out = cmd
            .env("RUST_LOG", "info")
            .env_remove("_RJEM_MALLOC_CONF")
            .args(["--resync-period", "3x"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), err)
    };
    let (code, glibc) = run(Some("glibc"));
    assert_eq!(code, Some(2), "{glibc}");
    assert!(glibc.contains("allocator malloc=Glibc"), "{glibc}");
    let (code, mimalloc) = run(Some("mimalloc"));
    assert_eq!(code, Some(2), "{mimalloc}");
    assert!(mimalloc.contains("allocator malloc=Mimalloc"), "{mimalloc}");
    // jemalloc by default, running with our options (read back from jemalloc: the
    // binary's configuration symbol took).
    let ours = "options=Options { narenas: 1, dirty_decay_ms: 0, muzzy_decay_ms: 0 }";
    for value in [None, Some("jemalloc")] {
        let (code, jemalloc) = run(value);
        assert_eq!(code, Some(2), "{value:?}: {jemalloc}");
        assert!(
            jemalloc.contains("allocator malloc=Jemalloc") && jemalloc.contains(ours),
            "{value:?}: {jemalloc}"
        );
    }
    let (code, other) = run(Some("tcmalloc"));
    assert_eq!(code, Some(1), "{other}");
    assert!(
        other.contains("names no allocator") && other.contains("tcmalloc"),
        "{other}"
    );
    assert!(!other.contains("3x"), "refused before the flags: {other}");
}

#[test]
fn bad_flags_are_refused_naming_the_value() {
    refused(&["--resource-sharing-percentage", "150"], "150");
    refused(&["--resync-period", "3x"], "3x");
    refused(&["--enable-incoming-peering=maybe"], "maybe");
    refused(&["--metrics-listen", "nowhere"], "nowhere");
    refused(&["--ipam-address", "ftp://ipam.liqo"], "ftp://ipam.liqo");
    refused(&["--gateway-address-override", "gw.example"], "gw.example");
    refused(&["--gateway-port-override", "0"], "0");
    refused(&["--network-release-grace", "0s"], "0s");
    refused(&["--shutdown-grace", "10"], "10");
    refused(&["--ipam-token-file", "/t"], "--ipam-address");
    // A token in clear text to another host: refused before the apiserver is asked.
    let out = Command::new(BIN)
        .args([
            "--ipam-address",
            "http://10.0.0.1:6000",
            "--ipam-token-file",
            "/t",
        ])
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--ipam-address http://10.0.0.1:6000") && err.contains("clear text"),
        "{err}"
    );
    // Leader election durations that cannot elect safely: refused before the apiserver is
    // asked, naming them.
    let out = Command::new(BIN)
        .args([
            "--leader-elect",
            "--leader-elect-lease-duration",
            "5s",
            "--leader-elect-renew-deadline",
            "7s",
        ])
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("lease duration (5s)") && err.contains("renew deadline (7s)"),
        "{err}"
    );
    refused(&["--leader-elect-retry-period", "2"], "2");
    let help = Command::new(BIN).arg("--help").output().unwrap();
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--namespace",
        "--auth-service-address-override",
        "--auth-service-port-override",
        "--resource-sharing-percentage",
        "--enable-incoming-peering",
        "--resync-period",
        "--metrics-listen",
        "--ipam-address",
        "--gateway-address-override",
        "--gateway-port-override",
        "--network-release-grace",
        "--shutdown-grace",
        "--webhook-listen",
        "--disable-webhooks",
        "--webhook-cert-names",
        "--leader-elect",
        "--leader-elect-lease-duration",
        "--leader-elect-renew-deadline",
        "--leader-elect-retry-period",
        "--leader-elect-identity",
    ] {
        assert!(text.contains(flag), "{flag} missing from --help");
    }
}

/// Kills the process if the test fails before it stops it.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // Already exited when the test stopped it: the error says so and is of no interest.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A private directory (0700) holding the ServiceAccount's kubeconfig (0600), removed on drop.
struct Scratch {
    dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

/// What the installer makes (CRDs, `liqo`, the identity ConfigMap, our token, the
/// ServiceAccount bound by the chart's ClusterRole); the ServiceAccount's kubeconfig.
async fn install(c: &k8s::Cluster, client: &kube::Client, prefix: &str) -> Scratch {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    common::install_base(client, ROME_ID, "rome").await;
    liqo_auth::tokens::ensure_local_token(client, "liqo")
        .await
        .unwrap();
    let text = service_account_kubeconfig(c, client).await;
    let dir = tempfile::Builder::new()
        .prefix(&format!("liqo-cm-{prefix}-"))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .unwrap();
    let path = dir.path().join("kubeconfig");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
    Scratch { dir, path }
}

async fn metrics(port: u16) -> Option<String> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    out.starts_with("HTTP/1.0 200").then_some(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_metrics_reconciles_and_stops_on_sigterm() {
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, ONE).await.unwrap();
    let c = &set.clusters[0];
    let client = c.client().await.unwrap();
    let kubeconfig = install(c, &client, set.prefix.as_str()).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(BIN)
        .args([
            "--metrics-listen",
            &format!("127.0.0.1:{port}"),
            "--resync-period",
            "5s",
            // Any free port: the tests run in parallel (the default is 127.0.0.1:9443).
            "--webhook-listen",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", &kubeconfig.path)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    // A ForeignCluster naming ourselves: reconciled to Error/LocalCluster.
    let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "myself"},
        "spec": {
            "clusterIdentity": {"clusterID": ROME_ID, "clusterName": "rome"},
            "foreignAuthUrl": "https://rome.example.com",
        },
    }))
    .unwrap();
    let fcs = Api::<ForeignCluster>::all(client.clone());
    fcs.create(&PostParams::default(), &fc).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = fcs.get("myself").await.unwrap().status;
        let text = metrics(port).await;
        let done = status.is_some_and(|s| s.condition(T::ProcessForeignClusterStatus) == S::Error)
            && text.as_deref().is_some_and(|t| {
                t.contains(
                    r#"liqo_controller_manager_reconciles_total{controller="foreigncluster"}"#,
                )
            });
        if done {
            // The heap as the binary's counting allocator sees it, and the process's
            // anonymous resident memory: both something.
            let t = text.unwrap();
            let gauge = |name: &str| -> u64 {
                t.lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
                    .unwrap_or_else(|| panic!("{name} missing: {t}"))
            };
            let live = gauge("liqo_controller_manager_heap_live_bytes");
            let anon = gauge("liqo_controller_manager_resident_anon_bytes");
            assert!(live > 0 && anon > 0, "{live} {anon}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not reconciled: metrics {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pid = child.0.id();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "still running 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status}");
    set.release().await.unwrap();
}

/// Sends SIGTERM to `child`; waits for its exit up to `limit`: its status and how long it took.
fn terminate(child: &mut std::process::Child, limit: Duration) -> (std::process::ExitStatus, f64) {
    let t = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return (s, t.elapsed().as_secs_f64());
        }
        assert!(t.elapsed() < limit, "still running {limit:?} after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_within_the_grace_while_a_reconcile_waits_on_a_silent_peer() {
    const MILAN_ID: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";
    let grace = 4;
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, ONE).await.unwrap();
    let c = &set.clusters[0];
    let client = c.client().await.unwrap();
    let kubeconfig = install(c, &client, set.prefix.as_str()).await;
    // The peer's auth service: accepts connections and never answers (a blackholed peer
    // whose SYNs are answered, e.g. by a load balancer in front of nothing).
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = accepted.clone();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(s);
        }
    });
    // Its log (tracing writes to stderr).
    let log = kubeconfig.dir.path().join("log");
    let child = Command::new(BIN)
        .args([
            "--shutdown-grace",
            &format!("{grace}s"),
            "--webhook-listen",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", &kubeconfig.path)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::inherit())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "milan"},
        "spec": {
            "clusterIdentity": {"clusterID": MILAN_ID, "clusterName": "milan"},
            "foreignAuthUrl": format!("https://127.0.0.1:{silent_port}"),
            "outgoingPeeringEnabled": "Yes",
            "insecureSkipTLSVerify": true,
        },
    }))
    .unwrap();
    let fcs = Api::<ForeignCluster>::all(client.clone());
    fcs.create(&PostParams::default(), &fc).await.unwrap();
    // The identity request is under way: recorded Pending, its connection accepted.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = fcs.get("milan").await.unwrap().status;
        let pending = status.is_some_and(|s| s.condition(T::AuthenticationStatus) == S::Pending);
        if pending && accepted.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the identity request never reached the silent peer: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Still waiting a second later (the auth client's own limit is a minute).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(child.0.try_wait().unwrap().is_none());
    let (status, secs) = terminate(&mut child.0, Duration::from_secs(grace + 5));
    let text = std::fs::read_to_string(&log).unwrap();
    eprintln!("exit {status} {secs:.2} s after SIGTERM (--shutdown-grace {grace}s)");
    for line in text
        .lines()
        .filter(|l| l.contains("shut") || l.contains("still running"))
    {
        eprintln!("  log: {line}");
    }
    assert!(status.success(), "{status}: {text}");
    // It waited for the reconcile (the grace), no more than a margin past it.
    assert!(
        secs >= grace as f64 - 0.5 && secs < grace as f64 + 3.0,
        "{secs:.2} s: {text}"
    );
    assert!(
        text.contains("still running after the shutdown grace")
            && text.contains("foreigncluster milan"),
        "the stuck reconcile is not named: {text}"
    );

    // Again with a long grace: a second SIGTERM during it exits at once, status 1, saying so.
    let before = accepted.load(std::sync::atomic::Ordering::SeqCst);
    let log = kubeconfig.dir.path().join("log2");
    let child = Command::new(BIN)
        .args(["--shutdown-grace", "60s", "--webhook-listen", "127.0.0.1:0"])
        .env("KUBECONFIG", &kubeconfig.path)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::inherit())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while accepted.load(std::sync::atomic::Ordering::SeqCst) == before {
        assert!(
            Instant::now() < deadline,
            "the identity request never reached the silent peer again: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let kill = |pid: u32| {
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .unwrap()
                .success()
        )
    };
    kill(child.0.id());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "exited before the grace: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let (status, secs) = terminate(&mut child.0, Duration::from_secs(5));
    let text = std::fs::read_to_string(&log).unwrap();
    eprintln!("exit {status} {secs:.2} s after the second SIGTERM (--shutdown-grace 60s)");
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(secs < 2.0, "{secs:.2} s");
    assert!(
        text.contains("a second signal during the shutdown grace"),
        "{text}"
    );
    holder.abort();
    set.release().await.unwrap();
}
