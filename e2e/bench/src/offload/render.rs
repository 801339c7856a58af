//! `liqo-bench offload` for people: the core header, both sides' times and per-pod latencies,
//! the ratio and the targets, the processes' memory and CPU per pod count, and the notes.

use super::report::{Level, OffloadReport, Side, SideSummary};
use crate::{
    Spread,
    report_core::render::{header, report, spread, table, targets},
};

fn header_lines(r: &OffloadReport) -> String {
    let s = &r.setup;
    let mut setup = format!(
        "kubernetes {} (harness: etcd, kube-apiserver, kcm, scheduler, kwok; rome {} kwok \
         node(s), milan {} kwok nodes, both on this machine); clusters up in {:.1} s",
        s.kubernetes, s.consumer_nodes, s.provider_nodes, s.clusters_up_secs,
    );
    if s.vanilla_only {
        setup.push_str("; Liqo not installed (--vanilla-only)");
    } else {
        setup.push_str(&format!(
            ", Liqo installed in {:.1} s, peered in {:.1} s, namespace offloaded in {:.1} s",
            s.install_secs, s.peering_secs, s.offload_secs
        ));
    }
    let mut lines = vec![setup];
    if let Some(p) = s.virtual_node_pods {
        lines.push(format!("virtual node liqo-milan: {p} allocatable pods"));
    }
    header(
        "offload",
        &r.header,
        &format!("{} pods, {} timed run(s) per side", s.pods, s.repeats),
        &lines,
        "timed run",
    )
}

fn ms(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.0}"))
}

fn side_cells(s: &SideSummary) -> Vec<String> {
    vec![
        s.side.label().to_owned(),
        spread(s.secs, 2),
        ms(s.created_to_running.map(|l| l.p50_ms)),
        ms(s.created_to_running.map(|l| l.p99_ms)),
        ms(s.scheduled_to_ready.map(|l| l.p50_ms)),
        ms(s.scheduled_to_ready.map(|l| l.p99_ms)),
    ]
}

/// The memory rows: one per (process, level), with the CPU since the level before.
fn usage_rows(levels: &[Level]) -> Vec<Vec<String>> {
    let mut names: Vec<&str> = Vec::new();
    for p in levels.iter().flat_map(|l| &l.processes) {
        if !names.contains(&p.process.as_str()) {
            names.push(&p.process);
        }
    }
    let mut rows = Vec::new();
    for name in names {
        let mut before: Option<f64> = None;
        for l in levels {
            let Some(p) = l.processes.iter().find(|p| p.process == name) else {
                before = None;
                continue;
            };
            rows.push(vec![
                if before.is_none() && rows.last().is_none_or(|r: &Vec<String>| r[0] != name) {
                    name.to_owned()
                } else {
                    String::new()
                },
                if l.after_timed {
                    format!("{} after timed", l.pods)
                } else {
                    l.pods.to_string()
                },
                format!("{:.1}", p.rss_mib()),
                p.file_mib()
                    .map_or_else(|| "-".into(), |f| format!("{f:.1}")),
                format!("{:.1}", p.hwm_mib()),
                format!("{:.2}", p.cpu_secs),
                before.map_or_else(|| "-".into(), |b| format!("{:.2}", p.cpu_secs - b)),
            ]);
            before = Some(p.cpu_secs);
        }
    }
    rows
}

/// The CPU of each process during the timed runs, median per side.
fn cpu_rows(r: &OffloadReport) -> Vec<Vec<String>> {
    let mut names: Vec<&str> = Vec::new();
    for c in r.phases.iter().flat_map(|p| &p.cpu) {
        if !names.contains(&c.process.as_str()) {
            names.push(&c.process);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let median = |side: Side| {
                Spread::of(
                    r.phases
                        .iter()
                        .filter(|p| p.side == side)
                        .flat_map(|p| p.cpu.iter().filter(|c| c.process == name))
                        .map(|c| c.cpu_secs),
                )
            };
            vec![
                name.to_owned(),
                spread(median(Side::Vanilla), 2),
                spread(median(Side::Liqo), 2),
            ]
        })
        .collect()
}

/// Where an offloaded pod's time goes (empty without a Liqo run).
fn breakdown_rows(r: &OffloadReport) -> Vec<Vec<String>> {
    let Some(b) = r.liqo.breakdown else {
        return Vec::new();
    };
    let mut rows = vec![vec![
        "Liqo, per pod (ms)".to_owned(),
        "p50".into(),
        "p99".into(),
        "max".into(),
    ]];
    for (what, l) in [
        (
            "home scheduled -> remote pod seen (VK ShadowPod, ShadowPod controller)",
            b.to_remote,
        ),
        (
            "remote pod seen -> remote Running (milan's scheduler, kwok)",
            b.remote_running,
        ),
        (
            "remote Running -> home Running (VK status reflection)",
            b.back_home,
        ),
    ] {
        rows.push(vec![
            what.to_owned(),
            ms(l.map(|l| l.p50_ms)),
            ms(l.map(|l| l.p99_ms)),
            ms(l.map(|l| l.max_ms)),
        ]);
    }
    rows
}

/// The requests per pod of each side's last run, by API server and client (the API servers'
/// audit logs); empty when none were counted.
fn request_rows(r: &OffloadReport) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "requests per pod (last run)".to_owned(),
        "API server".into(),
        "client".into(),
        "reads".into(),
        "watches".into(),
        "writes".into(),
        "writes by verb and resource".into(),
        "reads by verb and resource".into(),
    ]];
    for side in [Side::Vanilla, Side::Liqo] {
        let Some(p) = r.phases.iter().rev().find(|p| p.side == side) else {
            continue;
        };
        let name = side.short();
        let (mut reads, mut writes) = (0.0, 0.0);
        for c in &p.requests {
            reads += c.reads;
            writes += c.writes;
            // Below one request per hundred pods: background (leases, probes of the bench).
            if c.reads + c.writes < 0.01 {
                continue;
            }
            // Reads under one per hundred pods are left out (background: watches' lists).
            let by = |of: &[(String, f64)], n: usize, least: f64| {
                let top: Vec<String> = of
                    .iter()
                    .filter(|(_, per)| *per >= least)
                    .take(n)
                    .map(|(what, per)| format!("{what} {per:.2}"))
                    .collect();
                top.join(", ")
            };
            rows.push(vec![
                name.to_owned(),
                c.cluster.clone(),
                c.client.clone(),
                format!("{:.2}", c.reads),
                format!("{:.3}", c.watches),
                format!("{:.2}", c.writes),
                by(&c.writes_by, 4, 0.0),
                by(&c.reads_by, 3, 0.01),
            ]);
        }
        if !p.requests.is_empty() {
            rows.push(vec![
                format!("{name} total"),
                String::new(),
                String::new(),
                format!("{reads:.2}"),
                String::new(),
                format!("{writes:.2}"),
                String::new(),
                String::new(),
            ]);
        }
    }
    rows
}

/// Every table.
pub fn tables(r: &OffloadReport) -> String {
    let n = r.setup.pods;
    let mut times = vec![
        vec![
            "side".to_owned(),
            format!("seconds to {n} Running"),
            "seen->Running ms".into(),
            String::new(),
            "scheduled->Ready ms".into(),
            String::new(),
        ],
        vec![
            String::new(),
            "median (min-max)".into(),
            "p50".into(),
            "p99".into(),
            "p50".into(),
            "p99".into(),
        ],
        side_cells(&r.vanilla),
        side_cells(&r.liqo),
    ];
    times.push(vec![
        "ratio Liqo / vanilla (medians)".into(),
        r.ratio.map_or_else(|| "-".into(), |x| format!("{x:.2}x")),
    ]);
    let mut usage = vec![
        vec![
            "process".to_owned(),
            "home pods".into(),
            "VmRSS MiB".into(),
            "VmRSS MiB".into(),
            "VmHWM MiB".into(),
            "CPU s".into(),
            "CPU s".into(),
        ],
        vec![
            String::new(),
            String::new(),
            String::new(),
            "of it files".into(),
            "peak".into(),
            "total".into(),
            "since previous".into(),
        ],
    ];
    usage.extend(usage_rows(&r.levels));
    let mut cpu = vec![
        vec![
            "CPU s during a timed run".to_owned(),
            Side::Vanilla.short().into(),
            Side::Liqo.short().into(),
        ],
        vec![
            String::new(),
            "median (min-max)".into(),
            "median (min-max)".into(),
        ],
    ];
    cpu.extend(cpu_rows(r));
    let mut out = table(&times);
    let parts = breakdown_rows(r);
    if !parts.is_empty() {
        out.push('\n');
        out.push_str(&table(&parts));
    }
    // Without Liqo (--vanilla-only) the targets (Liqo's) do not apply, and no process is
    // measured.
    if !r.setup.vanilla_only {
        out.push('\n');
        out.push_str(&targets("targets:", &r.targets));
    }
    let requests = request_rows(r);
    if requests.len() > 1 {
        out.push('\n');
        out.push_str(&table(&requests));
    }
    if let Some(x) = r.phases.iter().find_map(|p| p.restart.as_ref()) {
        out.push_str(&format!(
            "\nvirtual kubelet killed (SIGKILL) with {} pods Running: running again after {:.1} s, \
             its node's Lease renewed after {:.1} s, quiet (no request but Lease and node for \
             {} s) after {:.1} s;\n  writes to pods and ShadowPods since: {}; then {} home pods \
             Running, {} ShadowPods, {} pods on the provider\n",
            x.pods,
            x.secs_to_process,
            x.secs_to_lease,
            super::restart::QUIET.as_secs(),
            x.secs_to_quiet,
            x.pod_writes,
            x.home_running,
            x.shadow_pods,
            x.remote_pods,
        ));
        for c in &x.requests {
            out.push_str(&format!(
                "  its requests on {} per pod: {:.3} reads, {:.4} watches, {:.3} writes\n",
                c.cluster, c.reads, c.watches, c.writes
            ));
        }
    }
    for t in [usage, cpu] {
        if t.len() > 2 {
            out.push('\n');
            out.push_str(&table(&t));
        }
    }
    out.push_str(&super::floor::lines(r));
    out
}

/// The whole report as text.
pub fn render(r: &OffloadReport) -> String {
    report(header_lines(r), &tables(r), &r.notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload::report::{
        VK,
        tests::{header as h, level, phase, setup},
    };

    #[test]
    fn the_tables_show_both_sides_the_targets_and_the_levels() {
        let phases = vec![phase(Side::Vanilla, 1, 50.0), phase(Side::Liqo, 1, 80.0)];
        let mut after = level(0, 90);
        (after.after_timed, after.quiet, after.secs) = (true, true, 31.0);
        let levels = vec![level(0, 10), level(100, 20), level(1000, 120), after];
        let text = render(&OffloadReport::new(h(), setup(1000, 1), phases, levels));
        let line = |start: &str| crate::report_core::render::tests::line(&text, start);
        assert_eq!(
            line("vanilla"),
            "vanilla (milan's kwok nodes) 50.00 (50.00-50.00) 5000 45000 500 4500"
        );
        assert_eq!(
            line("Liqo (rome"),
            "Liqo (rome -> liqo-milan -> milan) 80.00 (80.00-80.00) 8000 72000 800 7200"
        );
        assert_eq!(line("ratio"), "ratio Liqo / vanilla (medians) 1.60x");
        assert_eq!(
            line("home scheduled -> remote pod seen"),
            "home scheduled -> remote pod seen (VK ShadowPod, ShadowPod controller) 80 160 161"
        );
        assert_eq!(
            line("remote Running -> home Running"),
            "remote Running -> home Running (VK status reflection) 400 480 481"
        );
        assert_eq!(
            line("FAIL  Liqo seconds"),
            "FAIL Liqo seconds <= 1.1 x vanilla + 2 s (1000 pods): 80.00 s (target <= 57.00 s)"
        );
        assert_eq!(
            line("FAIL  liqo-virtual-kubelet VmRSS"),
            "FAIL liqo-virtual-kubelet VmRSS at 1000 pods: 120.00 MiB (target <= 50.00 MiB)"
        );
        assert_eq!(line(VK), format!("{VK} 0 10.0 2.5 10.5 0.00 -"));
        let i = text.lines().position(|l| l.starts_with(VK)).unwrap();
        let next: Vec<&str> = text
            .lines()
            .nth(i + 2)
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(next, ["1000", "120.0", "30.0", "120.5", "10.00", "9.00"]);
        let last: Vec<&str> = text
            .lines()
            .nth(i + 3)
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            last,
            [
                "0", "after", "timed", "90.0", "22.5", "90.5", "0.00", "-10.00"
            ]
        );
        let cpu: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("liqo-controller-manager (rome)") && l.contains('('))
            .filter(|l| l.contains("(1.00-1.00)"))
            .collect();
        assert_eq!(cpu.len(), 1, "{text}");
        assert_eq!(
            cpu[0].split_whitespace().collect::<Vec<_>>().join(" "),
            "liqo-controller-manager (rome) 1.00 (1.00-1.00) 1.00 (1.00-1.00)"
        );
        assert!(
            text.contains("virtual node liqo-milan: 1320 allocatable pods"),
            "{text}"
        );
        assert!(text.contains("\nnotes:\n- timed run:"), "{text}");
        assert!(
            text.contains("every pod was deleted, once Liqo's processes were quiet")
                && text.contains("31 s after the last run"),
            "{text}"
        );
    }

    #[test]
    fn a_report_from_before_the_files_column_reads_and_shows_a_dash() {
        let old = r#"{"process":"liqo-virtual-kubelet (rome -> milan)","pid":7,"rssKib":10240,"hwmKib":10752,"cpuSecs":0.5}"#;
        let usage: crate::offload::report::ProcUsage = serde_json::from_str(old).unwrap();
        assert_eq!(usage.file_kib, None);
        let mut l = level(0, 10);
        l.processes = vec![usage];
        let rows = usage_rows(&[l]);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][1..4], ["0", "10.0", "-"]);
    }
}
