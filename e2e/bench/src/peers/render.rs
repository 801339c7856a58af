//! `liqo-bench peers` for people: the core header, the figures per peer count, the same as
//! ratios to the 1 peer figures, one PASS or FAIL line per target, the failures and the notes.

use super::report::{Metric, PeersReport, Row, TARGET_PEERS};
use crate::report_core::render::{header, median, notes, spread, table, targets};

/// Decimals of a median (and of its range where shown).
fn decimals(m: Metric) -> usize {
    match m {
        Metric::FullApplyMs | Metric::AddOneMs | Metric::RemoveOneMs | Metric::BackToOneMs => 2,
        Metric::TcpGbps => 2,
        Metric::UdpPps => 1,
        _ => 0,
    }
}

/// `host/gateway` cells of a pair of metrics.
fn pair(a: String, b: String) -> String {
    format!("{a}/{b}")
}

fn figure_cells(r: &Row) -> Vec<String> {
    let m = |x| median(r.figures.get(&x).copied(), decimals(x));
    let failed = r.failures().count();
    let mut peers = r.peers.to_string();
    if failed > 0 {
        peers.push_str(&format!(" [{failed} of {} failed]", r.samples.len()));
    }
    let kpps = r.figures.get(&Metric::UdpPps).map(|s| s.scaled(1e-3));
    vec![
        peers,
        m(Metric::FullApplyMs),
        m(Metric::AddOneMs),
        m(Metric::RemoveOneMs),
        m(Metric::BackToOneMs),
        pair(m(Metric::HostRules), m(Metric::GatewayRules)),
        pair(m(Metric::HostRoutes), m(Metric::GatewayRoutes)),
        spread(r.figures.get(&Metric::TcpGbps).copied(), 2),
        spread(kpps, 1),
    ]
}

fn ratio_cells(r: &Row) -> Vec<String> {
    let x = |m| {
        r.vs_one_peer
            .get(&m)
            .map_or_else(|| "-".into(), |v| format!("{v:.2}x"))
    };
    vec![
        r.peers.to_string(),
        x(Metric::FullApplyMs),
        x(Metric::AddOneMs),
        x(Metric::RemoveOneMs),
        x(Metric::BackToOneMs),
        pair(x(Metric::HostRules), x(Metric::GatewayRules)),
        pair(x(Metric::HostRoutes), x(Metric::GatewayRoutes)),
        x(Metric::TcpGbps),
        x(Metric::UdpPps),
    ]
}

/// The figures and the ratios, one row per peer count.
pub fn tables(r: &PeersReport) -> String {
    let head = |first: &str, tcp: &str, udp: &str| {
        vec![
            vec![
                first.to_owned(),
                "full apply".into(),
                "+1 peer".into(),
                "-1 peer".into(),
                "back to 1".into(),
                "ip rules".into(),
                "routes".into(),
                "1 TCP stream".into(),
                format!("UDP {} B", r.udp.payload_bytes),
            ],
            vec![
                String::new(),
                "ms".into(),
                "ms".into(),
                "ms".into(),
                "ms".into(),
                "host/gw".into(),
                "host/gw".into(),
                tcp.into(),
                udp.into(),
            ],
        ]
    };
    let mut figures = head("peers", "Gbit/s (min-max)", "kpackets/s (min-max)");
    figures.extend(r.rows.iter().map(figure_cells));
    let mut ratios = head("peers", "", "");
    ratios.extend(r.rows.iter().map(ratio_cells));
    format!(
        "{}\nratio to the 1-peer figure:\n{}",
        table(&figures),
        table(&ratios)
    )
}

/// The whole report as text.
pub fn render(r: &PeersReport) -> String {
    let mut out = header("peers", &r.header, &r.setup.describe(), &[], "test");
    out.push('\n');
    out.push_str(&tables(r));
    if let Some(n) = r.targets_at {
        out.push('\n');
        out.push_str(&targets(
            &format!("targets (set for {TARGET_PEERS} peers), at {n} peers:"),
            &r.targets,
        ));
    }
    for f in r.failures() {
        out.push_str(&format!("  FAILED {f}\n"));
    }
    out.push_str(&notes(&r.notes));
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::{
        peers::report::tests::{report, sample},
        report_core::Target,
    };

    #[test]
    fn a_fixed_set_of_samples_renders_as_tables_and_target_lines() {
        let mut failed = sample(1000, 3, 1.0);
        failed.udp_pps = None;
        failed.error = Some("iperf3 -u -l 64: no answer within 31 s".into());
        let r = report(BTreeMap::from([
            (
                1,
                vec![sample(1, 1, 1.0), sample(1, 2, 1.0), sample(1, 3, 1.0)],
            ),
            (
                1000,
                vec![sample(1000, 1, 1.02), sample(1000, 2, 1.1), failed],
            ),
        ]));
        // The failed sample has no UDP figure: 1000 peers' UDP median is that of the other two.
        let expected = "\
peers                 full apply  +1 peer  -1 peer  back to 1  ip rules     routes      1 TCP stream              UDP 64 B
                              ms       ms       ms         ms   host/gw    host/gw  Gbit/s (min-max)  kpackets/s (min-max)
1                              -     1.00     0.80          -       4/4        5/3  4.00 (4.00-4.00)      32.0 (32.0-32.0)
1000 [1 of 3 failed]       20.40     1.02     0.82      15.30       4/4  1004/1002  3.92 (3.64-4.00)      30.2 (29.1-31.4)

ratio to the 1-peer figure:
peers  full apply  +1 peer  -1 peer  back to 1     ip rules           routes  1 TCP stream  UDP 64 B
               ms       ms       ms         ms      host/gw          host/gw
1               -    1.00x    1.00x          -  1.00x/1.00x      1.00x/1.00x         1.00x     1.00x
1000            -    1.02x    1.02x          -  1.00x/1.00x  200.80x/334.00x         0.98x     0.94x
";
        let text = tables(&r);
        assert_eq!(text, expected, "\n{text}");
    }

    #[test]
    fn the_report_has_header_tables_targets_failures_and_notes() {
        let mut bad = sample(100, 1, 1.0);
        bad.error = Some("no traffic from podA to podB after 20 s".into());
        let r = report(BTreeMap::from([
            (1, vec![sample(1, 1, 1.0)]),
            (100, vec![bad]),
        ]));
        let text = render(&r);
        for want in [
            "liqo-bench peers: 2026-11-21 18:04 UTC, kernel 6.18.44, 2 CPUs (AMD EPYC), 3.8 GiB of memory, 5 repeats x 5 s, tunnel MTU 1420\n",
            "\ntargets (set for 1000 peers), at 100 peers:\n",
            "PASS  one TCP stream through the real peer, 100 peers / 1 peer: 1.000 (target >= 0.950)\n",
            "PASS  full apply of 100 peers (from 1): 20.00 ms (target <= 50.00 ms)\n",
            "  FAILED 100 peers repeat 1: no traffic from podA to podB after 20 s\n",
            "- Topology: podA -veth- gwA",
            "podA sent 150.0 kpackets/s and podB got 32.0 (medians over every sample): the offered load is above what passes (saturated).",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        let missing = Target {
            value: None,
            met: None,
            ..r.targets[3].clone()
        };
        assert_eq!(
            crate::report_core::render::target_line(&missing),
            "FAIL  one-peer change at 100 peers (the slower of add and remove): not measured \
             (target <= 5.00 ms)"
        );
    }
}
