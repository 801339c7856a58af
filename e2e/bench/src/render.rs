//! `liqo-bench tunnel` for people: the core header (date, machine, versions, installs), one
//! table per CPU profile, and the notes.

use super::report::{ProfileReport, Report, Row};
use crate::report_core::render::{header, median, notes, spread, table};

fn row_cells(r: &Row) -> Vec<String> {
    let failed = r.failures().count();
    let mut name = r.variant.label().to_owned();
    if failed > 0 {
        name.push_str(&format!(" [{failed} of {} failed]", r.samples.len()));
    }
    vec![
        name,
        spread(r.one_stream_gbps, 2),
        spread(r.four_streams_gbps, 2),
        median(r.rtt_us, 0),
        median(r.cpu_us_per_packet, 2),
        r.ours_over_this
            .map_or_else(|| "-".into(), |x| format!("{x:.2}x")),
    ]
}

/// One profile's table.
pub fn profile_table(p: &ProfileReport, cpus: usize) -> String {
    let mut rows = vec![
        vec![
            "variant".to_owned(),
            "1 stream Gbit/s".into(),
            "4 streams Gbit/s".into(),
            "ping RTT".into(),
            "CPU".into(),
            "ours / this".into(),
        ],
        vec![
            String::new(),
            "median (min-max)".into(),
            "median (min-max)".into(),
            "µs".into(),
            "µs/packet".into(),
            "(1 stream)".into(),
        ],
    ];
    rows.extend(p.rows.iter().map(row_cells));
    let mut out = format!("profile {}: {}\n", p.profile, p.profile.describe(cpus));
    out.push_str(&table(&rows));
    for r in &p.rows {
        for s in r.failures() {
            out.push_str(&format!(
                "  FAILED {} repeat {}: {}\n",
                r.variant.label(),
                s.repeat,
                s.error.as_deref().unwrap_or_default()
            ));
        }
    }
    out
}

/// The whole report as text.
pub fn render(r: &Report) -> String {
    let mut out = header("tunnel", &r.header, &r.setup.describe(), &[], "test");
    for p in &r.profiles {
        out.push('\n');
        out.push_str(&profile_table(p, r.header.machine.cpus));
    }
    out.push_str(&notes(&r.notes));
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{
        Profile, Variant,
        report::{ProfileReport, Sample, Setup},
    };

    pub(crate) fn setup() -> Setup {
        Setup {
            repeats: 5,
            seconds: 5,
            tunnel_mtu: 1420,
        }
    }

    fn samples(g1: [f64; 5], cpu: Option<f64>) -> Vec<Sample> {
        g1.iter()
            .zip(1..)
            .map(|(g, repeat)| Sample {
                repeat,
                gbps_1: Some(*g),
                gbps_4: Some(g * 2.0),
                rtt_us: Some(40.0 / g),
                cpu_us_per_packet: cpu,
                ..Sample::default()
            })
            .collect()
    }

    #[test]
    fn a_fixed_set_of_samples_renders_as_a_table() {
        let mut failed = samples([0.7, 0.75, 0.8, 0.72, 0.78], Some(7.25));
        failed[4].gbps_1 = None;
        failed[4].gbps_4 = None;
        failed[4].rtt_us = None;
        failed[4].error = Some("no traffic through the tunnel after 20 s".into());
        let p = ProfileReport::new(
            Profile::Shared,
            vec![
                Row::new(
                    Variant::Plain,
                    samples([16.0, 18.0, 17.0, 15.5, 16.5], None),
                ),
                Row::new(
                    Variant::Ours,
                    samples([2.6, 2.8, 2.9, 2.7, 2.75], Some(4.0)),
                ),
                Row::new(Variant::Boringtun, failed),
            ],
        );
        let text = profile_table(&p, 2);
        let expected = "\
profile shared: no pinning: the gateways, the iperf3 client and the server share the 2 CPUs
variant                            1 stream Gbit/s     4 streams Gbit/s  ping RTT        CPU  ours / this
                                  median (min-max)     median (min-max)        µs  µs/packet   (1 stream)
plain routed                   16.50 (15.50-18.00)  33.00 (31.00-36.00)         2          -        0.17x
ours (liqo-gateway)               2.75 (2.60-2.90)     5.50 (5.20-5.80)        15       4.00        1.00x
boringtun-cli [1 of 5 failed]     0.73 (0.70-0.80)     1.47 (1.40-1.60)        54       7.25        3.74x
  FAILED boringtun-cli repeat 5: no traffic through the tunnel after 20 s
";
        assert_eq!(text, expected, "\n{text}");
    }

    #[test]
    fn the_report_has_header_versions_installs_tables_and_notes() {
        let p = ProfileReport::new(
            Profile::Split,
            vec![Row::new(Variant::Ours, samples([2.0; 5], Some(3.0)))],
        );
        let notes = crate::report::notes(&setup(), &[Variant::Ours], &[Profile::Split]);
        let r = Report {
            header: crate::report_core::tests::header(),
            setup: setup(),
            profiles: vec![p],
            notes,
        };
        let text = render(&r);
        for want in [
            "liqo-bench tunnel: 2026-11-21 18:04 UTC, kernel 6.18.44, 2 CPUs (AMD EPYC), 3.8 GiB of memory, 5 repeats x 5 s, tunnel MTU 1420\n",
            "  boringtun-cli  boringtun 0.7.1  /var/cache/liqo-lab/bench/bin/boringtun-cli\n",
            "  boringtun-cli 0.7.1 (cargo install)  built  66.2 s\n",
            "profile split: gwA's daemon + iperf3 client on CPU 0, gwB's daemon + iperf3 server on CPU 1\n",
            "ours (liqo-gateway)  2.00 (2.00-2.00)",
            "- ours: liqo-gateway in gwA and gwB",
            "background CPU load at the start of a test: at most 3% (waited 0.0 s for it to drop)\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        // JSON round trip, for `-o json` readers.
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&json).unwrap(), r);
        assert!(json.contains(r#""variant":"ours""#), "{json}");
    }
}
