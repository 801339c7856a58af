//! `liqo-bench offload` through the binary, small (20 pods on one kwok node of milan):
//! both sides reach every pod Running, the report has every figure (times, per-pod
//! percentiles, ratio, targets, Liqo's processes at each level), and the bench's clusters are
//! gone afterwards. Needs root, the Kubernetes binaries cached (`e2e/k8s/build.sh`) and
//! liqo-auth, liqo-ipam, liqo-controller-manager, liqo-virtual-kubelet and liqoctl built next
//! to liqo-bench or in `$LIQO_BIN_DIR`. The 1,000-pod figure is by hand: `liqo-bench offload`.

use dataplane::netns::require_root;
use liqo_bench::offload::{OffloadReport, Side, report::VK};

const PODS: u32 = 20;

/// Stops the bench's clusters if the binary left them (it stops them itself, also on failure).
struct DownOnDrop(String);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        if let Ok(p) = self.0.parse()
            && let Err(e) = e2e::k8s::down(&p)
        {
            eprintln!("stopping clusters {}: {e}", self.0);
        }
    }
}

#[test]
fn small_offload_bench_runs_both_sides_measures_every_figure_and_stops_its_clusters() {
    let _one = crate::one_at_a_time();
    require_root();
    let prefix = format!("bo{}", std::process::id() % 100_000);
    let _down = DownOnDrop(format!("{prefix}ob"));
    let pods = PODS.to_string();
    let r: OffloadReport = crate::run_json(
        &prefix,
        &[
            "offload",
            "--pods",
            &pods,
            "--provider-nodes",
            "1",
            "--timeout",
            "180",
        ],
        None,
    );

    assert!(r.complete(), "both sides ran once: {:?}", r.phases);
    assert_eq!((r.setup.pods, r.setup.provider_nodes), (PODS, 1));
    for side in [Side::Vanilla, Side::Liqo] {
        let p = r.phases.iter().find(|p| p.side == side).unwrap();
        assert!(p.secs > 0.0 && p.secs < 180.0, "{p:?}");
        for l in [p.created_to_running, p.scheduled_to_ready] {
            let l = l.unwrap_or_else(|| panic!("{side:?}: no latency: {p:?}"));
            assert_eq!(l.pods, PODS as usize, "every pod timed: {p:?}");
            assert!(
                0.0 <= l.p50_ms && l.p50_ms <= l.p99_ms && l.p99_ms <= l.max_ms,
                "{l:?}"
            );
            assert!(
                l.max_ms <= p.secs * 1000.0 + 1.0,
                "within the run: {l:?} {p:?}"
            );
        }
    }
    let liqo = r.phases.iter().find(|p| p.side == Side::Liqo).unwrap();
    let b = liqo.breakdown.unwrap();
    for part in [b.to_remote, b.remote_running, b.back_home] {
        let part = part.unwrap_or_else(|| panic!("a part not measured: {b:?}"));
        assert_eq!(part.pods, PODS as usize, "every pod matched by name: {b:?}");
    }
    assert!(
        liqo.cpu.iter().any(|c| c.process == VK && c.cpu_secs > 0.0),
        "the virtual kubelet worked during the Liqo run: {:?}",
        liqo.cpu
    );
    assert!(r.ratio.is_some_and(|x| x > 0.0), "{r:?}");
    // Requests per pod from the audit logs: the virtual kubelet wrote to milan (ShadowPods)
    // and the provider's controller-manager made the pods; the vanilla run has no Liqo client.
    let client = |p: &liqo_bench::offload::Phase, cluster: &str, client: &str| {
        p.requests
            .iter()
            .find(|c| c.cluster == cluster && c.client == client)
            .map(|c| c.writes)
    };
    assert!(
        client(liqo, "milan", "liqo-virtual-kubelet").is_some_and(|w| w >= 1.0),
        "{:?}",
        liqo.requests
    );
    assert!(
        client(liqo, "milan", "liqo-controller-manager").is_some_and(|w| w >= 1.0),
        "{:?}",
        liqo.requests
    );
    let vanilla = r.phases.iter().find(|p| p.side == Side::Vanilla).unwrap();
    assert!(
        !vanilla.requests.is_empty()
            && vanilla
                .requests
                .iter()
                .all(|c| !c.client.starts_with("liqo-") || c.writes < 0.5),
        "{:?}",
        vanilla.requests
    );
    // The virtual kubelet killed with every pod Running: back, nothing rewritten, nothing
    // duplicated.
    let x = liqo.restart.as_ref().expect("the restart measured");
    assert_eq!(x.pod_writes, 0, "{x:?}");
    assert_eq!(
        (x.home_running, x.shadow_pods, x.remote_pods),
        (PODS as usize, PODS as usize, PODS as usize),
        "{x:?}"
    );
    assert!(
        x.secs_to_process <= x.secs_to_lease && x.secs_to_lease > 0.0,
        "{x:?}"
    );
    assert_eq!(r.targets.len(), 7);
    for t in &r.targets {
        assert!(t.met.is_some(), "every target measured: {t:?}");
    }
    let pods: Vec<(u32, bool)> = r.levels.iter().map(|l| (l.pods, l.after_timed)).collect();
    // The after-deletion sample waited for rest: at least its 20 s, at most its 60 s + 20 s
    // (+ the samples' own time).
    let after = r
        .levels
        .iter()
        .find(|l| l.after_timed)
        .expect("an after-timed level");
    eprintln!(
        "after-timed sample: {:.1} s, quiet {}",
        after.secs, after.quiet
    );
    assert!((20.0..=90.0).contains(&after.secs), "{after:?}");
    assert_eq!(pods, [(0, false), (PODS, false), (0, true)]);
    for l in &r.levels {
        let names: Vec<&str> = l.processes.iter().map(|p| p.process.as_str()).collect();
        assert_eq!(
            names,
            [
                "liqo-controller-manager (rome)",
                "liqo-controller-manager (milan)",
                VK
            ],
            "{l:?}"
        );
        for p in &l.processes {
            assert!(p.rss_mib() > 1.0 && p.hwm_kib >= p.rss_kib, "{p:?}");
            assert!(p.cpu_secs > 0.0, "{p:?}");
        }
    }
    let table = liqo_bench::offload::render(&r);
    assert!(table.contains("ratio Liqo / vanilla"), "{table}");

    crate::assert_clusters_gone(&format!("{prefix}ob"));
}
