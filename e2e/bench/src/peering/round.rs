//! One round of the peering bench: `liqoctl peer` and the conditions it brings on both
//! clusters, `liqoctl unpeer` and the conditions going back, the controller-managers' memory,
//! and the apiserver floor.

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use control::api::discovery::{
    ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T,
};
use kube::{Api, Client};

use super::{
    probe::{self, Watch},
    report::{Memory, Round},
};
use e2e::{k8s::Clusters, liqo};

use crate::{BenchError, measure, options::fail};

/// One side of the peering.
struct Side {
    name: String,
    client: Client,
    /// Its cluster ID (what the other side's ForeignCluster names).
    id: String,
    /// Its liqo-controller-manager.
    manager_pid: u32,
    /// The logs of its components (program, path): their ends explain a failed round.
    logs: Vec<(String, String)>,
}

/// What every round shares.
pub(super) struct Ctx {
    rome: Side,
    milan: Side,
    liqoctl: PathBuf,
    /// rome's own kubeconfig (one context), as an operator of rome has it.
    rome_kubeconfig: PathBuf,
    /// `liqoctl peer out-of-band milan ...` as milan generated it, without `liqoctl` (holds
    /// milan's token: never printed).
    peer_args: Vec<String>,
    timeout: Duration,
    hz: u64,
}

/// `fc` is the ForeignCluster of cluster `id` and its condition `t` is `s`.
fn has(id: &str, t: T, s: S) -> impl Fn(&ForeignCluster) -> bool + use<> {
    let id = id.to_owned();
    move |fc| {
        fc.spec.cluster_identity.cluster_id.as_str() == id
            && fc.status.as_ref().map(|st| st.condition(t)) == Some(s)
    }
}

impl Ctx {
    /// Finds both sides, prepares the floor and has milan generate the peer command.
    pub(super) async fn new(
        set: &Clusters,
        installed: &liqo::Liqo,
        timeout_secs: u64,
    ) -> Result<Ctx, BenchError> {
        let side = |name: &'static str| async move {
            let c = set
                .get(name)
                .ok_or_else(|| fail("the clusters", format!("no cluster {name}")))?;
            let i = installed
                .get(name)
                .ok_or_else(|| fail("the install", format!("no Liqo on {name}")))?;
            let manager = i.get("liqo-controller-manager").ok_or_else(|| {
                fail(
                    "the install",
                    format!("no liqo-controller-manager on {name}"),
                )
            })?;
            let client = c
                .client()
                .await
                .map_err(|e| BenchError::step(format!("a client of {name}"), &e))?;
            Ok::<_, BenchError>(Side {
                name: name.into(),
                client,
                id: i.cluster_id.clone(),
                manager_pid: manager.proc.pid,
                logs: i
                    .running
                    .iter()
                    .map(|r| (r.program.clone(), r.proc.log.clone()))
                    .collect(),
            })
        };
        let (rome, milan) = (side("rome").await?, side("milan").await?);
        probe::floor_namespace(&rome.client).await?;
        let liqoctl = installed.bin.join("liqoctl");
        let out = tokio::process::Command::new(&liqoctl)
            .args([
                "--context",
                "milan",
                "generate",
                "peer-command",
                "--only-command",
            ])
            .env("KUBECONFIG", &set.kubeconfig)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| BenchError::step(format!("running {}", liqoctl.display()), &e))?;
        if !out.status.success() {
            return Err(fail(
                format!("liqoctl generate peer-command on milan ({})", out.status),
                String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        if words.len() < 4 || words[..3] != ["liqoctl", "peer", "out-of-band"] {
            return Err(fail(
                "liqoctl generate peer-command on milan",
                format!(
                    "the output does not start with `liqoctl peer out-of-band` ({} words)",
                    words.len()
                ),
            ));
        }
        Ok(Ctx {
            rome_kubeconfig: set
                .get("rome")
                .map(|c| c.kubeconfig.clone())
                .unwrap_or_default(),
            rome,
            milan,
            liqoctl,
            peer_args: words[1..].to_vec(),
            timeout: Duration::from_secs(timeout_secs),
            hz: measure::clock_ticks(),
        })
    }

    /// The version rome's apiserver reports.
    pub(super) async fn kubernetes_version(&self) -> Result<String, BenchError> {
        self.rome
            .client
            .apiserver_version()
            .await
            .map(|v| v.git_version)
            .map_err(|e| BenchError::step("the apiserver's version", &e))
    }

    /// CPU seconds so far of each controller-manager, by cluster.
    pub(super) fn cpu_secs(&self) -> Result<Vec<(String, f64)>, BenchError> {
        [&self.rome, &self.milan]
            .iter()
            .map(|s| Ok((s.name.clone(), probe::cpu_secs(s.manager_pid, self.hz)?)))
            .collect()
    }

    /// The last lines of every component's log on both clusters (the logs go with the
    /// clusters, so a failure quotes them).
    pub(super) fn log_tails(&self) -> String {
        const LINES: usize = 8;
        let mut out = String::new();
        for s in [&self.rome, &self.milan] {
            for (program, path) in &s.logs {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(LINES)..];
                out.push_str(&format!("--- {program} of {} ({path}):\n", s.name));
                for l in tail {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }

    fn fcs(side: &Side) -> Api<ForeignCluster> {
        Api::all(side.client.clone())
    }

    /// Runs liqoctl on rome with `args`; the moment it exited successfully.
    async fn liqoctl(&self, what: &str, args: &[String]) -> Result<Instant, BenchError> {
        let child = tokio::process::Command::new(&self.liqoctl)
            .args(args)
            .env("KUBECONFIG", &self.rome_kubeconfig)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(self.timeout + Duration::from_secs(10), child)
            .await
            .map_err(|_| fail(what, "did not exit in time"))?
            .map_err(|e| BenchError::step(what, &e))?;
        let at = Instant::now();
        if !out.status.success() {
            return Err(fail(
                format!("{what} ({})", out.status),
                String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            ));
        }
        Ok(at)
    }

    /// One round; fails if a state is not reached within the timeout.
    pub(super) async fn round(
        &self,
        repeat: u32,
        background_load_pct: f64,
        floor_samples: u32,
    ) -> Result<Round, BenchError> {
        let (milan_id, rome_id) = (self.milan.id.as_str(), self.rome.id.as_str());
        let t = self.timeout;

        // Peer: every watch is open before the clock starts.
        let open = |side: &Side, what: &str| {
            Watch::open(Self::fcs(side), format!("{}'s {what}", side.name), None)
        };
        let mut auth = open(&self.rome, "ForeignClusters (authentication)").await?;
        let mut outgoing = open(&self.rome, "ForeignClusters (outgoing)").await?;
        let mut incoming = open(&self.milan, "ForeignClusters (incoming)").await?;
        let auth_kept =
            auth.listed()
                .iter()
                .any(has(milan_id, T::AuthenticationStatus, S::Established));
        let start = Instant::now();
        let (cmd, auth_at, out_at, in_at) = tokio::try_join!(
            self.liqoctl("liqoctl peer out-of-band milan on rome", &self.peer_args),
            async {
                if auth_kept {
                    return Ok(None);
                }
                let done = has(milan_id, T::AuthenticationStatus, S::Established);
                auth.until("rome's AuthenticationStatus=Established", t, done)
                    .await
                    .map(Some)
            },
            outgoing.until(
                "rome's OutgoingPeering=Established",
                t,
                has(milan_id, T::OutgoingPeering, S::Established)
            ),
            incoming.until(
                "milan's IncomingPeering=Established",
                t,
                has(rome_id, T::IncomingPeering, S::Established)
            ),
        )?;
        let secs = |at: Instant| at.duration_since(start).as_secs_f64();

        // Unpeer.
        let mut out_none = open(&self.rome, "ForeignClusters (outgoing)").await?;
        let mut in_none = open(&self.milan, "ForeignClusters (incoming)").await?;
        let unpeer_args: Vec<String> = ["unpeer", "out-of-band", "milan"]
            .map(String::from)
            .to_vec();
        let unpeer_start = Instant::now();
        let (unpeer_cmd, out_gone, in_gone) = tokio::try_join!(
            self.liqoctl("liqoctl unpeer out-of-band milan on rome", &unpeer_args),
            out_none.until(
                "rome's OutgoingPeering=None",
                t,
                has(milan_id, T::OutgoingPeering, S::None)
            ),
            in_none.until(
                "milan's IncomingPeering=None",
                t,
                has(rome_id, T::IncomingPeering, S::None)
            ),
        )?;
        let unpeer_secs = |at: Instant| at.duration_since(unpeer_start).as_secs_f64();

        let mut memory = Vec::new();
        for s in [&self.rome, &self.milan] {
            let (rss_kib, hwm_kib) = probe::memory_kib(s.manager_pid)?;
            memory.push(Memory {
                cluster: s.name.clone(),
                rss_kib,
                hwm_kib,
            });
        }
        let mut floor_ms = Vec::new();
        for k in 1..=floor_samples {
            floor_ms.push(probe::floor_sample(&self.rome.client, &format!("r{repeat}s{k}")).await?);
        }
        Ok(Round {
            repeat,
            background_load_pct,
            auth_secs: auth_at.map(secs),
            outgoing_secs: secs(out_at),
            incoming_secs: secs(in_at),
            peer_command_secs: secs(cmd),
            unpeer_secs: unpeer_secs(out_gone),
            unpeer_incoming_secs: unpeer_secs(in_gone),
            unpeer_command_secs: unpeer_secs(unpeer_cmd),
            floor_ms,
            memory,
        })
    }
}
