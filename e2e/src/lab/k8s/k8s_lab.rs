//! [`K8sLab`]: a lab that is up with control planes, how it is brought up ([`Options`]), and
//! the marker that says so ([`is_k8s`], [`is_in_band`]).

use std::{
    fs,
    path::{Path, PathBuf},
};

use super::error::K8sLabError;
use crate::{
    k8s::{self, Clusters},
    lab::{Lab, Prefix, error::STATE_DIR},
    liqo,
};

/// How to bring a lab up with control planes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Start the gateway and route operators (which then render the daemons' files); without
    /// them the daemons run their base files (no peers).
    pub operators: bool,
    /// Real nodes ([`super::realnode`]): a kubelet, containerd and kube-proxy in every lab
    /// node instead of kwok.
    pub real_nodes: bool,
    /// Liqo from its chart (`liqoctl install`): every component a pod on the real nodes
    /// ([`super::chart`]); needs `real_nodes`.
    pub chart: bool,
    /// With `chart`: replicas of the gateway (1, or 2 active/standby, the lab's load balancer
    /// then following the active one: [`super::lb::balance`]).
    pub gateway_replicas: u8,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            operators: true,
            real_nodes: false,
            chart: false,
            gateway_replicas: 1,
        }
    }
}

/// The marker that says lab `prefix` has control planes (written before they start).
pub(super) fn marker(prefix: &Prefix) -> PathBuf {
    Path::new(STATE_DIR)
        .join(format!("{prefix}.d"))
        .join("k8s.json")
}

/// Whether lab `prefix` runs with control planes.
pub fn is_k8s(prefix: &Prefix) -> bool {
    marker(prefix).is_file()
}

/// Whether lab `prefix` was brought up in-band (`up --k8s --in-band`).
pub fn is_in_band(prefix: &Prefix) -> bool {
    fs::read(marker(prefix))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|v| v["inBand"] == true)
}

/// Whether lab `prefix` runs Liqo from its chart (`up --k8s --real-nodes --chart`).
pub fn is_chart(prefix: &Prefix) -> bool {
    fs::read(marker(prefix))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|v| v["chart"] == true)
}

/// A lab that is up with control planes.
pub struct K8sLab {
    /// The lab.
    pub lab: Lab,
    /// Its clusters (detached: they outlive this value).
    pub set: Clusters,
    /// Liqo on them.
    pub liqo: liqo::Liqo,
}

impl K8sLab {
    /// The lab `prefix` brought up by [`up`] (in this or another process).
    pub fn load(prefix: &Prefix) -> Result<K8sLab, K8sLabError> {
        let lab = Lab::load(prefix)?;
        if !is_k8s(prefix) {
            return Err(K8sLabError::lab(
                format!("lab {prefix}"),
                "it has no control planes (it was brought up without --k8s)",
            ));
        }
        let set = k8s::load(prefix)?;
        let liqo = liqo::load(&set)?.ok_or_else(|| {
            K8sLabError::lab(format!("lab {prefix}"), "Liqo is not installed on it")
        })?;
        Ok(K8sLab { lab, set, liqo })
    }

    /// The cluster name of a cluster ID, if it is one of the lab's.
    pub fn name_of(&self, cluster_id: &str) -> Option<&str> {
        self.liqo
            .clusters
            .iter()
            .find(|i| i.cluster_id == cluster_id)
            .map(|i| i.cluster.as_str())
    }
}
