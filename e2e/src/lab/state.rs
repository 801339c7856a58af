//! The lab's state file and teardown.
//!
//! The state file (`/run/liqo-lab/<prefix>.json`) records the plan a lab was built from, for
//! `status`, `exec` and `check`. Teardown does not need it: it removes every namespace whose name
//! carries the prefix, so it also cleans up after a crash in the middle of `up`.

use std::{fs, io, path::PathBuf};

use dataplane::Netns;

use super::{Lab, LabError, Prefix};
use crate::topology::Topology;

/// Where lab state files live.
pub(crate) const STATE_DIR: &str = "/run/liqo-lab";

fn path(prefix: &Prefix) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("{prefix}.json"))
}

/// Directory of a cluster's service files (configs, keys, state, logs).
pub(crate) fn cluster_dir(prefix: &Prefix, cluster: &str) -> PathBuf {
    PathBuf::from(STATE_DIR)
        .join(format!("{prefix}.d"))
        .join(cluster)
}

fn state_err(prefix: &Prefix) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync>) -> LabError {
    let path = path(prefix);
    move |source| LabError::State { path, source }
}

/// Records a lab that is up.
pub(crate) fn save(lab: &Lab) -> Result<(), LabError> {
    let err = state_err(&lab.prefix);
    fs::create_dir_all(STATE_DIR).map_err(|e| state_err(&lab.prefix)(e.into()))?;
    let json =
        serde_json::to_vec_pretty(&lab.topology).map_err(|e| state_err(&lab.prefix)(e.into()))?;
    let tmp = path(&lab.prefix).with_extension("json.tmp");
    fs::write(&tmp, json)
        .and_then(|()| fs::rename(&tmp, path(&lab.prefix)))
        .map_err(|e| err(e.into()))
}

/// Whether a state file exists for `prefix`.
pub(crate) fn exists(prefix: &Prefix) -> bool {
    path(prefix).exists()
}

/// The lab recorded for `prefix`.
pub(crate) fn load(prefix: &Prefix) -> Result<Lab, LabError> {
    let text = match fs::read(path(prefix)) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(LabError::NotUp(prefix.clone()));
        }
        Err(e) => return Err(state_err(prefix)(e.into())),
    };
    let topology: Topology =
        serde_json::from_slice(&text).map_err(|e| state_err(prefix)(e.into()))?;
    Ok(Lab {
        prefix: prefix.clone(),
        topology,
    })
}

/// The namespaces that belong to a lab with this prefix.
pub(crate) fn namespaces(prefix: &Prefix) -> Result<Vec<dataplane::NetnsName>, LabError> {
    Ok(Netns::list()?
        .into_iter()
        .filter(|n| prefix.owns(n))
        .collect())
}

/// What [`down`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownReport {
    /// Namespaces deleted.
    pub namespaces: usize,
    /// Processes killed inside them.
    pub processes: usize,
    /// Whether a state file was removed.
    pub state: bool,
}

/// Tears down the lab with this prefix: kills every process inside its namespaces, deletes the
/// namespaces (and with them every link, address, route and nft table inside) and the state
/// file. Works without a state file and after a partial `up`; doing it twice is harmless.
pub fn down(prefix: &Prefix) -> Result<DownReport, LabError> {
    let mut report = DownReport::default();
    for name in namespaces(prefix)? {
        let (killed, deleted) = Netns::purge(&name)?;
        report.processes += killed;
        report.namespaces += usize::from(deleted);
    }
    match fs::remove_file(path(prefix)) {
        Ok(()) => report.state = true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(state_err(prefix)(e.into())),
    }
    let dir = PathBuf::from(STATE_DIR).join(format!("{prefix}.d"));
    if let Err(e) = fs::remove_dir_all(&dir)
        && e.kind() != io::ErrorKind::NotFound
    {
        return Err(state_err(prefix)(e.into()));
    }
    Ok(report)
}
