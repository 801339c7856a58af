//! The benches on the real kernel (needs root), through the binary, each a quick run that checks
//! its report and that nothing is left behind: `liqo-bench tunnel` (the plain path and our
//! gateway in both CPU profiles: every variant passed traffic, ours' ratio is computed),
//! `liqo-bench path`, and `liqo-bench peers` (every count has every figure, and the targets are
//! checked).

use std::path::PathBuf;

use dataplane::{Netns, netns::require_root};
use liqo_bench::{
    Profile, Report, Variant,
    peers::{Metric, PeersReport},
};

/// Removes the test's cache directory, even on panic.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// No namespace of the lab or bench `prefix` exists.
fn assert_no_namespaces_left(prefix: &str) {
    let left: Vec<String> = Netns::list()
        .unwrap()
        .into_iter()
        .map(|n| n.to_string())
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}

#[test]
fn quick_bench_of_plain_and_ours_passes_traffic_and_cleans_up() {
    let _one = crate::one_at_a_time();
    require_root();
    let prefix = format!("bq{}", std::process::id() % 10_000_000);
    let cache = TempDir(std::env::temp_dir().join(format!("liqo-bench-test-{prefix}")));
    let report: Report = crate::run_json(
        &prefix,
        &[
            "tunnel",
            "--quick",
            "--repeats",
            "1",
            "--seconds",
            "1",
            "--variants",
            "plain,ours",
            "--profiles",
            "shared,split",
        ],
        Some(&cache.0),
    );

    assert!(report.failures().is_empty(), "{:?}", report.failures());
    let profiles: Vec<Profile> = report.profiles.iter().map(|p| p.profile).collect();
    assert_eq!(profiles, vec![Profile::Shared, Profile::Split]);
    for p in &report.profiles {
        let variants: Vec<Variant> = p.rows.iter().map(|r| r.variant).collect();
        assert_eq!(variants, vec![Variant::Plain, Variant::Ours]);
        for r in &p.rows {
            assert_eq!(r.samples.len(), 1);
            let s = &r.samples[0];
            assert!(s.gbps_1.unwrap() > 0.0 && s.gbps_4.unwrap() > 0.0, "{s:?}");
            assert!(s.rtt_us.unwrap() > 0.0, "{s:?}");
            assert!(s.underlay_bytes.unwrap() > 1_000_000, "{s:?}");
            let ratio = r
                .ours_over_this
                .expect("ours' ratio is computed for every row");
            assert!(ratio > 0.0 && ratio.is_finite(), "{r:?}");
        }
        let (plain, ours) = (&p.rows[0], &p.rows[1]);
        assert_eq!(ours.ours_over_this, Some(1.0));
        assert_eq!(plain.cpu_us_per_packet, None, "no daemon on the plain path");
        assert!(ours.cpu_us_per_packet.unwrap().median > 0.0, "{ours:?}");
    }
    assert!(
        report
            .header
            .tools
            .iter()
            .any(|t| t.name.contains("liqo-gateway"))
    );
    assert!(!report.notes.is_empty());

    assert_no_namespaces_left(&prefix);
    for side in ['A', 'B'] {
        let sock = PathBuf::from(format!("/var/run/wireguard/{prefix}-bwg{side}.sock"));
        assert!(!sock.exists(), "{} left behind", sock.display());
    }
    assert!(!PathBuf::from(format!("/run/liqo-lab/bench-{prefix}")).exists());
}

#[test]
fn quick_path_bench_measures_three_paths_and_the_gateway_alone() {
    let _one = crate::one_at_a_time();
    require_root();
    let prefix = format!("bp{}", std::process::id() % 10_000_000);
    let cache = TempDir(std::env::temp_dir().join(format!("liqo-bench-test-{prefix}")));
    let report: liqo_bench::path::PathReport = crate::run_json(
        &prefix,
        &["path", "--quick", "--repeats", "1", "--seconds", "1"],
        Some(&cache.0),
    );
    let names: Vec<&str> = report.rows.iter().map(|r| r.path.name.as_str()).collect();
    assert_eq!(names, ["within a node", "across nodes", "across clusters"]);
    for r in &report.rows {
        assert!(r.errors.is_empty(), "{r:?}");
        assert!(
            r.gbps.unwrap().median > 0.0 && r.rtt_us.unwrap().median > 0.0,
            "{r:?}"
        );
    }
    let cross = &report.rows[2].path;
    assert!(cross.from.starts_with("rome/n1-") && cross.to.starts_with("milan/n1-"));
    assert!(
        !cross.addr.to_string().starts_with("10.200."),
        "dialled at a remapped address"
    );
    assert!(report.gateway_alone_gbps.unwrap().median > 0.0);
    assert!(report.cross_over_gateway.unwrap() > 0.0);
    assert_no_namespaces_left(&prefix);
    assert!(!PathBuf::from(format!("/run/liqo-lab/{prefix}.json")).exists());
}

#[test]
fn quick_peers_bench_has_every_figure_for_every_count_and_cleans_up() {
    let _one = crate::one_at_a_time();
    require_root();
    let prefix = format!("bn{}", std::process::id() % 10_000_000);
    let cache = TempDir(std::env::temp_dir().join(format!("liqo-bench-test-{prefix}")));
    let report: PeersReport = crate::run_json(
        &prefix,
        &[
            "peers",
            "--quick",
            "--repeats",
            "1",
            "--seconds",
            "1",
            "--peers",
            "1,10",
        ],
        Some(&cache.0),
    );

    assert!(report.failures().is_empty(), "{:?}", report.failures());
    let counts: Vec<u32> = report.rows.iter().map(|r| r.peers).collect();
    assert_eq!(counts, [1, 10]);
    for r in &report.rows {
        assert_eq!(r.samples.len(), 1, "{r:?}");
        let every = [
            Metric::AddOneMs,
            Metric::RemoveOneMs,
            Metric::HostRules,
            Metric::HostRoutes,
            Metric::GatewayRules,
            Metric::GatewayRoutes,
            Metric::TcpGbps,
            Metric::UdpPps,
        ];
        // From and back to 1 peer: none at 1 peer, so no ratio either.
        let beyond_one = [Metric::FullApplyMs, Metric::BackToOneMs];
        for m in every
            .iter()
            .chain(if r.peers > 1 { &beyond_one[..] } else { &[] })
        {
            let median = r
                .median(*m)
                .unwrap_or_else(|| panic!("{m:?} missing in {r:?}"));
            assert!(median > 0.0 && median.is_finite(), "{m:?} = {median}");
        }
        for m in every {
            assert!(r.vs_one_peer[&m] > 0.0, "{m:?} has no ratio in {r:?}");
        }
        if r.peers == 1 {
            assert!(beyond_one.iter().all(|m| r.median(*m).is_none()), "{r:?}");
        }
        let s = &r.samples[0];
        let applies = [s.full_apply, s.add_one, s.remove_one, s.back_to_one];
        for a in applies.iter().flatten() {
            assert!(
                a.micros.is_some(),
                "the gateway's own apply time is read: {s:?}"
            );
        }
        assert!(
            s.udp_sent_pps.unwrap() >= s.udp_pps.unwrap(),
            "more delivered than sent: {s:?}"
        );
    }
    // The nine stand-ins were applied: each has a route in the gateway's namespace.
    let routes = |i: usize| report.rows[i].median(Metric::GatewayRoutes).unwrap();
    assert!(routes(1) >= routes(0) + 9.0, "{:?}", report.rows);
    // Every target is checked at 10 peers, each with its figure (holding or not).
    assert_eq!(report.targets.len(), 4);
    assert_eq!(report.targets_at, Some(10), "{:?}", report.targets);
    for t in &report.targets {
        assert!(t.value.is_some_and(f64::is_finite), "{t:?}");
    }
    assert!(!report.notes.is_empty());
    assert!(
        report
            .header
            .tools
            .iter()
            .any(|t| t.name.contains("liqo-gateway"))
    );

    assert_no_namespaces_left(&prefix);
    assert!(!PathBuf::from(format!("/run/liqo-lab/bench-{prefix}")).exists());
}

/// `liqo-bench peering` on two harness clusters with Liqo (needs the Kubernetes binaries cached and
/// `liqo-auth`, `liqo-controller-manager`, `liqo-ipam` and `liqoctl` built next to `liqo-bench`
/// or in `$LIQO_BIN_DIR`): two rounds, every condition timed on both clusters, the floor and
/// the controller-managers' memory read, and the bench's clusters gone afterwards.
#[test]
fn quick_peering_bench_times_every_condition_and_stops_its_clusters() {
    let _one = crate::one_at_a_time();
    use liqo_bench::peering::{Metric, PeeringReport};

    require_root();
    let prefix = format!("bp{}", std::process::id() % 100_000);
    let report: PeeringReport = crate::run_json(
        &prefix,
        &[
            "peering",
            "--quick",
            "--repeats",
            "2",
            "--floor-samples",
            "3",
            "--timeout",
            "60",
        ],
        None,
    );

    assert_eq!(report.rounds.len(), 2, "{report:?}");
    assert!(
        report.rounds[0].auth_secs.is_some(),
        "the first round authenticates: {:?}",
        report.rounds[0]
    );
    for m in Metric::ALL {
        let row = report.row(m).unwrap();
        let s = row
            .secs
            .unwrap_or_else(|| panic!("{m:?} not measured: {row:?}"));
        assert!(s.min > 0.0 && s.max < 60.0, "{m:?}: {s:?}");
        assert!(row.over_floor.is_some_and(|x| x > 0.0), "{row:?}");
    }
    let out = report.row(Metric::Outgoing).unwrap().secs.unwrap();
    let auth = report.row(Metric::Auth).unwrap().secs.unwrap();
    assert!(
        auth.min <= out.max,
        "authenticated before peered: {report:?}"
    );
    let floor = report.floor_ms.unwrap();
    assert!(floor.min > 0.0 && floor.max < 10_000.0, "{floor:?}");
    let clusters: Vec<&str> = report.usage.iter().map(|u| u.cluster.as_str()).collect();
    assert_eq!(clusters, ["rome", "milan"]);
    for u in &report.usage {
        let rss = u.rss_mib.unwrap();
        assert!(rss.min > 1.0 && u.hwm_mib >= rss.max, "{u:?}");
        assert!(u.cpu_secs > 0.0 && u.wall_secs > 0.0, "{u:?}");
    }
    assert!(
        report.setup.kubernetes.starts_with("v1."),
        "{:?}",
        report.setup
    );
    assert!(!report.header.tools.is_empty());
    crate::assert_clusters_gone(&format!("{prefix}pb"));
}
