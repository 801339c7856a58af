//! Crashing and restarting one Liqo component of a cluster (for chaos tests):
//! [`kill9_component`] takes its command line and environment from `/proc` (the install's
//! `KUBECONFIG`, ports and flags) and sends SIGKILL; [`restart_component`] starts it again the
//! same way, waits until it serves and records the new process in `liqo.json`.

use std::time::{Duration, Instant};

use dataplane::supervisor::Spec;

use super::{
    components::{COMPONENTS, wait_ready},
    error::LiqoError,
    record::{self, Liqo, Running},
};
use crate::k8s::{self, Clusters, CommandLine};

/// How long a killed process may take to disappear.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// A component killed by [`kill9_component`], with what starts it again.
#[derive(Debug, Clone)]
pub struct Killed {
    /// Its cluster.
    pub cluster: String,
    /// What ran (the record of `liqo.json`).
    pub was: Running,
    command: CommandLine,
    program: &'static str,
}

/// Sends SIGKILL to component `program` of cluster `cluster` (as recorded in `liqo`) and
/// waits until it is gone.
pub fn kill9_component(liqo: &Liqo, cluster: &str, program: &str) -> Result<Killed, LiqoError> {
    let not_running = || LiqoError::NotRunning {
        program: program.to_owned(),
        cluster: cluster.to_owned(),
    };
    let comp = COMPONENTS
        .iter()
        .find(|c| c.program == program)
        .ok_or_else(|| LiqoError::Unknown {
            name: program.to_owned(),
            known: COMPONENTS
                .iter()
                .map(|c| c.program)
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let was = liqo
        .get(cluster)
        .and_then(|i| i.get(program))
        .cloned()
        .ok_or_else(not_running)?;
    let command = k8s::command_line(was.proc.pid)
        .filter(|_| dataplane::supervisor::is_ours(was.proc.pid, program))
        .ok_or_else(not_running)?;
    if !k8s::kill9(&was.proc, KILL_WAIT) {
        return Err(LiqoError::Stuck {
            program: comp.program,
            cluster: cluster.to_owned(),
            pid: was.proc.pid,
        });
    }
    Ok(Killed {
        cluster: cluster.to_owned(),
        was,
        command,
        program: comp.program,
    })
}

/// Starts `killed` again with its command line and environment, waits until it serves at the
/// same URL, and records it in `liqo` and in the set's `liqo.json`. Returns the new record and
/// how long the start took.
pub async fn restart_component(
    set: &Clusters,
    liqo: &mut Liqo,
    killed: Killed,
) -> Result<(Running, Duration), LiqoError> {
    let started = Instant::now();
    let mut spec = Spec::new(
        killed.program,
        &killed.command.program,
        &killed.was.proc.log,
    )
    .args(killed.command.args);
    for (k, v) in killed.command.env {
        spec = spec.env(k, v);
    }
    let proc = spec.detached().map_err(|source| LiqoError::Spawn {
        program: killed.program,
        cluster: killed.cluster.clone(),
        source,
    })?;
    wait_ready(killed.program, &killed.cluster, &proc, &killed.was.url).await?;
    let now = Running {
        program: killed.program.to_owned(),
        proc,
        url: killed.was.url,
        listen: killed.was.listen,
        metrics: killed.was.metrics,
    };
    let slot = liqo
        .clusters
        .iter_mut()
        .find(|i| i.cluster == killed.cluster)
        .and_then(|i| i.running.iter_mut().find(|r| r.program == killed.program))
        .ok_or_else(|| LiqoError::NotRunning {
            program: killed.program.to_owned(),
            cluster: killed.cluster.clone(),
        })?;
    *slot = now.clone();
    record::save(set, liqo)?;
    Ok((now, started.elapsed()))
}
