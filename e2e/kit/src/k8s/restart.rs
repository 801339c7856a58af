//! Restarting the kube-apiserver of a running cluster in place (for chaos tests): stopped
//! (SIGTERM, SIGKILL after a grace period) and started again with the command line and
//! environment it ran with, so the same port, certificates and etcd data; then waited on until
//! `/readyz` answers. The set's state file records the new pid.

use std::time::{Duration, Instant};

use dataplane::supervisor::Spec;

use super::{
    Cluster, Clusters, K8sError,
    cluster::{readyz, wait},
    procs::{self, Proc},
};

/// The program restarted.
const APISERVER: &str = "kube-apiserver";
/// How long the old process gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(10);
/// How long the new one may take to serve.
const READY_SECS: u64 = 60;

/// What a restart did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restarted {
    /// The process stopped.
    pub old: Proc,
    /// The process started.
    pub new: Proc,
    /// From the stop to the first `/readyz` answer.
    pub unavailable: Duration,
}

impl Cluster {
    /// Stops the kube-apiserver and starts it again the same way, waiting until it serves.
    pub async fn restart_apiserver(&mut self) -> Result<Restarted, K8sError> {
        let at = self
            .procs
            .iter()
            .position(|p| p.name == APISERVER && procs::alive(p.pid))
            .ok_or_else(|| K8sError::NotRunning(format!("{APISERVER} of {}", self.name)))?;
        let old = self.procs[at].clone();
        let cmd = procs::command_line(old.pid)
            .ok_or_else(|| K8sError::NotRunning(format!("{APISERVER} of {}", self.name)))?;
        let started = Instant::now();
        if procs::stop(std::slice::from_ref(&old), GRACE) > 0 {
            tracing::warn!(pid = old.pid, "the kube-apiserver needed SIGKILL");
        }
        let mut spec = Spec::new(APISERVER, &cmd.program, &old.log).args(cmd.args);
        for (k, v) in cmd.env {
            spec = spec.env(k, v);
        }
        let new = spec.detached()?;
        self.procs[at] = new.clone();
        let kc = self.client().await?;
        wait(&new, READY_SECS, || readyz(kc.clone())).await?;
        Ok(Restarted {
            old,
            new,
            unavailable: started.elapsed(),
        })
    }
}

impl Clusters {
    /// [`Cluster::restart_apiserver`] of cluster `name`, recorded in the set's state file.
    pub async fn restart_apiserver(&mut self, name: &str) -> Result<Restarted, K8sError> {
        let c = self
            .clusters
            .iter_mut()
            .find(|c| c.name == name)
            .ok_or_else(|| K8sError::Options(format!("no cluster {name} in {}", self.prefix)))?;
        let r = c.restart_apiserver().await?;
        self.save()?;
        Ok(r)
    }
}
