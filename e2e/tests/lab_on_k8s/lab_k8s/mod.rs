//! Helpers of the tests of the lab with control planes: per-test prefixes, teardown on drop,
//! one lab at a time, what must be gone after `down`, and the kernel state the fabric owns.

use std::time::Duration;

use dataplane::Netns;
use e2e::lab::{
    Prefix,
    k8s::{self, K8sLab},
};

/// One lab with control planes at a time (the machine is small).
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Tears the lab down even when the test fails.
pub(crate) struct DownOnDrop(pub(crate) Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        if let Err(e) = k8s::down(&self.0) {
            eprintln!("tearing down {}: {}", self.0, liqo_types::chain(&e));
        }
    }
}

pub(crate) fn prefix(tag: &str) -> Prefix {
    format!("lk{tag}{}", std::process::id() % 100_000)
        .parse()
        .unwrap()
}

/// The pids of the `liqo-controller-manager` processes whose kubeconfig is the lab's.
pub(crate) fn managers_of(prefix: &str) -> Vec<u32> {
    // A path component that is the prefix itself or starts with it and a separator (`lkib1`
    // must not match another run's `lkib12`).
    let ours = |path: &str| {
        path.split('/').any(|c| {
            c.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '-']))
        })
    };
    dataplane::procs::find(|p| {
        p.program() == "liqo-controller-manager" && p.env("KUBECONFIG").is_some_and(|k| ours(&k))
    })
    .expect("listing /proc")
    .into_iter()
    .map(|p| p.pid)
    .collect()
}

pub(crate) fn gone(pid: u32) -> bool {
    dataplane::procs::Process::read(pid).is_none()
}

/// Every process whose command line mentions `needle`.
pub(crate) fn procs_mentioning(needle: &str) -> Vec<u32> {
    dataplane::procs::find(|p| p.args.iter().any(|a| a.contains(needle)))
        .expect("listing /proc")
        .into_iter()
        .map(|p| p.pid)
        .collect()
}

/// What must be gone after `down`: namespaces, the harness's directory, every process.
pub(crate) fn assert_all_gone(p: &Prefix, pids: &[u32]) {
    let left: Vec<String> = Netns::list()
        .unwrap()
        .into_iter()
        .filter(|n| p.owns(n))
        .map(|n| n.to_string())
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    assert!(
        !std::path::Path::new(e2e::k8s::ROOT)
            .join(p.as_str())
            .exists(),
        "the harness's directory is left"
    );
    for pid in pids {
        assert!(gone(*pid), "pid {pid} survived down");
    }
    let needle = format!("/run/liqo-lab/{p}.d/");
    assert!(procs_mentioning(&needle).is_empty(), "relays left");
    let needle = format!("{}/{p}/", e2e::k8s::ROOT);
    assert!(
        procs_mentioning(&needle).is_empty(),
        "harness processes left"
    );
}

/// The kernel state the fabric owns in every node of the lab and in every gateway's own
/// namespace: rules and routes of tables 18951/18952, and the gateway's nft ruleset (with
/// counters blanked): what must be back as before once the peers are gone.
pub(crate) fn fabric_state(k: &K8sLab) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let counters = |t: &str| {
        t.lines()
            .map(|l| match l.find("counter packets") {
                Some(i) => {
                    let rest = &l[i..];
                    let end = rest.find(" bytes ").map_or(rest.len(), |b| {
                        let after = &rest[b + 7..];
                        b + 7 + after.find(' ').unwrap_or(after.len())
                    });
                    format!("{}counter{}", &l[..i], &rest[end..])
                }
                None => l.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for c in &k.lab.topology.clusters {
        let mut names: Vec<String> = c
            .nodes
            .iter()
            .map(|n| {
                k.lab
                    .node_netns(c.name.as_str(), n.name.as_str())
                    .to_string()
            })
            .collect();
        names.push(format!("{}-{}-gw", k.lab.prefix, c.name));
        for ns in names {
            let run = |args: &[&str]| {
                let o = std::process::Command::new("ip")
                    .args(["-n", &ns])
                    .args(args)
                    .output()
                    .unwrap();
                // A missing namespace must not read as the same empty state twice; a table
                // with no route left is absent, which reads as empty.
                let absent = String::from_utf8_lossy(&o.stderr).contains("table does not exist");
                assert!(o.status.success() || absent, "ip -n {ns} {args:?}: {o:?}");
                String::from_utf8_lossy(&o.stdout).into_owned()
            };
            out.push((format!("{ns} rules"), run(&["rule"])));
            for t in ["18951", "18952"] {
                out.push((
                    format!("{ns} table {t}"),
                    run(&["route", "show", "table", t]),
                ));
            }
            let nft = std::process::Command::new("ip")
                .args(["netns", "exec", &ns, "nft", "list", "ruleset"])
                .output()
                .unwrap();
            assert!(nft.status.success(), "nft list ruleset in {ns}: {nft:?}");
            out.push((
                format!("{ns} nft"),
                counters(&String::from_utf8_lossy(&nft.stdout)),
            ));
        }
    }
    out
}

/// The peers `liqo-ipam list` shows in `cluster` (asked through the relay of its first node).
pub(crate) fn ipam_peers(k: &K8sLab, cluster: &str) -> Vec<serde_json::Value> {
    let c = k.lab.topology.cluster(cluster).unwrap();
    let ns = Netns::open(&k.lab.node_netns(cluster, c.nodes[0].name.as_str())).unwrap();
    let out = ns
        .command(e2e::lab::bin("liqo-ipam").unwrap())
        .args(["list", "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["peers"].as_array().cloned().unwrap_or_default()
}

/// Polls `f` every 100 ms until it is true or `secs` pass; whether it became true.
pub(crate) async fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    f()
}
