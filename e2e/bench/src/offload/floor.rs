//! The least time a side's run could take on this machine, from the CPU it used: the seconds
//! of the clusters' own processes (etcd, kube-apiserver, kcm, scheduler, kwok of both
//! clusters) and of Liqo's, spread over every CPU. An estimate at the run's request volume,
//! not a bound on every design: the clusters' CPU includes serving Liqo's requests (fewer
//! requests, less of it) and work that goes with elapsed time (leases, resyncs). A time target
//! near the clusters' figure is out of reach on this machine unless Liqo asks less of them:
//! the two clusters share its CPUs, and the Liqo side runs each pod through both. Pure.

use super::{
    report::{OffloadReport, Phase, Side, time_target},
    setup::{MACHINE, MACHINE_WAIT},
};
use crate::report_core::Spread;

/// The CPU floor of one side (medians over its runs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Floor {
    /// CPU seconds of the clusters' own processes during a run.
    pub clusters_cpu_secs: f64,
    /// CPU seconds of Liqo's processes (controller-managers, virtual kubelet) during a run.
    pub liqo_cpu_secs: f64,
    /// CPU seconds of both during a run (the median of the runs' sums, not the sum of the
    /// medians).
    pub both_cpu_secs: f64,
    /// The machine's CPUs.
    pub cpus: usize,
}

impl Floor {
    /// The side's CPU over its runs in `phases`, on `cpus` CPUs; `None` without a run (or
    /// without the clusters' processes measured).
    pub fn of(phases: &[Phase], side: Side, cpus: usize) -> Option<Floor> {
        let sum = |p: &Phase, mine: fn(&str) -> bool| -> f64 {
            p.cpu
                .iter()
                .filter(|c| mine(&c.process))
                .map(|c| c.cpu_secs)
                .sum()
        };
        let runs: Vec<&Phase> = phases
            .iter()
            .filter(|p| p.side == side && p.cpu.iter().any(|c| cluster_process(&c.process)))
            .collect();
        let median = |mine: fn(&str) -> bool| {
            Spread::of(runs.iter().map(|p| sum(p, mine))).map(|s| s.median)
        };
        Some(Floor {
            clusters_cpu_secs: median(cluster_process)?,
            liqo_cpu_secs: median(liqo_process)?,
            both_cpu_secs: median(|n| cluster_process(n) || liqo_process(n))?,
            cpus: cpus.max(1),
        })
    }

    /// The least seconds a run takes with the clusters' processes alone (every CPU busy).
    pub fn clusters_secs(&self) -> f64 {
        self.clusters_cpu_secs / self.cpus as f64
    }

    /// The least seconds with Liqo's processes too.
    pub fn total_secs(&self) -> f64 {
        self.both_cpu_secs / self.cpus as f64
    }
}

/// The least time each side's run could take on this machine's CPUs, beside
/// the time target: a target below the clusters' floor is out of reach here.
pub fn lines(r: &OffloadReport) -> String {
    let cpus = r.header.machine.cpus;
    let mut out = String::new();
    for side in [Side::Vanilla, Side::Liqo] {
        let Some(f) = Floor::of(&r.phases, side, cpus) else {
            continue;
        };
        if out.is_empty() {
            out.push_str(&format!(
                "\nleast seconds a run could take on {cpus} CPU(s), from the CPU it used (medians):\n"
            ));
        }
        out.push_str(&format!(
            "  {}: the clusters' own processes {:.1} CPU s, {:.1} s; with Liqo's ({:.1} CPU s) {:.1} s\n",
            side.short(),
            f.clusters_cpu_secs,
            f.clusters_secs(),
            f.liqo_cpu_secs,
            f.total_secs()
        ));
    }
    if let (false, Some(v)) = (out.is_empty(), r.vanilla.secs) {
        out.push_str(&format!(
            "  the time target: {:.1} s\n",
            time_target(v.median)
        ));
    }
    out
}

/// A cluster's own process (`rome kube-apiserver`, `milan etcd`): a row that is neither the
/// machine's nor Liqo's.
fn cluster_process(name: &str) -> bool {
    name != MACHINE && name != MACHINE_WAIT && !liqo_process(name)
}

/// One of Liqo's processes.
fn liqo_process(name: &str) -> bool {
    name.starts_with("liqo-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload::report::{ProcCpu, tests::phase};

    fn cpu(process: &str, cpu_secs: f64) -> ProcCpu {
        ProcCpu {
            process: process.into(),
            cpu_secs,
        }
    }

    #[test]
    fn the_floor_is_the_clusters_cpu_over_the_machines_cpus() {
        let mut runs = Vec::new();
        for (repeat, clusters, liqo) in [(1, 1000.0, 100.0), (2, 1200.0, 140.0), (3, 1100.0, 120.0)]
        {
            let mut p = phase(Side::Liqo, repeat, 600.0);
            p.cpu = vec![
                cpu("rome kube-apiserver", clusters / 2.0),
                cpu("milan kube-apiserver", clusters / 2.0),
                cpu("liqo-controller-manager (milan)", liqo),
                cpu(MACHINE, 2000.0),
                cpu(MACHINE_WAIT, 300.0),
            ];
            runs.push(p);
        }
        let mut vanilla = phase(Side::Vanilla, 1, 500.0);
        vanilla.cpu = vec![cpu("milan etcd", 10.0)];
        runs.push(vanilla);
        let f = Floor::of(&runs, Side::Liqo, 2).unwrap();
        assert_eq!(f.clusters_cpu_secs, 1100.0);
        assert_eq!(f.liqo_cpu_secs, 120.0);
        assert_eq!(f.clusters_secs(), 550.0);
        assert_eq!(f.total_secs(), 610.0);
        // The median run's sum, not the sum of the medians.
        let mut odd = runs.clone();
        odd[0].cpu[2].cpu_secs = 500.0;
        let f = Floor::of(&odd, Side::Liqo, 2).unwrap();
        assert_eq!((f.liqo_cpu_secs, f.both_cpu_secs), (140.0, 1340.0));
        assert_eq!(
            Floor::of(&runs, Side::Vanilla, 2).unwrap().clusters_secs(),
            5.0
        );
    }

    #[test]
    fn the_lines_give_each_sides_floor_and_the_time_target() {
        use crate::offload::report::tests::{header, setup};
        let mut liqo = phase(Side::Liqo, 1, 600.0);
        liqo.cpu = vec![
            cpu("rome kube-apiserver", 500.0),
            cpu("milan kube-apiserver", 640.0),
            cpu("liqo-virtual-kubelet (rome -> milan)", 110.0),
            cpu(MACHINE, 1300.0),
        ];
        let mut vanilla = phase(Side::Vanilla, 1, 500.0);
        vanilla.cpu = vec![cpu("milan kube-apiserver", 700.0)];
        let mut h = header();
        h.machine.cpus = 2;
        let r = OffloadReport::new(h, setup(1000, 1), vec![vanilla, liqo], Vec::new());
        let text = lines(&r);
        assert!(text.contains("on 2 CPU(s)"), "{text}");
        assert!(
            text.contains("Liqo: the clusters' own processes 1140.0 CPU s, 570.0 s; with Liqo's (110.0 CPU s) 625.0 s"),
            "{text}"
        );
        assert!(
            text.contains("vanilla: the clusters' own processes 700.0 CPU s, 350.0 s"),
            "{text}"
        );
        assert!(text.contains("the time target: 552.0 s"), "{text}");
        // Without the clusters' processes measured: nothing.
        let bare = OffloadReport::new(
            header(),
            setup(1000, 1),
            vec![phase(Side::Liqo, 1, 1.0)],
            Vec::new(),
        );
        assert_eq!(lines(&bare), "");
    }

    #[test]
    fn no_floor_without_the_clusters_processes() {
        let mut p = phase(Side::Liqo, 1, 1.0);
        p.cpu = vec![cpu("liqo-controller-manager (rome)", 1.0)];
        assert_eq!(Floor::of(&[p], Side::Liqo, 2), None);
    }
}
