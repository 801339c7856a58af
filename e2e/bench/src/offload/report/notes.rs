//! The report's notes: what its figures are and are not, from the run's setup and levels.

use super::{Level, QUIET_CPU_SECS, QUIET_SPAN, REST, SETTLE_MAX, Setup, VK};
use crate::report_core::Header;

/// What the figures are and are not.
pub(super) fn notes(h: &Header, s: &Setup, levels: &[Level]) -> Vec<String> {
    let mut out = vec![
        format!(
            "timed run: a Deployment of {} replicas (one container, requests cpu 1m and \
             memory 1Mi, so the capacity is bound by pods) is created; the clock starts just \
             before the create request and stops when a pod watch (opened before) shows all \
             of them Running. Vanilla: on milan, scheduled on its {} kwok node(s). Liqo: on \
             rome, in a namespace offloaded with `liqoctl offload namespace \
             --pod-offloading-strategy Remote`: rome's scheduler binds every pod to the \
             virtual node liqo-milan, the virtual kubelet writes a ShadowPod on milan, milan's \
             controller-manager creates the pod, milan's scheduler and kwok run it, and the \
             virtual kubelet copies its status back to the home pod, which is what is timed",
            s.pods, s.provider_nodes
        ),
        "both sides in the same run on the same clusters (one machine): pods are created by \
         each cluster's kube-controller-manager (ReplicaSet controller, client limit 20 qps / \
         burst 30 by default), so the same creation floor bounds both; between runs every \
         pod is deleted (grace 0) and the next run waits until milan has none of them left"
            .into(),
        "per-pod latencies are times at which the bench's own watch first saw each state \
         (first seen → Running; scheduled → Ready), not the conditions' timestamps: those \
         have one-second resolution, and a home pod's are copied from the remote pod"
            .into(),
        "Liqo, per pod: a second watch, on milan's remote namespace, runs on the same clock, \
         and each home pod is matched to its remote pod by name: home scheduled -> remote pod \
         first seen, remote first seen -> remote Running, remote Running -> home Running"
            .into(),
        "memory and CPU: VmRSS, its part mapped from files (RssFile: the program's code as \
         far as it has run, clean pages no allocator gives back) and VmHWM from \
         /proc/<pid>/status, CPU user+system from \
         /proc/<pid>/stat, of both liqo-controller-managers and rome's liqo-virtual-kubelet \
         (a child process of rome's controller-manager), sampled before the timed runs while \
         the offloaded Deployment is scaled 0 -> 100 -> all, each level once all its home \
         pods are Running (then it is deleted)"
            .into(),
        "CPU s during a timed run: also each cluster's own processes (etcd, kube-apiserver, \
         kube-controller-manager, kube-scheduler, kwok; each a Go program limited to one CPU, \
         GOMAXPROCS=1, so about one CPU second per second is its ceiling) and the machine's busy \
         time over all its CPUs (/proc/stat): a process near its ceiling bounds the run; \
         and the seconds during which some task waited for a CPU (/proc/pressure/cpu, the \
         kernel's CPU pressure): near the run's length, each pod's steps queued for a CPU \
         whichever process took them, and its latency is the machine's"
            .into(),
    ];
    if s.vanilla_only {
        out.push(
            "--vanilla-only: Liqo was not installed; only the vanilla side ran (the harness's \
             own floor), so no ratio, no target and no process is measured"
                .into(),
        );
    }
    if let Some(after) = levels.iter().find(|l| l.after_timed) {
        let rest = if after.quiet {
            format!(
                "once Liqo's processes were quiet (together under {QUIET_CPU_SECS} CPU s in {} \
                 s)",
                QUIET_SPAN.as_secs()
            )
        } else {
            format!(
                "with Liqo's processes NOT quiet after {} s (together {QUIET_CPU_SECS} CPU s \
                 or more in every {} s)",
                SETTLE_MAX.as_secs(),
                QUIET_SPAN.as_secs()
            )
        };
        out.push(format!(
            "the last row of each process (\"0 after timed\") was sampled after the timed \
             runs, once every pod was deleted, {rest}, then {} s more for their allocator's \
             forced collects: {:.0} s after the last run; its VmHWM is the peak over the \
             whole run, its CPU since previous the timed runs' (both sides)",
            REST.as_secs(),
            after.secs
        ));
    }
    if levels
        .iter()
        .any(|l| !l.processes.iter().any(|p| p.process == VK))
    {
        out.push(
            "no liqo-virtual-kubelet child process of rome's controller-manager was found at \
             some level (virtual kubelet in-process?): its rows are missing there"
                .into(),
        );
    }
    out.extend(h.debug_note());
    if s.repeats < 3 {
        out.push(format!(
            "{} timed run(s) per side: no median of 3 (use --repeats 3 for the spec's figure)",
            s.repeats
        ));
    }
    if h.load.max_pct > 15.0 {
        out.push(format!(
            "background CPU load reached {:.0}% at the start of a timed run (this counts the \
             bench's own clusters and anything else on the machine): figures may be high",
            h.load.max_pct
        ));
    }
    out.push(
        "upstream Liqo cannot run here (no container runtime); the seed's ballpark for it \
         (Go v0.5): < 0.5 CPU transient and < 200 MB RAM at 100 pods"
            .into(),
    );
    out
}
