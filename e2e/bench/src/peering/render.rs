//! `liqo-bench peering` for people: the core header, the times (median, min-max, ratio to the
//! apiserver floor), the controller-managers' memory and CPU, and the notes.

use super::report::{PeeringReport, Row, Usage};
use crate::report_core::render::{header, report, spread, table};

fn header_lines(r: &PeeringReport) -> String {
    let s = &r.setup;
    header(
        "peering",
        &r.header,
        &format!(
            "{} rounds, {} floor samples per round",
            s.repeats, s.floor_samples
        ),
        &[format!(
            "kubernetes {} (harness: etcd, kube-apiserver, kcm, scheduler, 1 kwok node per \
             cluster; rome and milan on this machine), started in {:.1} s, Liqo installed in \
             {:.1} s",
            s.kubernetes, s.clusters_up_secs, s.install_secs
        )],
        "round",
    )
}

fn row_cells(r: &Row, repeats: u32) -> Vec<String> {
    let mut label = r.metric.label().to_owned();
    if r.rounds < repeats as usize {
        label.push_str(&format!(" [{} of {repeats} rounds]", r.rounds));
    }
    vec![
        label,
        spread(r.secs, 3),
        r.over_floor
            .map_or_else(|| "-".into(), |x| format!("{x:.0}x")),
    ]
}

fn usage_cells(u: &Usage) -> Vec<String> {
    vec![
        u.cluster.clone(),
        spread(u.rss_mib, 1),
        format!("{:.1}", u.hwm_mib),
        format!("{:.2}", u.cpu_secs),
        format!("{:.1}", u.wall_secs),
    ]
}

/// The times and the usage tables.
pub fn tables(r: &PeeringReport) -> String {
    let mut times = vec![
        vec![
            "from the command to".to_owned(),
            "seconds".into(),
            "/ floor".into(),
        ],
        vec![String::new(), "median (min-max)".into(), String::new()],
    ];
    times.extend(r.rows.iter().map(|x| row_cells(x, r.setup.repeats)));
    times.push(vec![
        "floor: CRD apply + status patch + watch event".into(),
        spread(r.floor_ms.map(|f| f.scaled(1e-3)), 4),
        "1x".into(),
    ]);
    let mut usage = vec![
        vec![
            "liqo-controller-manager".to_owned(),
            "VmRSS MiB".into(),
            "VmHWM MiB".into(),
            "CPU s".into(),
            "over s".into(),
        ],
        vec![
            String::new(),
            "median (min-max)".into(),
            "peak".into(),
            "user+sys".into(),
            "wall".into(),
        ],
    ];
    usage.extend(r.usage.iter().map(usage_cells));
    format!("{}\n{}", table(&times), table(&usage))
}

/// The whole report as text.
pub fn render(r: &PeeringReport) -> String {
    report(header_lines(r), &tables(r), &r.notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peering::report::tests::{header as h, round, setup};

    #[test]
    fn the_tables_show_medians_ranges_ratios_and_memory() {
        let rounds = vec![round(1, 2.0), round(2, 1.0), round(3, 4.0)];
        let cpu = [
            ("rome".to_owned(), 1.5, 30.0),
            ("milan".to_owned(), 1.0, 30.0),
        ];
        let r = PeeringReport::new(h(), setup(3), rounds, &cpu);
        let text = render(&r);
        let line = |start: &str| crate::report_core::render::tests::line(&text, start);
        assert_eq!(
            line("peer -> rome OutgoingPeering"),
            "peer -> rome OutgoingPeering=Established 2.000 (1.000-4.000) 100x"
        );
        assert_eq!(
            line("peer -> rome Authentication"),
            "peer -> rome AuthenticationStatus=Established [1 of 3 rounds] 0.500 (0.500-0.500) 25x"
        );
        assert_eq!(
            line("floor:"),
            "floor: CRD apply + status patch + watch event 0.0200 (0.0100-0.0300) 1x"
        );
        assert_eq!(line("rome "), "rome 20.0 (10.0-30.0) 40.0 1.50 30.0");
        assert!(text.contains("DEBUG builds"), "{text}");
        assert!(text.contains("\nnotes:\n- each round:"), "{text}");
    }
}
