//! `peer` / `unpeer`: what the control plane will do later, done by the lab. For two clusters it
//! runs the network parameter exchange between their IPAM services (pod and external CIDRs,
//! remapped views, how each sees the other) and configures both gateways (public keys,
//! endpoints, views). The gateways reload their configuration and handshake.

use std::net::Ipv4Addr;

use dataplane::Netns;
use ipnet::Ipv4Net;
use serde::Deserialize;

use super::{
    Lab, LabError, overlay, placement,
    services::{self, GATEWAY_PORT, IPAM_SERVER, bin, run_in},
};
use crate::topology::Cluster;

/// How one cluster sees a peer, and how the peer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// The peer's pods, as they appear here.
    pub remote_pods: Ipv4Net,
    /// The peer's external CIDR, as it appears here.
    pub remote_external: Ipv4Net,
    /// Our pods, as the peer sees them.
    pub local_pods_at_peer: Ipv4Net,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IpamPeer {
    cluster_id: String,
    pod_view: String,
    external_view: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IpamList {
    #[serde(rename = "externalCIDR")]
    external_cidr: String,
    peers: Vec<IpamPeer>,
}

fn bad(what: String, why: impl Into<String>) -> LabError {
    LabError::Build {
        what,
        source: why.into().into(),
    }
}

pub(crate) fn cluster<'a>(lab: &'a Lab, name: &str) -> Result<&'a Cluster, LabError> {
    lab.topology.cluster(name).ok_or_else(|| {
        let known: Vec<String> = lab
            .topology
            .clusters
            .iter()
            .map(|c| c.name.to_string())
            .collect();
        LabError::BadTarget {
            target: name.into(),
            why: format!("no such cluster; clusters: {}", known.join(", ")),
        }
    })
}

fn ipam(node: &Netns, args: &[&str]) -> Result<String, LabError> {
    let mut all = args.to_vec();
    all.extend(["--server", IPAM_SERVER]);
    run_in(node, &bin("liqo-ipam")?, &all)
}

fn list(node: &Netns) -> Result<IpamList, LabError> {
    let json = ipam(node, &["list", "-o", "json"])?;
    serde_json::from_str(&json).map_err(|e| bad("decoding liqo-ipam list".into(), e.to_string()))
}

fn public_key(lab: &Lab, c: &Cluster) -> Result<String, LabError> {
    let key = super::state::cluster_dir(&lab.prefix, c.name.as_str()).join("private.key");
    let out = std::process::Command::new(bin("liqo-gateway")?)
        .args(["pubkey", "--private-key-file"])
        .arg(key)
        .output()
        .map_err(|e| bad("liqo-gateway pubkey".into(), e.to_string()))?;
    if !out.status.success() {
        return Err(bad(
            format!("reading {}'s public key", c.name),
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn net(s: &str) -> Result<Ipv4Net, LabError> {
    s.parse().map_err(|_| {
        bad(
            "reading an IPAM answer".into(),
            format!("{s:?} is not a CIDR"),
        )
    })
}

/// Peers clusters `a` and `b` (idempotent).
pub fn peer(lab: &Lab, a: &str, b: &str) -> Result<(View, View), LabError> {
    let (ca, cb) = (cluster(lab, a)?, cluster(lab, b)?);
    if ca.name == cb.name {
        return Err(bad(
            format!("peering {a} with {b}"),
            "a cluster cannot peer with itself",
        ));
    }
    if ca.behind_nat && cb.behind_nat {
        return Err(bad(
            format!("peering {a} with {b}"),
            "both clusters are behind NAT; one must be reachable",
        ));
    }
    let (na, nb) = (
        services::ipam_netns(lab, ca)?,
        services::ipam_netns(lab, cb)?,
    );
    let (la, lb) = (list(&na)?, list(&nb)?);
    // Each side decides where the other's ranges appear locally...
    let pod_b = cb.pod_cidr.to_string();
    let pod_a = ca.pod_cidr.to_string();
    ipam(
        &na,
        &[
            "remap",
            "--peer",
            b,
            "--pod-cidr",
            &pod_b,
            "--external-cidr",
            &lb.external_cidr,
        ],
    )?;
    ipam(
        &nb,
        &[
            "remap",
            "--peer",
            a,
            "--pod-cidr",
            &pod_a,
            "--external-cidr",
            &la.external_cidr,
        ],
    )?;
    let find = |l: IpamList, who: &str| -> Result<(Ipv4Net, Ipv4Net), LabError> {
        let p = l
            .peers
            .into_iter()
            .find(|p| p.cluster_id == who)
            .ok_or_else(|| bad("reading the IPAM".into(), format!("peer {who} missing")))?;
        Ok((net(&p.pod_view)?, net(&p.external_view)?))
    };
    let (a_sees_b, a_sees_b_ext) = find(list(&na)?, b)?;
    let (b_sees_a, b_sees_a_ext) = find(list(&nb)?, a)?;
    // ...and tells the other.
    ipam(
        &na,
        &[
            "set-peer-view",
            "--peer",
            b,
            "--pod-view",
            &b_sees_a.to_string(),
            "--external-view",
            &b_sees_a_ext.to_string(),
        ],
    )?;
    ipam(
        &nb,
        &[
            "set-peer-view",
            "--peer",
            a,
            "--pod-view",
            &a_sees_b.to_string(),
            "--external-view",
            &a_sees_b_ext.to_string(),
        ],
    )?;

    let view_a = View {
        remote_pods: a_sees_b,
        remote_external: a_sees_b_ext,
        local_pods_at_peer: b_sees_a,
    };
    let view_b = View {
        remote_pods: b_sees_a,
        remote_external: b_sees_a_ext,
        local_pods_at_peer: a_sees_b,
    };
    // Both files are built (keys read, views checked) before either is written.
    let fa = configured(lab, ca, cb, &view_a)?;
    let fb = configured(lab, cb, ca, &view_b)?;
    services::write_gateway_config(lab, ca.name.as_str(), &fa)?;
    services::write_gateway_config(lab, cb.name.as_str(), &fb)?;
    for (c, other) in [(ca, cb), (cb, ca)] {
        let node = placement::gateway_netns(lab, c)?;
        services::wait_for(
            30,
            &format!("{}'s gateway to handshake with {}", c.name, other.name),
            || handshaken(&node, other.name.as_str()),
        )?;
    }
    overlay::sync(lab, ca)?;
    overlay::sync(lab, cb)?;
    Ok((view_a, view_b))
}

/// `c`'s gateway configuration with `peer` added or updated.
fn configured(
    lab: &Lab,
    c: &Cluster,
    peer: &Cluster,
    v: &View,
) -> Result<gateway::config::File, LabError> {
    let mut file = services::read_gateway_config(lab, c.name.as_str())?;
    file.peers.retain(|p| p.id.as_str() != peer.name.as_str());
    let endpoint = (!peer.behind_nat)
        .then(|| std::net::SocketAddr::from((peer.wan_addr.addr(), GATEWAY_PORT)));
    let cidr =
        |n: Ipv4Net| liqo_types::Cidr::new(n).map_err(|e| bad("a view".into(), e.to_string()));
    file.peers.push(gateway::config::PeerFile {
        id: peer
            .name
            .as_str()
            .parse()
            .map_err(|e: liqo_types::InvalidId| bad("a cluster ID".into(), e.to_string()))?,
        public_key: public_key(lab, peer)?
            .parse()
            .map_err(|e: liqo_types::InvalidKey| bad("a key".into(), e.to_string()))?,
        endpoint,
        keepalive: None,
        remote_pod_cidr: cidr(v.remote_pods)?,
        remote_external_cidr: Some(cidr(v.remote_external)?),
        local_pod_cidr_at_peer: cidr(v.local_pods_at_peer)?,
    });
    Ok(file)
}

/// The gateway's `/status` in `node`, or its refused configuration as the error.
fn gateway_status(node: &Netns) -> Result<serde_json::Value, LabError> {
    let json = run_in(node, &bin("liqo-gateway")?, &["status", "-o", "json"])?;
    let v: serde_json::Value = serde_json::from_str(&json)
        .map_err(|e| bad("decoding the gateway status".into(), e.to_string()))?;
    if let Some(e) = v["configError"].as_str() {
        return Err(bad("configuring the gateway".into(), e.to_owned()));
    }
    Ok(v)
}

/// The gateway's entry for `peer` in `status`, if any.
fn peer_entry<'a>(status: &'a serde_json::Value, peer: &str) -> Option<&'a serde_json::Value> {
    status["peers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["id"] == peer)
}

/// Whether the gateway in `node` has a session with `peer`.
pub(crate) fn handshaken(node: &Netns, peer: &str) -> Result<(), LabError> {
    let v = gateway_status(node)?;
    if peer_entry(&v, peer).is_some_and(|p| p["handshakeAgeSecs"].is_u64()) {
        Ok(())
    } else {
        Err(bad(format!("handshake with {peer}"), "not yet"))
    }
}

/// Whether the gateway in `node` no longer has `peer` (its configuration was reloaded).
fn gateway_forgot(node: &Netns, peer: &str) -> Result<(), LabError> {
    if peer_entry(&gateway_status(node)?, peer).is_some() {
        Err(bad(format!("removing {peer}"), "not yet"))
    } else {
        Ok(())
    }
}

/// Undoes [`peer`]: removes each from the other's gateway and releases the IPAM ranges. Both
/// sides are checked before anything changes.
pub fn unpeer(lab: &Lab, a: &str, b: &str) -> Result<(), LabError> {
    let (ca, cb) = (cluster(lab, a)?, cluster(lab, b)?);
    let mut files = Vec::new();
    for (c, other) in [(ca, cb), (cb, ca)] {
        let mut file = services::read_gateway_config(lab, c.name.as_str())?;
        let before = file.peers.len();
        file.peers.retain(|p| p.id.as_str() != other.name.as_str());
        if file.peers.len() == before {
            return Err(bad(
                format!("unpeering {a} and {b}"),
                format!("{} is not peered with {}", c.name, other.name),
            ));
        }
        files.push((c, other, file));
    }
    for (c, other, file) in files {
        services::write_gateway_config(lab, c.name.as_str(), &file)?;
        let node = placement::gateway_netns(lab, c)?;
        services::wait_for(
            10,
            &format!("{}'s gateway to drop {}", c.name, other.name),
            || gateway_forgot(&node, other.name.as_str()),
        )?;
        overlay::sync(lab, c)?;
        ipam(
            &services::ipam_netns(lab, c)?,
            &["release", "--peer", other.name.as_str()],
        )?;
    }
    Ok(())
}

/// Every peering of the lab, as `(cluster, its view of the peer, peer name)`.
pub fn peerings(lab: &Lab) -> Result<Vec<(String, String, View)>, LabError> {
    let mut out = Vec::new();
    for c in &lab.topology.clusters {
        let file = services::read_gateway_config(lab, c.name.as_str())?;
        for p in file.peers {
            let remote_external = p.remote_external_cidr.unwrap_or(p.remote_pod_cidr).net();
            out.push((
                c.name.to_string(),
                p.id.to_string(),
                View {
                    remote_pods: p.remote_pod_cidr.net(),
                    remote_external,
                    local_pods_at_peer: p.local_pod_cidr_at_peer.net(),
                },
            ));
        }
    }
    Ok(out)
}

/// `ip` of `from` moved into `to`, keeping host bits.
pub fn translate(ip: Ipv4Addr, from: &Ipv4Net, to: &Ipv4Net) -> Ipv4Addr {
    let host = u32::from(ip) & !u32::from(from.netmask());
    (u32::from(to.network()) | host).into()
}
