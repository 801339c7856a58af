//! The summary of samples per peer count, the ratios to 1 peer, the targets and the JSON form.

use super::*;

fn apply(ms: f64) -> Option<Apply> {
    Some(Apply {
        micros: Some((ms * 1000.0) as u64),
        seen_us: (ms * 1000.0) as u64 + 3000,
    })
}

/// A sample of `peers` whose figures scale with `f`.
pub(crate) fn sample(peers: u32, repeat: u32, f: f64) -> Sample {
    let big = peers > 1;
    Sample {
        repeat,
        full_apply: apply(20.0 * f).filter(|_| big),
        add_one: apply(1.0 * f),
        remove_one: apply(0.8 * f),
        back_to_one: apply(15.0 * f).filter(|_| big),
        host: Some(Counts {
            rules: 4,
            routes: 4 + u64::from(peers),
        }),
        gateway: Some(Counts {
            rules: 4,
            routes: 2 + u64::from(peers),
        }),
        tcp_gbps: Some(4.0 / f),
        udp_pps: Some(32_000.0 / f),
        udp_sent_pps: Some(150_000.0),
        background_load_pct: 2.0,
        error: None,
    }
}

pub(crate) fn report(samples: BTreeMap<u32, Vec<Sample>>) -> PeersReport {
    PeersReport::new(
        crate::report_core::tests::header(),
        crate::render::tests::setup(),
        UdpLoad {
            payload_bytes: 64,
            offered_mbps: 0,
        },
        samples,
    )
}

#[test]
fn apply_time_is_the_gateways_own_else_what_the_bench_saw() {
    let a = Apply {
        micros: Some(1500),
        seen_us: 4000,
    };
    assert_eq!(a.ms(), 1.5);
    assert_eq!(Apply { micros: None, ..a }.ms(), 4.0);
}

#[test]
fn medians_and_ratios_to_the_one_peer_row() {
    let samples = BTreeMap::from([
        (
            1,
            vec![sample(1, 1, 1.0), sample(1, 2, 1.1), sample(1, 3, 0.9)],
        ),
        (
            1000,
            vec![
                sample(1000, 1, 1.02),
                sample(1000, 2, 1.0),
                sample(1000, 3, 1.5),
            ],
        ),
    ]);
    let r = report(samples);
    assert_eq!(
        r.rows.iter().map(|r| r.peers).collect::<Vec<_>>(),
        [1, 1000]
    );
    let (one, big) = (&r.rows[0], &r.rows[1]);
    assert_eq!(one.vs_one_peer[&Metric::TcpGbps], 1.0);
    assert_eq!(
        one.median(Metric::FullApplyMs),
        None,
        "no full apply at 1 peer"
    );
    assert!(!one.vs_one_peer.contains_key(&Metric::FullApplyMs));
    // Median factor 1.02 against 1.0.
    assert!((big.vs_one_peer[&Metric::TcpGbps] - 1.0 / 1.02).abs() < 1e-9);
    assert!((big.vs_one_peer[&Metric::UdpPps] - 1.0 / 1.02).abs() < 1e-9);
    assert_eq!(big.median(Metric::HostRoutes), Some(1004.0));
    assert_eq!(big.vs_one_peer[&Metric::HostRoutes], 1004.0 / 5.0);
    let full = big.figures[&Metric::FullApplyMs];
    assert_eq!((full.median, full.min, full.max), (20.4, 20.0, 30.0));
    assert!(r.failures().is_empty());
}

#[test]
fn targets_hold_or_not_at_the_largest_count() {
    let run = |f: f64| {
        report(BTreeMap::from([
            (1, vec![sample(1, 1, 1.0)]),
            (100, vec![sample(100, 1, 1.0)]),
            (1000, vec![sample(1000, 1, f)]),
        ]))
    };
    let at = |f: f64| run(f).targets;
    let r_at = |f: f64| run(f).targets_at;
    let good = at(1.04);
    assert_eq!(good.len(), 4);
    assert_eq!(r_at(1.04), Some(1000), "{good:?}");
    let holds: Vec<bool> = good.iter().map(|t| t.holds()).collect();
    assert_eq!(holds, [true, true, true, true], "{good:?}");
    assert!((good[0].value.unwrap() - 1.0 / 1.04).abs() < 1e-9);
    assert_eq!(good[2].value, Some(20.8));
    assert_eq!(good[3].value, Some(1.04), "the slower of add and remove");
    // 1/1.06 < 0.95; 20 ms x 3 > 50 ms; 1 ms x 6 > 5 ms.
    let holds = |f| at(f).iter().map(|t| t.holds()).collect::<Vec<_>>();
    assert_eq!(holds(1.06), [false, false, true, true]);
    assert_eq!(holds(3.0), [false, false, false, true]);
    assert_eq!(holds(6.0), [false, false, false, false]);
}

#[test]
fn a_missing_figure_misses_its_target_and_failures_are_named() {
    let mut bad = sample(1000, 2, 1.0);
    bad.tcp_gbps = None;
    bad.udp_pps = None;
    bad.error = Some("iperf3: no data received".into());
    let r = report(BTreeMap::from([
        (1, vec![sample(1, 1, 1.0)]),
        (1000, vec![bad]),
    ]));
    let t = &r.targets;
    assert_eq!((t[0].value, t[0].holds()), (None, false));
    assert_eq!((t[1].value, t[1].holds()), (None, false));
    assert!(t[2].holds() && t[3].holds());
    assert_eq!(
        r.failures(),
        ["1000 peers repeat 2: iperf3: no data received"]
    );
    // JSON round trip, for `-o json` readers; metrics are camelCase keys.
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<PeersReport>(&json).unwrap(), r);
    assert!(json.contains(r#""fullApplyMs":{"median":20.0"#), "{json}");
}
