//! Getting the offload bench's clusters ready and reading Liqo's processes: rome peered with
//! milan by liqoctl's own commands, the namespace offloaded with `Remote`, the virtual node's
//! capacity, and the memory and CPU of both controller-managers and rome's virtual kubelet.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use control::api::offloading::{NAME, NamespaceOffloading};
use dataplane::procs::Process;
use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client};

use super::report::{ProcCpu, ProcUsage, VK, manager};
use crate::{BenchError, measure, options::fail, peering::probe};

/// The virtual node milan becomes on rome.
pub(crate) const VIRTUAL_NODE: &str = "liqo-milan";

/// Runs `liqoctl args` with `kubeconfig`; its stdout (never printed: a peer command holds a
/// token), or an error with its stderr.
async fn liqoctl(
    liqoctl: &Path,
    kubeconfig: &Path,
    args: &[String],
    what: &str,
    timeout: Duration,
) -> Result<String, BenchError> {
    let child = tokio::process::Command::new(liqoctl)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(timeout, child)
        .await
        .map_err(|_| fail(what, format!("did not exit within {} s", timeout.as_secs())))?
        .map_err(|e| BenchError::step(format!("{what}: running {}", liqoctl.display()), &e))?;
    if !out.status.success() {
        return Err(fail(
            format!("{what} ({})", out.status),
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What the setup needs of the clusters.
pub(crate) struct Setup<'a> {
    /// `liqoctl`.
    pub(crate) liqoctl: PathBuf,
    /// The set's kubeconfig (every context).
    pub(crate) kubeconfig: &'a Path,
    /// rome's own kubeconfig.
    pub(crate) rome_kubeconfig: &'a Path,
    /// Each step's limit.
    pub(crate) timeout: Duration,
}

impl Setup<'_> {
    /// `liqoctl generate peer-command` on milan, run on rome; returns once the command exited.
    pub(crate) async fn peer(&self) -> Result<(), BenchError> {
        let what = "liqoctl generate peer-command on milan";
        let args = [
            "--context",
            "milan",
            "generate",
            "peer-command",
            "--only-command",
        ]
        .map(String::from);
        let text = liqoctl(&self.liqoctl, self.kubeconfig, &args, what, self.timeout).await?;
        let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        if words.len() < 4 || words[..3] != ["liqoctl", "peer", "out-of-band"] {
            return Err(fail(
                what,
                format!(
                    "the output does not start with `liqoctl peer out-of-band` ({} words)",
                    words.len()
                ),
            ));
        }
        let what = "liqoctl peer out-of-band milan on rome";
        liqoctl(
            &self.liqoctl,
            self.rome_kubeconfig,
            &words[1..],
            what,
            self.timeout + Duration::from_secs(10),
        )
        .await
        .map(drop)
    }

    /// Creates namespace `ns` on rome and offloads it with `Remote` by liqoctl (which waits
    /// for the verdict); returns the name of its namespace on milan.
    pub(crate) async fn offload(&self, rome: &Client, ns: &str) -> Result<String, BenchError> {
        super::workload::create_namespace(rome, ns).await?;
        let secs = self.timeout.as_secs();
        let args = [
            "offload",
            "namespace",
            ns,
            "--pod-offloading-strategy",
            "Remote",
            "--timeout",
            &format!("{secs}s"),
        ]
        .map(String::from);
        let what = format!("liqoctl offload namespace {ns} on rome");
        liqoctl(
            &self.liqoctl,
            self.rome_kubeconfig,
            &args,
            &what,
            self.timeout + Duration::from_secs(10),
        )
        .await?;
        let o = Api::<NamespaceOffloading>::namespaced(rome.clone(), ns)
            .get(NAME)
            .await
            .map_err(|e| {
                BenchError::step(format!("reading the NamespaceOffloading of {ns}"), &e)
            })?;
        o.status
            .and_then(|s| s.remote_namespace_name)
            .ok_or_else(|| fail(&what, "the NamespaceOffloading names no remote namespace"))
    }
}

/// The virtual node's allocatable pods once it is Ready with at least `min`; fails after
/// `timeout` with what it had.
pub(crate) async fn virtual_node_pods(
    rome: &Client,
    min: u64,
    timeout: Duration,
) -> Result<u64, BenchError> {
    let api: Api<Node> = Api::all(rome.clone());
    let start = Instant::now();
    loop {
        let node = api
            .get_opt(VIRTUAL_NODE)
            .await
            .map_err(|e| BenchError::step(format!("reading node {VIRTUAL_NODE}"), &e))?;
        let state = node.as_ref().map(|n| {
            let st = n.status.clone().unwrap_or_default();
            let ready = st
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            let pods = st
                .allocatable
                .and_then(|a| a.get("pods").and_then(|q| q.0.parse::<u64>().ok()))
                .unwrap_or(0);
            (ready, pods)
        });
        if let Some((true, pods)) = state
            && pods >= min
        {
            return Ok(pods);
        }
        if start.elapsed() > timeout {
            let had = state.map_or_else(
                || "absent".to_owned(),
                |(ready, pods)| format!("Ready {ready}, {pods} allocatable pods"),
            );
            return Err(fail(
                format!("waiting for node {VIRTUAL_NODE} Ready with at least {min} pods"),
                format!(
                    "not within {} s ({had}); milan offers its free pods times the sharing \
                     percentage: add --provider-nodes or lower --pods",
                    timeout.as_secs()
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether `p` is the virtual kubelet of peer `cluster`.
pub(crate) fn is_vk(p: &Process, cluster: &str) -> bool {
    p.program() == "liqo-virtual-kubelet" && p.has_flag("--foreign-cluster-name", cluster)
}

/// Liqo's processes whose memory and CPU are measured.
pub(crate) struct Procs {
    /// rome's and milan's controller-managers.
    pub(crate) managers: [(String, u32); 2],
    hz: u64,
}

impl Procs {
    /// The controller-managers of rome and milan.
    pub(crate) fn new(rome: u32, milan: u32) -> Procs {
        Procs {
            managers: [(manager("rome"), rome), (manager("milan"), milan)],
            hz: measure::clock_ticks(),
        }
    }

    /// The pid of rome's virtual kubelet for milan (a child of rome's controller-manager).
    pub(crate) fn virtual_kubelet(&self) -> Option<u32> {
        let parent = self.managers[0].1;
        dataplane::procs::find(|p| p.parent() == Some(parent) && is_vk(p, "milan"))
            .ok()?
            .first()
            .map(|p| p.pid)
    }

    /// Every process now: (name, pid).
    fn all(&self) -> Vec<(String, u32)> {
        let mut out = self.managers.to_vec();
        if let Some(pid) = self.virtual_kubelet() {
            out.push((VK.to_owned(), pid));
        }
        out
    }

    /// Memory and CPU of every process (the virtual kubelet when found).
    pub(crate) fn usage(&self) -> Result<Vec<ProcUsage>, BenchError> {
        self.all()
            .into_iter()
            .map(|(process, pid)| {
                let (rss_kib, hwm_kib, file_kib) = probe::memory_and_file_kib(pid)?;
                Ok(ProcUsage {
                    process,
                    pid,
                    rss_kib,
                    hwm_kib,
                    file_kib,
                    cpu_secs: probe::cpu_secs(pid, self.hz)?,
                })
            })
            .collect()
    }

    /// CPU seconds so far of every process, by name.
    pub(crate) fn cpu(&self) -> Result<Vec<ProcCpu>, BenchError> {
        self.all()
            .into_iter()
            .map(|(process, pid)| {
                Ok(ProcCpu {
                    process,
                    cpu_secs: probe::cpu_secs(pid, self.hz)?,
                })
            })
            .collect()
    }
}

/// The row of the machine's CPU (every process on it) in the timed runs' CPU table.
pub(crate) const MACHINE: &str = "machine (all CPUs, busy)";

/// The row of the time during which some task waited for a CPU (the kernel's CPU pressure,
/// `/proc/pressure/cpu`): near the run's length, every step of every pod queued for a CPU.
pub(crate) const MACHINE_WAIT: &str = "machine (some task waiting for a CPU)";

/// CPU seconds so far of the clusters' own processes (`rome kube-apiserver`, `milan etcd`,
/// ...) and of the whole machine ([`MACHINE`]): whether a run was bound by a saturated API
/// server or by the machine shows there.
pub(crate) fn harness_cpu(set: &e2e::k8s::Clusters) -> Result<Vec<ProcCpu>, BenchError> {
    let hz = measure::clock_ticks();
    let mut out = Vec::new();
    for c in &set.clusters {
        for p in &c.procs {
            out.push(ProcCpu {
                process: format!("{} {}", c.name, p.name),
                cpu_secs: probe::cpu_secs(p.pid, hz)?,
            });
        }
    }
    let (busy, _) = measure::busy()?;
    out.push(ProcCpu {
        process: MACHINE.to_owned(),
        cpu_secs: busy as f64 / hz.max(1) as f64,
    });
    // Without pressure information (or unreadable): no row (its absence says so).
    if let Some(us) = measure::cpu_pressure_us() {
        out.push(ProcCpu {
            process: MACHINE_WAIT.to_owned(),
            cpu_secs: us as f64 / 1e6,
        });
    }
    Ok(out)
}

/// CPU spent between `before` and `after` by each process in both (a process that restarted
/// in between counts from its start).
pub(crate) fn cpu_delta(before: &[ProcCpu], after: &[ProcCpu]) -> Vec<ProcCpu> {
    after
        .iter()
        .map(|a| {
            let b = before
                .iter()
                .find(|b| b.process == a.process)
                .map_or(0.0, |b| b.cpu_secs);
            ProcCpu {
                process: a.process.clone(),
                cpu_secs: if a.cpu_secs >= b {
                    a.cpu_secs - b
                } else {
                    a.cpu_secs
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Process {
        Process {
            pid: 1,
            args: s.split_whitespace().map(str::to_owned).collect(),
        }
    }

    #[test]
    fn the_virtual_kubelet_of_milan_by_its_command_line() {
        let vk = "/x/debug/liqo-virtual-kubelet --foreign-cluster-id 1 --foreign-cluster-name milan --home-cluster-name rome";
        assert!(is_vk(&argv(vk), "milan"));
        assert!(!is_vk(&argv(vk), "turin"));
        assert!(is_vk(
            &argv("liqo-virtual-kubelet --foreign-cluster-name=milan"),
            "milan"
        ));
        assert!(!is_vk(
            &argv("/x/liqo-controller-manager --foreign-cluster-name milan"),
            "milan"
        ));
        assert!(!is_vk(
            &argv("liqo-virtual-kubelet --home-cluster-name milan"),
            "milan"
        ));
        assert!(!is_vk(&argv(""), "milan"));
    }

    #[test]
    fn cpu_over_a_span_per_process() {
        let c = |p: &str, s: f64| ProcCpu {
            process: p.into(),
            cpu_secs: s,
        };
        let d = cpu_delta(
            &[c("a", 1.0), c("b", 5.0)],
            &[c("a", 3.5), c("b", 2.0), c("v", 1.0)],
        );
        assert_eq!(d, vec![c("a", 2.5), c("b", 2.0), c("v", 1.0)]);
    }
}
