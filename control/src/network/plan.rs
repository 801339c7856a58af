//! The data plane's plan of a cluster's peerings, pure: from its recorded peerings, the
//! gateway's peer list and the overlay's per-node configuration; and the refusals checked
//! before anything changes. The lab's peering (`liqo-peering`) and the gateway and route
//! operators both render through it.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
};

use liqo_types::{Cidr, ClusterId, GatewayPeer, OverlayNode, PeerView, PublicKey};
use serde::{Deserialize, Serialize};

/// One recorded peering of a cluster: everything its gateway and overlay need about the peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Peering {
    /// How this cluster sees the peer, and how the peer sees it.
    pub view: PeerView,
    /// The peer gateway's WireGuard public key.
    pub public_key: PublicKey,
    /// The peer gateway's public endpoint; `None` when the peer is behind NAT (it calls us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<SocketAddr>,
}

/// A cluster's peerings, by peer.
pub type Peerings = BTreeMap<ClusterId, Peering>;

/// What the orchestration needs to know about a cluster itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    /// Its ID.
    pub id: ClusterId,
    /// Its own pod CIDR.
    pub pod_cidr: Cidr,
    /// Where peers reach its gateway; `None` when it is behind NAT (it can only call out).
    pub endpoint: Option<SocketAddr>,
}

impl ClusterInfo {
    /// Whether peers cannot reach its gateway (it must call them).
    pub fn behind_nat(&self) -> bool {
        self.endpoint.is_none()
    }
}

/// Why an operation was refused before anything changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Peering a cluster with itself.
    #[error("a cluster cannot peer with itself ({0})")]
    SelfPeering(ClusterId),
    /// Neither side can be reached.
    #[error("both clusters are behind NAT; one must be reachable ({a} and {b} only call out)")]
    BothBehindNat {
        /// One cluster.
        a: ClusterId,
        /// The other.
        b: ClusterId,
    },
    /// A name that is no known cluster.
    #[error("no such cluster {name:?}; clusters: {}", known.join(", "))]
    UnknownCluster {
        /// The name given.
        name: String,
        /// The known clusters.
        known: Vec<String>,
    },
    /// Unpeering clusters that are not peered.
    #[error("{cluster} is not peered with {peer}")]
    NotPeered {
        /// The side whose record lacks the peer.
        cluster: ClusterId,
        /// The peer.
        peer: ClusterId,
    },
    /// A node the cluster does not have.
    #[error("no such node {cluster}/{node}; {cluster} has {}", known.join(", "))]
    UnknownNode {
        /// The cluster.
        cluster: ClusterId,
        /// The node given.
        node: String,
        /// Its nodes.
        known: Vec<String>,
    },
    /// Moving the gateway where it already runs.
    #[error("the gateway of {cluster} already runs on {node}")]
    AlreadyThere {
        /// The cluster.
        cluster: ClusterId,
        /// The node.
        node: String,
    },
}

/// The cluster called `name` among `known`.
pub fn resolve<'a>(
    known: impl IntoIterator<Item = &'a ClusterId>,
    name: &str,
) -> Result<ClusterId, Refusal> {
    let known: Vec<&ClusterId> = known.into_iter().collect();
    known
        .iter()
        .find(|id| id.as_str() == name)
        .map(|id| (*id).clone())
        .ok_or_else(|| Refusal::UnknownCluster {
            name: name.into(),
            known: known.iter().map(ToString::to_string).collect(),
        })
}

/// Whether `a` and `b` may peer.
pub fn check_pair(a: &ClusterInfo, b: &ClusterInfo) -> Result<(), Refusal> {
    if a.id == b.id {
        return Err(Refusal::SelfPeering(a.id.clone()));
    }
    if a.behind_nat() && b.behind_nat() {
        return Err(Refusal::BothBehindNat {
            a: a.id.clone(),
            b: b.id.clone(),
        });
    }
    Ok(())
}

/// The peering record `cluster` keeps for `peer`, given its view of it and the peer's key.
pub fn record(view: PeerView, peer: &ClusterInfo, public_key: PublicKey) -> Peering {
    Peering {
        view,
        public_key,
        endpoint: peer.endpoint,
    }
}

/// The gateway's peer list: one entry per peering, sorted by peer ID.
pub fn gateway_peers(peerings: &Peerings) -> Vec<GatewayPeer> {
    peerings
        .iter()
        .map(|(id, p)| GatewayPeer {
            id: id.clone(),
            public_key: p.public_key,
            endpoint: p.endpoint,
            keepalive: None,
            remote_pod_cidr: p.view.remote_pods,
            remote_external_cidr: Some(p.view.remote_external),
            local_pod_cidr_at_peer: p.view.local_pods_at_peer,
            local_external_cidr_at_peer: Some(p.view.local_external_at_peer),
        })
        .collect()
}

/// Every range that leads to a peer here (each peer's pods and external CIDR), sorted, once.
pub fn remote_ranges(peerings: &Peerings) -> Vec<Cidr> {
    let set: BTreeSet<Cidr> = peerings
        .values()
        .flat_map(|p| p.view.remote_ranges())
        .collect();
    set.into_iter().collect()
}

/// What every overlay agent of a cluster must apply: the nodes, where the gateway runs, and the
/// remote ranges routed through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayPlan {
    /// The node running the gateway.
    pub gateway_node: String,
    /// Every node of the cluster, sorted by name.
    pub nodes: Vec<OverlayNode>,
    /// The remote ranges, sorted.
    pub remote_cidrs: Vec<Cidr>,
}

/// One agent's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOverlay {
    /// The agent's node.
    pub node: String,
    /// The node running the gateway.
    pub gateway_node: String,
    /// Every node of the cluster.
    pub nodes: Vec<OverlayNode>,
    /// The remote ranges.
    pub remote_cidrs: Vec<Cidr>,
}

/// The overlay plan of a cluster with these nodes, its gateway on `gateway_node`, and these
/// peerings. Refuses a gateway node that is not one of `nodes`.
pub fn overlay(
    cluster: &ClusterId,
    nodes: &[OverlayNode],
    gateway_node: &str,
    peerings: &Peerings,
) -> Result<OverlayPlan, Refusal> {
    let mut nodes = nodes.to_vec();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    if !nodes.iter().any(|n| n.name == gateway_node) {
        return Err(Refusal::UnknownNode {
            cluster: cluster.clone(),
            node: gateway_node.into(),
            known: nodes.iter().map(|n| n.name.clone()).collect(),
        });
    }
    Ok(OverlayPlan {
        gateway_node: gateway_node.into(),
        nodes,
        remote_cidrs: remote_ranges(peerings),
    })
}

impl OverlayPlan {
    /// The configuration of every agent, in node order.
    pub fn per_node(&self) -> Vec<NodeOverlay> {
        self.nodes
            .iter()
            .map(|n| NodeOverlay {
                node: n.name.clone(),
                gateway_node: self.gateway_node.clone(),
                nodes: self.nodes.clone(),
                remote_cidrs: self.remote_cidrs.clone(),
            })
            .collect()
    }

    /// The same plan with the gateway on `node`.
    pub fn with_gateway(&self, node: &str) -> OverlayPlan {
        OverlayPlan {
            gateway_node: node.into(),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Cidr {
        s.parse().unwrap()
    }

    fn id(s: &str) -> ClusterId {
        s.parse().unwrap()
    }

    fn key(b: u8) -> PublicKey {
        PublicKey([b; 32])
    }

    fn view(pods: &str, ext: &str) -> PeerView {
        PeerView {
            remote_pods: c(pods),
            remote_external: c(ext),
            local_pods_at_peer: c("10.50.0.0/16"),
            local_external_at_peer: c("10.51.0.0/16"),
        }
    }

    fn peerings() -> Peerings {
        let mut p = Peerings::new();
        p.insert(
            id("turin"),
            Peering {
                view: view("10.73.0.0/16", "10.74.0.0/16"),
                public_key: key(2),
                endpoint: None,
            },
        );
        p.insert(
            id("milan"),
            Peering {
                view: view("10.71.0.0/16", "10.72.0.0/16"),
                public_key: key(1),
                endpoint: Some("198.18.0.2:51840".parse().unwrap()),
            },
        );
        p
    }

    #[test]
    fn gateway_peers_are_sorted_and_carry_the_views() {
        let peers = gateway_peers(&peerings());
        let ids: Vec<&str> = peers.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["milan", "turin"]);
        assert_eq!(peers[0].remote_pod_cidr, c("10.71.0.0/16"));
        assert_eq!(peers[0].remote_external_cidr, Some(c("10.72.0.0/16")));
        assert_eq!(peers[0].local_pod_cidr_at_peer, c("10.50.0.0/16"));
        assert_eq!(
            peers[0].local_external_cidr_at_peer,
            Some(c("10.51.0.0/16"))
        );
        assert_eq!(peers[0].endpoint.unwrap().to_string(), "198.18.0.2:51840");
        assert_eq!(peers[1].endpoint, None, "a peer behind NAT calls us");
        assert_eq!(peers[1].public_key, key(2));
        assert!(gateway_peers(&Peerings::new()).is_empty());
    }

    #[test]
    fn overlay_plan_is_sorted_and_gives_every_node_the_same_ranges() {
        let n = |name: &str, a: &str, p: &str| OverlayNode {
            name: name.into(),
            address: a.parse().unwrap(),
            pod_cidr: c(p),
        };
        let nodes = [
            n("n1", "172.18.0.2", "10.200.1.0/24"),
            n("n0", "172.18.0.1", "10.200.0.0/24"),
        ];
        let plan = overlay(&id("rome"), &nodes, "n1", &peerings()).unwrap();
        assert_eq!(
            plan.remote_cidrs,
            [
                c("10.71.0.0/16"),
                c("10.72.0.0/16"),
                c("10.73.0.0/16"),
                c("10.74.0.0/16")
            ]
        );
        let per = plan.per_node();
        assert_eq!(per.len(), 2);
        assert_eq!((per[0].node.as_str(), per[1].node.as_str()), ("n0", "n1"));
        assert!(
            per.iter()
                .all(|p| p.gateway_node == "n1" && p.nodes[0].name == "n0")
        );
        assert_eq!(plan.with_gateway("n0").gateway_node, "n0");
        let e = overlay(&id("rome"), &nodes, "n7", &peerings()).unwrap_err();
        assert_eq!(e.to_string(), "no such node rome/n7; rome has n0, n1");
    }

    #[test]
    fn refusals_name_the_problem() {
        let info = |name: &str, nat: bool| ClusterInfo {
            id: id(name),
            pod_cidr: c("10.200.0.0/16"),
            endpoint: (!nat).then(|| "198.18.0.1:51840".parse().unwrap()),
        };
        let e = check_pair(&info("rome", false), &info("rome", false)).unwrap_err();
        assert!(e.to_string().contains("cannot peer with itself"), "{e}");
        let e = check_pair(&info("home", true), &info("office", true)).unwrap_err();
        assert!(
            e.to_string().contains("both clusters are behind NAT"),
            "{e}"
        );
        assert!(check_pair(&info("home", true), &info("cloud", false)).is_ok());
        let known = [id("home"), id("cloud"), id("office")];
        assert_eq!(resolve(&known, "cloud").unwrap(), id("cloud"));
        let e = resolve(&known, "mars").unwrap_err().to_string();
        assert_eq!(e, "no such cluster \"mars\"; clusters: home, cloud, office");
    }

    #[test]
    fn a_record_round_trips_through_json() {
        let p = &peerings()[&id("milan")];
        let text = serde_json::to_string(p).unwrap();
        assert!(
            text.contains("\"publicKey\"") && text.contains("\"remotePods\""),
            "{text}"
        );
        assert_eq!(&serde_json::from_str::<Peering>(&text).unwrap(), p);
    }
}
