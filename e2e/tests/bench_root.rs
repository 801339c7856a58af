//! `liqo-lab bench tunnel` on the real kernel (needs root): a quick run of the plain path and our
//! gateway in both CPU profiles, through the binary, checking that every variant passed traffic,
//! that ours' ratio is computed, and that nothing is left behind.

use std::{path::PathBuf, process::Command};

use dataplane::{Netns, netns::require_root};
use e2e::bench::{Profile, Report, Variant};

/// Removes the test's cache directory, even on panic.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn quick_bench_of_plain_and_ours_passes_traffic_and_cleans_up() {
    require_root();
    let prefix = format!("bq{}", std::process::id() % 10_000_000);
    let cache = TempDir(std::env::temp_dir().join(format!("liqo-bench-test-{prefix}")));
    let out = Command::new(env!("CARGO_BIN_EXE_liqo-lab"))
        .args(["--prefix", &prefix, "bench", "tunnel", "--quick"])
        .args(["--repeats", "1", "--seconds", "1"])
        .args(["--variants", "plain,ours", "--profiles", "shared,split"])
        .arg("--cache")
        .arg(&cache.0)
        .args(["-o", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    let report: Report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));

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

    let left: Vec<String> = Netns::list()
        .unwrap()
        .into_iter()
        .map(|n| n.to_string())
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    for side in ['A', 'B'] {
        let sock = PathBuf::from(format!("/var/run/wireguard/{prefix}-bwg{side}.sock"));
        assert!(!sock.exists(), "{} left behind", sock.display());
    }
    assert!(!PathBuf::from(format!("/run/liqo-lab/bench-{prefix}")).exists());
}

#[test]
fn quick_path_bench_measures_three_paths_and_the_gateway_alone() {
    require_root();
    let prefix = format!("bp{}", std::process::id() % 10_000_000);
    let cache = TempDir(std::env::temp_dir().join(format!("liqo-bench-test-{prefix}")));
    let out = Command::new(env!("CARGO_BIN_EXE_liqo-lab"))
        .args(["--prefix", &prefix, "bench", "path", "--quick"])
        .args(["--repeats", "1", "--seconds", "1"])
        .arg("--cache")
        .arg(&cache.0)
        .args(["-o", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    let report: e2e::bench::path::PathReport = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
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
    let left: Vec<String> = Netns::list()
        .unwrap()
        .into_iter()
        .map(|n| n.to_string())
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    assert!(!PathBuf::from(format!("/run/liqo-lab/{prefix}.json")).exists());
}
