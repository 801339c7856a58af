//! What a kubelet does for a crashed pod, for the processes the lab runs in its node
//! namespaces (the gateway, the operators, the overlay agents): `kill -9` one, and start it
//! again with the same command line and environment in the same namespace.

use std::time::Duration;

use dataplane::{
    Netns,
    supervisor::{self, Proc, Spec},
};

use super::K8sLabError;
use crate::{
    k8s::{self, CommandLine},
    lab::Lab,
};

/// How long a killed process may take to go.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// A process killed by [`kill9`], with what starts it again.
#[derive(Debug, Clone)]
pub struct Killed {
    /// The namespace it ran in.
    pub node: dataplane::NetnsName,
    /// What ran.
    pub was: Proc,
    command: CommandLine,
}

/// The process running `program` in node `node` of `cluster`.
pub fn find(lab: &Lab, cluster: &str, node: &str, program: &str) -> Result<Proc, K8sLabError> {
    let name = lab.node_netns(cluster, node);
    let ns = Netns::open(&name).map_err(|e| K8sLabError::lab(format!("opening {name}"), e))?;
    let pids = ns
        .pids()
        .map_err(|e| K8sLabError::lab(format!("listing the processes of {name}"), e))?;
    pids.into_iter()
        .find(|p| supervisor::is_ours(*p, program) && supervisor::alive(*p))
        .map(|pid| Proc {
            name: program.to_owned(),
            pid,
            log: String::new(),
        })
        .ok_or_else(|| K8sLabError::lab(format!("{program} in {name}"), "not running"))
}

/// Sends SIGKILL to `program` in `node` of `cluster` and waits until it is gone.
pub fn kill9(lab: &Lab, cluster: &str, node: &str, program: &str) -> Result<Killed, K8sLabError> {
    let was = find(lab, cluster, node, program)?;
    let command = k8s::command_line(was.pid)
        .ok_or_else(|| K8sLabError::lab(format!("{program} in {cluster}/{node}"), "exited"))?;
    if !k8s::kill9(&was, KILL_WAIT) {
        return Err(K8sLabError::lab(
            format!("{program} (pid {}) in {cluster}/{node}", was.pid),
            "survived SIGKILL",
        ));
    }
    Ok(Killed {
        node: lab.node_netns(cluster, node),
        was,
        command,
    })
}

/// Starts `killed` again (same program, arguments, environment and namespace), its output
/// appended to `log`.
pub fn restart(killed: &Killed, log: &std::path::Path) -> Result<Proc, K8sLabError> {
    let ns = Netns::open(&killed.node)
        .map_err(|e| K8sLabError::lab(format!("opening {}", killed.node), e))?;
    let mut spec = Spec::new(&killed.was.name, &killed.command.program, log)
        .args(killed.command.args.iter().cloned())
        .netns(&ns);
    for (k, v) in &killed.command.env {
        spec = spec.env(k, v);
    }
    spec.detached().map_err(|e| {
        K8sLabError::lab(
            format!("restarting {} in {}", killed.was.name, killed.node),
            e,
        )
    })
}
