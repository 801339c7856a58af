//! The mutation run (needs root): hundreds of mutated configurations of running `liqo-gateway`,
//! `liqo-overlay` and `liqo-ipam` daemons, and mutated requests to the IPAM service. Each must
//! be refused naming the mutated field, leave the kernel state (links, addresses, rules, routes,
//! neighbours, forwarding entries, nftables) or the IPAM's state exactly as it was, and leave
//! the daemon serving; the original file is then applied again with no stale error.

use crate::mutation;

use std::{
    path::{Path, PathBuf},
    sync::atomic::{AtomicUsize, Ordering},
};

use dataplane::{Netns, netns::require_root, testing::Spaces};
use liqo_daemon::ReloadStatus;
use mutation::{
    harness::{Outcome, Proc, Tally, bin, get, kernel_state, settle, write},
    mutate::{Mutation, mutations},
    schemas,
};
use serde_json::Value;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A per-test prefix for namespaces and files.
fn prefix(tag: &str) -> String {
    require_root();
    format!(
        "mut{}{tag}{}",
        std::process::id() % 100_000,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A directory removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(prefix: &str) -> Dir {
        let d = std::env::temp_dir().join(prefix);
        std::fs::create_dir_all(&d).expect("test dir");
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            eprintln!("removing {}: {e}", self.0.display());
        }
    }
}

fn text(doc: &Value) -> String {
    // JSON is YAML: the daemons read it as their YAML files.
    serde_json::to_string_pretty(doc).expect("json") + "\n"
}

/// Runs every mutation against a daemon whose config is `path`: each must be refused naming its
/// field with `state()` unchanged; after an unexpected apply the good text is restored.
fn run_mutations(
    what: &str,
    proc: &mut Proc,
    path: &Path,
    good: &Value,
    all: Vec<Mutation>,
    reload: &mut dyn FnMut() -> Result<ReloadStatus, String>,
    state: &dyn Fn() -> String,
) -> Tally {
    let good_text = text(good);
    let baseline = settled(state);
    let mut tally = Tally::default();
    for m in all {
        let t = text(&m.doc);
        write(path, &t);
        let outcome = settle(&m.label, &t, &mut *reload);
        proc.assert_alive();
        let now = state();
        tally.record(&m.label, &m.field, &outcome, &baseline, &now);
        if !matches!(outcome, Outcome::Refused(..)) {
            // Applied or failed: back to the good text before the next mutation.
            write(path, &good_text);
            assert_eq!(
                settle("restoring", &good_text, &mut *reload),
                Outcome::Applied
            );
        }
    }
    println!(
        "{what}: {} mutations, {} refused naming the field with the state unchanged, {} failures",
        tally.tried,
        tally.refused,
        tally.failures.len()
    );
    for f in &tally.failures {
        println!("  {f}");
    }
    // The original file again: it runs, nothing refused, failed or unreadable any more.
    write(path, &good_text);
    assert_eq!(
        settle("the original", &good_text, &mut *reload),
        Outcome::Applied
    );
    let r = reload().expect("status");
    assert_eq!(
        r.problem(),
        None,
        "{what}: stale error after the original file: {r:?}"
    );
    assert_eq!(
        state(),
        baseline,
        "{what}: kernel state after the original file"
    );
    proc.assert_alive();
    tally
}

/// The state once two reads 300 ms apart agree (links come up, carriers appear).
fn settled(state: &dyn Fn() -> String) -> String {
    let mut last = state();
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let now = state();
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the kernel state did not settle within 6 s:\n{last}");
}

fn assert_clean(what: &str, tally: &Tally, at_least: usize) {
    assert!(
        tally.failures.is_empty(),
        "{what}: {} of {} mutations not refused as they should be:\n{}",
        tally.failures.len(),
        tally.tried,
        tally.failures.join("\n")
    );
    assert!(
        tally.tried >= at_least,
        "{what}: only {} mutations",
        tally.tried
    );
}

#[tokio::test]
async fn gateway_refuses_every_mutated_config_and_keeps_its_kernel_state() {
    let p = prefix("g");
    let mut spaces = Spaces::new();
    let host = spaces.create(&format!("{p}-host")).await;
    let gw_ns = format!("{p}-gw");
    spaces.adopt(&gw_ns);
    let dir = Dir::new(&p);
    let key = dir.0.join("private.key");
    let good = schemas::gateway(&gw_ns, &key.display().to_string());
    let cfg = dir.0.join("gateway.yaml");
    write(&cfg, &text(&good));
    let mut proc = Proc::spawn(
        "liqo-gateway",
        &host,
        &bin("liqo-gateway"),
        &[
            "run",
            "--config",
            &cfg.display().to_string(),
            "--status-listen",
            "127.0.0.1:9107",
        ],
        dir.0.join("gateway.log"),
    );
    let mut reload =
        || get::<gateway::status::Status>(&host, "127.0.0.1:9107", "/status").map(|s| s.reload);
    assert_eq!(settle("start", &text(&good), &mut reload), Outcome::Applied);
    let gw = Netns::open(&gw_ns.parse().expect("name")).expect("the gateway's namespace");
    let state = || kernel_state(&host) + &kernel_state(&gw);
    let all = mutations(&good, schemas::GATEWAY);
    let tally = run_mutations("gateway", &mut proc, &cfg, &good, all, &mut reload, &state);
    assert_clean("gateway", &tally, 150);
}

#[tokio::test]
async fn overlay_refuses_every_mutated_config_and_keeps_its_kernel_state() {
    let p = prefix("o");
    let mut spaces = Spaces::new();
    let node = spaces.create(&format!("{p}-n1")).await;
    let lan = spaces.create(&format!("{p}-lan")).await;
    dataplane::testing::wire(
        &lan,
        "n1",
        "172.18.0.254/24",
        None,
        &node,
        "eth0",
        "172.18.0.2/24",
    )
    .await;
    let dir = Dir::new(&p);
    let good = schemas::overlay();
    let cfg = dir.0.join("overlay.yaml");
    write(&cfg, &text(&good));
    let mut proc = Proc::spawn(
        "liqo-overlay",
        &node,
        &bin("liqo-overlay"),
        &[
            "run",
            "--config",
            &cfg.display().to_string(),
            "--status-listen",
            "127.0.0.1:9108",
        ],
        dir.0.join("overlay.log"),
    );
    let mut reload =
        || get::<overlay::status::Status>(&node, "127.0.0.1:9108", "/status").map(|s| s.reload);
    assert_eq!(settle("start", &text(&good), &mut reload), Outcome::Applied);
    let state = || kernel_state(&node);
    let all = mutations(&good, schemas::OVERLAY);
    let tally = run_mutations("overlay", &mut proc, &cfg, &good, all, &mut reload, &state);
    assert_clean("overlay", &tally, 150);
}

#[derive(serde::Deserialize)]
struct IpamStatus {
    reload: Option<ReloadStatus>,
}

/// `liqo-ipam <args>` inside `ns` against the service there: (success, stdout, stderr).
fn ipam_cli(ns: &Netns, args: &[&str]) -> (bool, String, String) {
    let o = ns
        .command(bin("liqo-ipam"))
        .args(args)
        .args(["--server", "http://127.0.0.1:6000"])
        .output()
        .expect("liqo-ipam");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn ipam_list(ns: &Netns) -> String {
    let (ok, out, err) = ipam_cli(ns, &["list", "-o", "json"]);
    assert!(ok, "liqo-ipam list: {err}");
    out
}

/// Mutated requests: each argument of each call replaced by bad values.
fn bad_requests() -> Vec<(String, Vec<String>, &'static str)> {
    let ids = ["", "Rome", "-rome", "rome_1", &"x".repeat(64)];
    let ranges = [
        "10.71.0.1/16",
        "0.0.0.0/0",
        "10.71.0.0/31",
        "10.71.0.0/32",
        "fd00::/64",
        "10.71.0.0",
        "10.71.0.0/33",
        "300.1.0.0/16",
        "",
        "nonsense",
    ];
    let ips = ["", "10.1", "::1", "300.1.1.1", "10.200.0.1/32", "nonsense"];
    let mut out: Vec<(String, Vec<String>, &'static str)> = Vec::new();
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for id in ids {
        // `--peer=<value>`: a value starting with '-' is not taken for a flag.
        let peer = format!("--peer={id}");
        out.push((
            format!("remap --peer {id:?}"),
            v(&[
                "remap",
                &peer,
                "--pod-cidr",
                "10.200.0.0/16",
                "--external-cidr",
                "10.70.0.0/16",
            ]),
            "cluster_id",
        ));
        out.push((
            format!("release --peer {id:?}"),
            v(&["release", &peer]),
            "cluster_id",
        ));
        out.push((
            format!("map-ip --peer {id:?}"),
            v(&["map-ip", &peer, "--ip", "10.200.0.5"]),
            "cluster_id",
        ));
    }
    for r in ranges {
        out.push((
            format!("remap --pod-cidr {r:?}"),
            v(&[
                "remap",
                "--peer",
                "turin",
                "--pod-cidr",
                r,
                "--external-cidr",
                "10.70.0.0/16",
            ]),
            "pod_cidr",
        ));
        out.push((
            format!("remap --external-cidr {r:?}"),
            v(&[
                "remap",
                "--peer",
                "turin",
                "--pod-cidr",
                "10.200.0.0/16",
                "--external-cidr",
                r,
            ]),
            "external_cidr",
        ));
        out.push((
            format!("set-peer-view --pod-view {r:?}"),
            v(&[
                "set-peer-view",
                "--peer",
                "milan",
                "--pod-view",
                r,
                "--external-view",
                "10.70.0.0/16",
            ]),
            "our_pod_view",
        ));
        out.push((
            format!("set-peer-view --external-view {r:?}"),
            v(&[
                "set-peer-view",
                "--peer",
                "milan",
                "--pod-view",
                "10.50.0.0/16",
                "--external-view",
                r,
            ]),
            "our_external_view",
        ));
        out.push((
            format!("reserved add {r:?}"),
            v(&["reserved", "add", r]),
            "cidr",
        ));
        out.push((format!("pool add {r:?}"), v(&["pool", "add", r]), "cidr"));
    }
    for ip in ips {
        out.push((
            format!("map-ip --ip {ip:?}"),
            v(&["map-ip", "--peer", "milan", "--ip", ip]),
            "ip",
        ));
    }
    // Wrong lengths and in-use ranges.
    out.push((
        "set-peer-view with a /24 view of a /16".into(),
        v(&[
            "set-peer-view",
            "--peer",
            "milan",
            "--pod-view",
            "10.50.0.0/24",
            "--external-view",
            "10.70.0.0/16",
        ]),
        "our_pod_view",
    ));
    out.push((
        "remap of a known peer with other CIDRs".into(),
        v(&[
            "remap",
            "--peer",
            "milan",
            "--pod-cidr",
            "10.201.0.0/16",
            "--external-cidr",
            "10.70.0.0/16",
        ]),
        "pod_cidr",
    ));
    out.push((
        "remap with overlapping pod and external CIDRs".into(),
        v(&[
            "remap",
            "--peer",
            "turin",
            "--pod-cidr",
            "10.200.0.0/16",
            "--external-cidr",
            "10.200.0.0/24",
        ]),
        "external_cidr",
    ));
    out.push((
        "reserved add of a range in use".into(),
        v(&["reserved", "add", "10.0.0.0/8"]),
        "cidr",
    ));
    out.push((
        "pool remove of a pool in use".into(),
        v(&["pool", "remove", "10.0.0.0/8"]),
        "cidr",
    ));
    out.push((
        "map-ip for an unknown peer".into(),
        v(&["map-ip", "--peer", "nobody", "--ip", "10.200.0.5"]),
        "cluster_id",
    ));
    out
}

#[tokio::test]
async fn ipam_refuses_every_mutated_config_and_request_and_keeps_its_state() {
    let p = prefix("i");
    let mut spaces = Spaces::new();
    let ns = spaces.create(&format!("{p}-ipam")).await;
    let dir = Dir::new(&p);
    let good = schemas::ipam(&dir.0.join("state.json").display().to_string());
    let cfg = dir.0.join("ipam.yaml");
    write(&cfg, &text(&good));
    let mut proc = Proc::spawn(
        "liqo-ipam",
        &ns,
        &bin("liqo-ipam"),
        &["serve", "--config", &cfg.display().to_string()],
        dir.0.join("ipam.log"),
    );
    let mut reload = || {
        get::<IpamStatus>(&ns, "127.0.0.1:9106", "/status")
            .and_then(|s| s.reload.ok_or_else(|| "no reload block".to_owned()))
    };
    assert_eq!(settle("start", &text(&good), &mut reload), Outcome::Applied);
    // A peer with ranges in use, seen both ways.
    for args in [
        &[
            "remap",
            "--peer",
            "milan",
            "--pod-cidr",
            "10.200.0.0/16",
            "--external-cidr",
            "10.70.0.0/16",
        ][..],
        &[
            "set-peer-view",
            "--peer",
            "milan",
            "--pod-view",
            "10.50.0.0/16",
            "--external-view",
            "10.51.0.0/16",
        ],
    ] {
        let (ok, _, err) = ipam_cli(&ns, args);
        assert!(ok, "{args:?}: {err}");
    }
    let state = || ipam_list(&ns);
    let all = mutations(&good, schemas::IPAM);
    let files = run_mutations(
        "ipam config",
        &mut proc,
        &cfg,
        &good,
        all,
        &mut reload,
        &state,
    );

    let baseline = ipam_list(&ns);
    let mut requests = Tally::default();
    for (label, args, field) in bad_requests() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, _, err) = ipam_cli(&ns, &args);
        proc.assert_alive();
        let outcome = if ok {
            Outcome::Applied
        } else {
            // The CLI prints `error: <field>: <problem> (<code>)`.
            let msg = err.trim().trim_start_matches("error: ").to_owned();
            let f = msg.split(':').next().unwrap_or_default().trim().to_owned();
            Outcome::Refused(f, msg)
        };
        requests.record(&label, field, &outcome, &baseline, &ipam_list(&ns));
    }
    println!(
        "ipam requests: {} mutations, {} refused naming the field with the state unchanged, {} failures",
        requests.tried,
        requests.refused,
        requests.failures.len()
    );
    assert_clean("ipam config", &files, 80);
    assert_clean("ipam requests", &requests, 60);
}
