//! `liqo-lab bench offload` for people: the header, both sides' times and per-pod latencies,
//! the ratio and the targets, the processes' memory and CPU per pod count, and the notes.

use super::report::{Level, OffloadReport, Side, SideSummary, Target};
use crate::bench::{
    Spread,
    render::{notes, spread, table},
};

fn header(r: &OffloadReport) -> String {
    let h = &r.header;
    let mut out = format!(
        "liqo-lab bench offload: {}, kernel {}, {} CPUs ({}), {} pods, {} timed run(s) per side\n",
        h.date, h.kernel, h.cpus, h.cpu_model, h.pods, h.repeats
    );
    out.push_str(&format!(
        "  kubernetes {} (harness: etcd, kube-apiserver, kcm, scheduler, kwok; rome {} kwok \
         node(s), milan {} kwok nodes, both on this machine); clusters up in {:.1} s",
        h.kubernetes, h.consumer_nodes, h.provider_nodes, h.clusters_up_secs,
    ));
    if h.vanilla_only {
        out.push_str("; Liqo not installed (--vanilla-only)\n");
    } else {
        out.push_str(&format!(
            ", Liqo installed in {:.1} s, peered in {:.1} s, namespace offloaded in {:.1} s\n",
            h.install_secs, h.peering_secs, h.offload_secs
        ));
    }
    if let Some(p) = h.virtual_node_pods {
        out.push_str(&format!(
            "  virtual node liqo-milan: {p} allocatable pods\n"
        ));
    }
    for t in &h.tools {
        out.push_str(&format!("  {}: {} ({})\n", t.name, t.version, t.path));
    }
    if h.debug_build {
        out.push_str("  DEBUG builds: figures are not final\n");
    }
    out.push_str(&format!(
        "  background CPU load at the start of a timed run: at most {:.0}% (waited {:.1} s for \
         it to drop)\n",
        h.background_load_max_pct, h.background_wait_secs
    ));
    out
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

fn target_cells(t: &Target) -> Vec<String> {
    let num = |x: Option<f64>| x.map_or_else(|| "-".into(), |v| format!("{v:.1}"));
    vec![
        t.what.clone(),
        num(t.value),
        num(t.limit),
        match t.met {
            Some(true) => "yes".into(),
            Some(false) => "NO".into(),
            None => "not measured".into(),
        },
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

/// Every table.
pub fn tables(r: &OffloadReport) -> String {
    let n = r.header.pods;
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
    let mut targets = vec![vec![
        "target".to_owned(),
        "value".into(),
        "limit".into(),
        "met".into(),
    ]];
    targets.extend(r.targets.iter().map(target_cells));
    let mut usage = vec![
        vec![
            "process".to_owned(),
            "home pods".into(),
            "VmRSS MiB".into(),
            "VmHWM MiB".into(),
            "CPU s".into(),
            "CPU s".into(),
        ],
        vec![
            String::new(),
            String::new(),
            String::new(),
            "peak".into(),
            "total".into(),
            "since previous".into(),
        ],
    ];
    usage.extend(usage_rows(&r.levels));
    let mut cpu = vec![
        vec![
            "CPU s during a timed run".to_owned(),
            "vanilla".into(),
            "Liqo".into(),
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
    out.push('\n');
    out.push_str(&table(&targets));
    // Without Liqo (--vanilla-only) no process is measured.
    for t in [usage, cpu] {
        if t.len() > 2 {
            out.push('\n');
            out.push_str(&table(&t));
        }
    }
    out
}

/// The whole report as text.
pub fn render(r: &OffloadReport) -> String {
    let mut out = header(r);
    out.push('\n');
    out.push_str(&tables(r));
    out.push_str(&notes(&r.notes));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::offload::report::{
        VK,
        tests::{header as h, level, phase},
    };

    #[test]
    fn the_tables_show_both_sides_the_targets_and_the_levels() {
        let phases = vec![phase(Side::Vanilla, 1, 50.0), phase(Side::Liqo, 1, 80.0)];
        let mut after = level(0, 90);
        after.after_timed = true;
        let levels = vec![level(0, 10), level(100, 20), level(1000, 120), after];
        let text = render(&OffloadReport::new(h(1000, 1), phases, levels));
        let line = |start: &str| {
            text.lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no {start}: {text}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
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
            line("Liqo seconds"),
            "Liqo seconds <= 1.5 x vanilla + 10 s (1000 pods) 80.0 85.0 yes"
        );
        assert_eq!(
            line("liqo-virtual-kubelet VmRSS"),
            "liqo-virtual-kubelet VmRSS MiB at 1000 pods 120.0 100.0 NO"
        );
        assert_eq!(line(VK), format!("{VK} 0 10.0 10.5 0.00 -"));
        let i = text.lines().position(|l| l.starts_with(VK)).unwrap();
        let next: Vec<&str> = text
            .lines()
            .nth(i + 2)
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(next, ["1000", "120.0", "120.5", "10.00", "9.00"]);
        let last: Vec<&str> = text
            .lines()
            .nth(i + 3)
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            last,
            ["0", "after", "timed", "90.0", "90.5", "0.00", "-10.00"]
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
    }
}
