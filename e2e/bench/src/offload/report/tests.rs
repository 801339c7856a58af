//! The report's tests and the fixtures the renderer's tests share.

use super::*;

/// The core header of a run with a debug build of ours.
pub(crate) fn header() -> Header {
    crate::peering::report::tests::header()
}

pub(crate) fn setup(pods: u32, repeats: u32) -> Setup {
    Setup {
        kubernetes: "v1.36.0".into(),
        pods,
        provider_nodes: 12,
        consumer_nodes: 1,
        repeats,
        vanilla_only: false,
        clusters_up_secs: 30.0,
        install_secs: 5.0,
        peering_secs: 3.0,
        offload_secs: 1.0,
        virtual_node_pods: Some(1320),
    }
}

fn lat(p50: f64, p99: f64) -> Option<Latency> {
    Some(Latency {
        pods: 1000,
        p50_ms: p50,
        p99_ms: p99,
        max_ms: p99 + 1.0,
    })
}

pub(crate) fn phase(side: Side, repeat: u32, secs: f64) -> Phase {
    Phase {
        side,
        repeat,
        pods: 1000,
        secs,
        created_to_running: lat(secs * 100.0, secs * 900.0),
        scheduled_to_ready: lat(secs * 10.0, secs * 90.0),
        breakdown: (side == Side::Liqo).then(|| Breakdown {
            to_remote: lat(secs, secs * 2.0),
            remote_running: lat(secs * 3.0, secs * 4.0),
            back_home: lat(secs * 5.0, secs * 6.0),
        }),
        cpu: vec![ProcCpu {
            process: manager("rome"),
            cpu_secs: 1.0,
        }],
        background_load_pct: 3.0,
        requests: Vec::new(),
        restart: None,
    }
}

pub(crate) fn level(pods: u32, vk_mib: u64) -> Level {
    let usage = |process: String, mib: u64| ProcUsage {
        process,
        pid: 7,
        rss_kib: mib * 1024,
        hwm_kib: mib * 1024 + 512,
        file_kib: Some(mib * 256),
        cpu_secs: f64::from(pods) / 100.0,
    };
    Level {
        pods,
        secs: f64::from(pods) / 20.0,
        after_timed: false,
        quiet: false,
        processes: vec![
            usage(manager("rome"), 30),
            usage(manager("milan"), 90),
            usage(VK.into(), vk_mib),
        ],
    }
}

#[test]
fn medians_ratio_and_targets() {
    let phases = vec![
        phase(Side::Vanilla, 1, 50.0),
        phase(Side::Liqo, 1, 80.0),
        phase(Side::Vanilla, 2, 60.0),
        phase(Side::Liqo, 2, 100.0),
        phase(Side::Vanilla, 3, 55.0),
        phase(Side::Liqo, 3, 90.0),
    ];
    let levels = vec![level(0, 10), level(100, 20), level(1000, 120)];
    let r = OffloadReport::new(header(), setup(1000, 3), phases, levels);
    assert!(r.complete());
    assert_eq!(r.vanilla.secs.unwrap().median, 55.0);
    assert_eq!(r.liqo.secs.unwrap().median, 90.0);
    let s2r = r.liqo.scheduled_to_ready.unwrap();
    assert_eq!(
        (s2r.p50_ms, s2r.p99_ms, s2r.max_ms),
        (900.0, 8100.0, 9001.0)
    );
    assert_eq!(s2r.pods, 3000);
    assert!((r.ratio.unwrap() - 90.0 / 55.0).abs() < 1e-9);
    let t = &r.targets[0];
    assert_eq!((t.value, t.met), (Some(90.0), Some(false)));
    assert!(
        (t.limit.unwrap() - (1.1 * 55.0 + 2.0)).abs() < 1e-9,
        "{t:?}"
    );
    let vk = &r.targets[1];
    assert_eq!((vk.value, vk.met), (Some(120.0), Some(false)), "{vk:?}");
    assert_eq!(r.targets[2].met, Some(true), "rome 30 MiB");
    assert_eq!(r.targets[3].met, Some(false), "milan 90 MiB");
    assert!(r.notes.iter().any(|n| n.contains("DEBUG")));
    assert!(!r.notes.iter().any(|n| n.contains("in-process")));
}

#[test]
fn a_missing_side_or_process_is_not_met_but_not_measured() {
    let r = OffloadReport::new(
        header(),
        setup(1000, 1),
        vec![phase(Side::Vanilla, 1, 50.0)],
        vec![Level {
            pods: 1000,
            secs: 1.0,
            after_timed: false,
            quiet: false,
            processes: vec![],
        }],
    );
    assert!(!r.complete());
    assert_eq!(r.ratio, None);
    assert_eq!(r.targets[0].met, None);
    assert!((r.targets[0].limit.unwrap() - 57.0).abs() < 1e-9);
    assert_eq!(r.targets[1].value, None);
    assert!(r.notes.iter().any(|n| n.contains("in-process")));
    assert!(r.notes.iter().any(|n| n.contains("no median of 3")));

    let mut s = setup(1000, 1);
    s.vanilla_only = true;
    let v = OffloadReport::new(header(), s, vec![phase(Side::Vanilla, 1, 50.0)], vec![]);
    assert!(
        v.complete(),
        "vanilla alone is complete with --vanilla-only"
    );
    assert!(v.notes.iter().any(|n| n.contains("--vanilla-only")));
}
