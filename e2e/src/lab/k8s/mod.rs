//! The lab with real control planes (`liqo-lab up --k8s`): every lab cluster gets a harness
//! cluster ([`crate::k8s`]) of its name and pod CIDR whose Node objects are the lab's nodes
//! (InternalIP = the node's LAN address, `spec.podCIDR` = its slice, kept Ready by kwok), Liqo
//! installed by [`crate::liqo`] (its IPAM is the cluster's only one), the gateway's Service (a
//! LoadBalancer whose ingress is the cluster's public address), and per node a relay to the API
//! server and the IPAM ([`relay`]), the route operator and the overlay agent, plus the gateway
//! operator and the gateway on the gateway node ([`fabric`]). The operators render the daemons'
//! files from the Kubernetes objects; the lab writes no peer list. `check` reads the peer
//! views from the TunnelEndpoints ([`views`]).
//!
//! Brought up with [`up_in_band`], the clusters can only be peered in-band ([`inband`]); the
//! marker records it.
//!
//! Teardown ([`down`]) needs no state: the marker file says the lab has clusters, the harness
//! finds its processes by directory, the relays (also those started by hand with
//! `liqo-lab --prefix <p> relay --tag <lab dir>/...`) are found by the lab directory in their
//! `--tag`, and everything in a node is killed with its namespace.

pub mod fabric;
pub mod inband;
mod moving;
pub mod nodes;
mod peer;
pub mod relay;
pub mod restart;
pub mod rotate;
pub mod views;

pub use moving::move_gateway;

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use super::{Lab, LabError, Prefix, error::STATE_DIR};
use crate::{
    k8s::{self, Binaries, Clusters, K8sError, Named},
    liqo::{self, LiqoError},
    topology::Topology,
};

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum K8sLabError {
    /// The lab's namespaces or daemons.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// The harness.
    #[error(transparent)]
    K8s(#[from] K8sError),
    /// The Liqo install.
    #[error(transparent)]
    Liqo(#[from] LiqoError),
    /// A Kubernetes API call.
    #[error("{what}")]
    Kube {
        /// The call.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Anything else, with what was being done.
    #[error("{what}")]
    Other {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl K8sLabError {
    pub(crate) fn lab(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> K8sLabError {
        K8sLabError::Other {
            what: what.into(),
            source: source.into(),
        }
    }

    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> K8sLabError {
        let what = what.into();
        move |source| K8sLabError::Kube { what, source }
    }
}

/// How to bring a lab up with control planes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Start the gateway and route operators (which then render the daemons' files); without
    /// them the daemons run their base files (no peers).
    pub operators: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { operators: true }
    }
}

/// The marker that says lab `prefix` has control planes (written before they start).
fn marker(prefix: &Prefix) -> PathBuf {
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

/// Builds the lab `topology` under `prefix` with a control plane per cluster (see the module
/// doc). On failure everything is torn down before the error is returned.
pub async fn up(prefix: Prefix, topology: Topology, opts: &Options) -> Result<K8sLab, K8sLabError> {
    up_mode(prefix, topology, opts, false).await
}

/// As [`up`] with the operators, then makes every cluster reachable only in-band
/// ([`inband::setup`]): `liqo-lab up --k8s --in-band`.
pub async fn up_in_band(prefix: Prefix, topology: Topology) -> Result<K8sLab, K8sLabError> {
    up_mode(prefix, topology, &Options::default(), true).await
}

async fn up_mode(
    prefix: Prefix,
    topology: Topology,
    opts: &Options,
    in_band: bool,
) -> Result<K8sLab, K8sLabError> {
    // The binaries first: nothing is created if one is missing.
    let bins = k8s::binaries()?;
    if in_band {
        for program in ["liqo-proxy", "liqo-controller-manager"] {
            crate::lab::bin(program)
                .map_err(|e| K8sLabError::lab(format!("lab {prefix} in-band"), e))?;
        }
    }
    // Clusters of `liqo-lab k8s up` with this prefix are not ours to take (nor to tear down
    // if this fails).
    let harness = Path::new(k8s::ROOT).join(prefix.as_str());
    if harness.exists() && !is_k8s(&prefix) {
        return Err(K8sLabError::lab(
            format!("lab {prefix} with control planes"),
            format!(
                "clusters {prefix} exist already ({}); use another --prefix or run \
                 `liqo-lab --prefix {prefix} k8s down` first",
                harness.display()
            ),
        ));
    }
    let lab = super::build::up_with(prefix.clone(), topology, false).await?;
    let up = async {
        let (set, liqo) = bring_up(&lab, &bins, opts, in_band).await?;
        let mut k = K8sLab { lab, set, liqo };
        if in_band {
            inband::setup(&mut k).await?;
        }
        Ok::<_, K8sLabError>(k)
    };
    match up.await {
        Ok(k) => Ok(k),
        Err(e) => {
            if let Err(d) = down(&prefix) {
                tracing::error!(error = %liqo_types::chain(&d), "tearing down after a failed up");
            }
            Err(e)
        }
    }
}

async fn bring_up(
    lab: &Lab,
    bins: &Binaries,
    opts: &Options,
    in_band: bool,
) -> Result<(Clusters, liqo::Liqo), K8sLabError> {
    let path = marker(&lab.prefix);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)
            .map_err(|e| K8sLabError::lab(format!("creating {}", dir.display()), e))?;
    }
    let text = serde_json::json!({
        "harness": lab.prefix.as_str(), "operators": opts.operators, "inBand": in_band,
    });
    super::state::write_atomic(&path, &text.to_string())?;
    let named: Vec<Named> = lab
        .topology
        .clusters
        .iter()
        .map(|c| Named {
            name: c.name.to_string(),
            pod_cidr: c.pod_cidr,
            service_cidr: c.service_cidr,
            nodes: 0,
        })
        .collect();
    let mut set = Clusters::up_named(bins, &lab.prefix, &named).await?;
    for (c, kc) in lab.topology.clusters.iter().zip(&mut set.clusters) {
        nodes::create(&kc.client().await?, c).await?;
        kc.nodes = c.nodes.iter().map(|n| n.name.to_string()).collect();
    }
    set.save()?;
    let reserved: BTreeMap<String, Vec<ipnet::Ipv4Net>> = lab
        .topology
        .clusters
        .iter()
        .map(|c| (c.name.to_string(), c.reserved_subnets.clone()))
        .collect();
    let installed = liqo::install(
        &set,
        bins,
        &liqo::Options {
            reserved_subnets: reserved,
            network: true,
            ..liqo::Options::default()
        },
    )
    .await?;
    for c in &lab.topology.clusters {
        let kc = set.get(c.name.as_str()).expect("one per lab cluster");
        let i = installed.get(c.name.as_str()).expect("installed on each");
        fabric::start(lab, c, kc, i, opts).await?;
    }
    set.detach();
    Ok((k8s::load(&lab.prefix)?, installed))
}

/// How long a relay gets between SIGTERM and SIGKILL.
const RELAY_GRACE: Duration = Duration::from_secs(2);

/// What [`down`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Down {
    /// The lab's namespaces and their processes.
    pub lab: super::DownReport,
    /// The harness's processes (0 without control planes).
    pub k8s: usize,
    /// The relays.
    pub relays: usize,
}

/// Tears down lab `prefix` with its control planes, relays and every process (also after a
/// crash; a lab without control planes is torn down as [`super::down`] does).
pub fn down(prefix: &Prefix) -> Result<Down, K8sLabError> {
    let k8s_mode = is_k8s(prefix);
    let dir = Path::new(STATE_DIR).join(format!("{prefix}.d"));
    let relays = relays_of(&dir);
    let stopped = crate::k8s::stop_procs(&relays, RELAY_GRACE);
    if stopped > 0 {
        tracing::warn!(stopped, "relays needed SIGKILL");
    }
    let lab = super::down(prefix)?;
    let k8s = if k8s_mode {
        k8s::down(prefix)?.stopped
    } else {
        0
    };
    Ok(Down {
        lab,
        k8s,
        relays: relays.len(),
    })
}

/// Whether `args` (a command line, the program first) is a `liqo-lab relay` whose `--tag`
/// is under `needle` (whatever global flags, such as `--prefix`, come before `relay`).
fn is_relay_of(args: &[String], needle: &str) -> bool {
    let tagged = args
        .windows(2)
        .any(|w| w[0] == "--tag" && w[1].starts_with(needle))
        || args.iter().any(|a| {
            a.strip_prefix("--tag=")
                .is_some_and(|t| t.starts_with(needle))
        });
    let program = args
        .first()
        .and_then(|p| Path::new(p).file_name())
        .is_some_and(|n| n == "liqo-lab");
    program && tagged && args.iter().skip(1).any(|a| a == "relay")
}

/// The relay processes of the lab whose directory is `dir` (by their command line).
fn relays_of(dir: &Path) -> Vec<dataplane::supervisor::Proc> {
    let needle = format!("{}/", dir.display());
    // An unreadable /proc lists no relay: `down` then finds none to stop, as before.
    dataplane::procs::find(|p| is_relay_of(&p.args, &needle))
        .unwrap_or_default()
        .into_iter()
        .map(|p| dataplane::supervisor::Proc {
            name: "liqo-lab".into(),
            pid: p.pid,
            log: String::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn relays_are_found_by_their_tag_whatever_flags_come_first() {
        let n = "/run/liqo-lab/ib1.d/";
        for yes in [
            "/x/liqo-lab relay --netns ib1-rome-n0 --tag /run/liqo-lab/ib1.d/rome/relay-n0",
            "/x/liqo-lab --prefix ib1 relay --netns a --forward 1=2 --tag /run/liqo-lab/ib1.d/t",
            "liqo-lab relay --tag=/run/liqo-lab/ib1.d/t --netns a",
        ] {
            assert!(is_relay_of(&args(yes), n), "{yes}");
        }
        for no in [
            // Another lab's, one without a tag, another program, not a relay.
            "/x/liqo-lab relay --netns a --tag /run/liqo-lab/ib10.d/t",
            "/x/liqo-lab --prefix ib1 relay --netns a /run/liqo-lab/ib1.d/t",
            "/usr/bin/tail --tag /run/liqo-lab/ib1.d/t relay",
            "/x/liqo-lab --prefix ib1 down --tag /run/liqo-lab/ib1.d/t",
        ] {
            assert!(!is_relay_of(&args(no), n), "{no}");
        }
    }
}
