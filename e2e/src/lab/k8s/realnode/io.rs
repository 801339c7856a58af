//! The small I/O every real-node step shares: a node file written (0600 when it holds a key),
//! directories made, a node program started and put in the node's cgroup.

use std::path::Path;

use dataplane::supervisor::Spec;

use super::host;
use crate::lab::k8s::K8sLabError;

pub(super) fn write(path: &Path, text: &str, private: bool) -> Result<(), K8sLabError> {
    testkit::k8s::write_file(path, text, private)
        .map_err(|e| K8sLabError::lab("writing a node file", e))
}

pub(super) fn mkdirs(dirs: &[&Path]) -> Result<(), K8sLabError> {
    for d in dirs {
        std::fs::create_dir_all(d)
            .map_err(|e| K8sLabError::lab(format!("creating {}", d.display()), e))?;
    }
    Ok(())
}

/// Starts `spec` detached and moves it into the node's cgroup (before it starts anything).
pub(super) fn spawn_in(spec: Spec, cgroup: &str) -> Result<u32, K8sLabError> {
    let p = spec
        .detached()
        .map_err(|e| K8sLabError::lab("starting a node program", e))?;
    if let Err(e) = host::enter_cgroup(cgroup, p.pid) {
        // Outside the node's cgroup, teardown would not find it: stop it now.
        if let Err(k) = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p.pid as i32),
            nix::sys::signal::SIGKILL,
        ) {
            tracing::warn!(pid = p.pid, error = %k, "killing a node program left outside its cgroup");
        }
        return Err(K8sLabError::lab("the node's cgroup", e));
    }
    Ok(p.pid)
}
