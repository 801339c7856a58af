//! The overlay agents of the lab: one `liqo-overlay run` per node (as a DaemonSet would run
//! them), each with its own config file. The lab writes the desired state (the cluster's nodes,
//! where the gateway runs, the remote clusters' ranges) and waits until every agent reports it
//! applied.

use std::{collections::BTreeSet, fs, net::SocketAddr, path::PathBuf};

use dataplane::Netns;
use ipnet::Ipv4Net;

use super::{
    Lab, LabError, placement,
    services::{self, bin},
    state,
};
use crate::topology::Cluster;

/// Where each agent serves `/status` (inside its node's namespace).
const STATUS: &str = "127.0.0.1:9108";

fn status_addr() -> SocketAddr {
    STATUS.parse().expect("literal")
}

/// The config file of the agent on `node`.
pub(crate) fn config_path(lab: &Lab, cluster: &str, node: &str) -> PathBuf {
    state::cluster_dir(&lab.prefix, cluster).join(format!("overlay-{node}.yaml"))
}

/// The agent config of `node`, with the gateway on `gateway` and `remote` routed through it.
pub fn desired(
    c: &Cluster,
    node: &str,
    gateway: &str,
    remote: &[Ipv4Net],
) -> overlay::config::File {
    overlay::config::File {
        node: node.to_owned(),
        gateway: gateway.to_owned(),
        nodes: c
            .nodes
            .iter()
            .map(|n| overlay::config::NodeFile {
                name: n.name.to_string(),
                address: n.lan_addr.addr(),
                pod_cidr: liqo_types::Cidr::new(n.pod_slice).expect("validated topology"),
            })
            .collect(),
        remote_cidrs: remote
            .iter()
            .map(|r| liqo_types::Cidr::new(*r).expect("from the IPAM"))
            .collect(),
        underlay_interface: Some("eth0".into()),
        ..Default::default()
    }
}

/// The remote ranges of `c`: every peer's pods and external CIDR as `c` sees them (from its
/// gateway's configuration), sorted.
pub fn remote_cidrs(lab: &Lab, c: &Cluster) -> Result<Vec<Ipv4Net>, LabError> {
    let file = services::read_gateway_config(lab, c.name.as_str())?;
    let mut out = BTreeSet::new();
    for p in &file.peers {
        for s in std::iter::once(&p.remote_pod_cidr).chain(p.remote_external_cidr.as_ref()) {
            out.insert(s.net());
        }
    }
    Ok(out.into_iter().collect())
}

/// Writes every agent's config of `c` (atomically; the agents reload them).
fn write_all(lab: &Lab, c: &Cluster, gateway: &str, remote: &[Ipv4Net]) -> Result<(), LabError> {
    for n in &c.nodes {
        let file = desired(c, n.name.as_str(), gateway, remote);
        let text = serde_saphyr::to_string(&file).map_err(|e| LabError::Build {
            what: "encoding an overlay config".into(),
            source: Box::new(e),
        })?;
        services::write_atomic(&config_path(lab, c.name.as_str(), n.name.as_str()), &text)?;
    }
    Ok(())
}

/// Writes the configs of `c` and starts an agent on every node; waits until all report them.
pub(crate) fn start(lab: &Lab, c: &Cluster) -> Result<(), LabError> {
    let gateway = placement::gateway_node(lab, c)?;
    write_all(lab, c, &gateway, &[])?;
    let agent = bin("liqo-overlay")?;
    let dir = state::cluster_dir(&lab.prefix, c.name.as_str());
    for n in &c.nodes {
        let ns = lab.netns(&format!("{}/{}", c.name, n.name).parse()?)?;
        let cfg = config_path(lab, c.name.as_str(), n.name.as_str());
        services::spawn_detached(
            &ns,
            &agent,
            &[
                "run".into(),
                "--config".into(),
                cfg.display().to_string(),
                "--status-listen".into(),
                STATUS.into(),
            ],
            &dir.join(format!("overlay-{}.log", n.name)),
        )?;
    }
    wait(lab, c, &gateway, &[])
}

/// Brings every agent of `c` to the current gateway node and remote ranges, and waits.
pub(crate) fn sync(lab: &Lab, c: &Cluster) -> Result<(), LabError> {
    let gateway = placement::gateway_node(lab, c)?;
    let remote = remote_cidrs(lab, c)?;
    write_all(lab, c, &gateway, &remote)?;
    wait(lab, c, &gateway, &remote)
}

/// Points every agent of `c` at `gateway` without waiting (the gateway move's first step).
pub(crate) fn point_at(lab: &Lab, c: &Cluster, gateway: &str) -> Result<(), LabError> {
    write_all(lab, c, gateway, &remote_cidrs(lab, c)?)
}

/// What the agent in `ns` reports.
pub fn status(ns: &Netns) -> Result<overlay::status::Status, LabError> {
    let body = ns
        .run(|| dataplane::localhttp::get(status_addr(), "/status"))?
        .map_err(|e| LabError::Build {
            what: format!("asking the overlay agent in {}", ns.name()),
            source: Box::new(e),
        })?;
    serde_json::from_str(&body).map_err(|e| LabError::Build {
        what: "decoding the overlay status".into(),
        source: Box::new(e),
    })
}

/// Waits (up to 20 s) until every agent of `c` applied `gateway` and `remote`; the last refusal
/// or kernel error an agent reports is the error returned on timeout.
pub(crate) fn wait(
    lab: &Lab,
    c: &Cluster,
    gateway: &str,
    remote: &[Ipv4Net],
) -> Result<(), LabError> {
    let want: Vec<String> = remote.iter().map(ToString::to_string).collect();
    for n in &c.nodes {
        let ns = lab.netns(&format!("{}/{}", c.name, n.name).parse()?)?;
        let log = state::cluster_dir(&lab.prefix, c.name.as_str())
            .join(format!("overlay-{}.log", n.name));
        services::wait_for(
            20,
            &format!("the overlay agent on {}/{}", c.name, n.name),
            || {
                let s = status(&ns)?;
                if let Some(e) = s.config_error.as_ref().or(s.apply_error.as_ref()) {
                    return Err(LabError::Build {
                        what: format!(
                            "the overlay agent on {}/{} (see {})",
                            c.name,
                            n.name,
                            log.display()
                        ),
                        source: e.clone().into(),
                    });
                }
                if s.gateway == gateway && s.remote_cidrs == want {
                    Ok(())
                } else {
                    Err(LabError::Build {
                        what: format!("the overlay agent on {}/{}", c.name, n.name),
                        source: format!(
                            "still on gateway {} with {:?} (want {gateway} with {want:?})",
                            s.gateway, s.remote_cidrs
                        )
                        .into(),
                    })
                }
            },
        )?;
    }
    Ok(())
}

/// Reads the agent config of `node` back (for `status`).
pub fn read_config(lab: &Lab, cluster: &str, node: &str) -> Option<overlay::config::File> {
    let text = fs::read_to_string(config_path(lab, cluster, node)).ok()?;
    overlay::config::File::parse(&text).ok()
}
