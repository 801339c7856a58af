//! What the lab knows about a cluster, for the peering core: its inventory (the topology and
//! where its gateway runs now) and its recorded peerings (`peerings.json` in the cluster's
//! directory, written atomically; never read back from a daemon's config file).

use std::{fs, io, net::SocketAddr, path::PathBuf};

use liqo_peering::{ClusterInfo, Peerings, plan};
use liqo_types::{Cidr, ClusterId, OverlayNode, PeerView};

use super::{Lab, LabError, daemons::GATEWAY_PORT, state::write_atomic};
use crate::topology::Cluster;

/// The cluster called `name`, or the refusal of `op` listing the clusters.
pub(crate) fn find<'a>(lab: &'a Lab, name: &str, op: &str) -> Result<&'a Cluster, LabError> {
    let ids: Vec<ClusterId> = lab.topology.clusters.iter().map(id).collect();
    let found = plan::resolve(&ids, name).map_err(|refusal| liqo_peering::Error::Refused {
        op: op.into(),
        refusal,
    })?;
    Ok(lab
        .topology
        .cluster(found.as_str())
        .expect("resolved among the topology's clusters"))
}

/// The cluster's ID (its name: a valid label).
pub(crate) fn id(c: &Cluster) -> ClusterId {
    c.name.as_str().parse().expect("cluster names are labels")
}

/// The node the gateway of `c` runs on (`nodes[0]` until it is moved).
pub fn gateway_node(lab: &Lab, c: &Cluster) -> Result<String, LabError> {
    let path = lab.files(c).gateway_node();
    match fs::read_to_string(&path) {
        Ok(s) => Ok(s.trim().to_owned()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(c.gateway().name.to_string()),
        Err(e) => Err(LabError::build(format!("reading {}", path.display()), e)),
    }
}

/// The pod CIDR of `c`.
pub(crate) fn pod_cidr(c: &Cluster) -> Cidr {
    Cidr::new(c.pod_cidr).expect("validated topology")
}

/// The nodes of `c` as the overlay agents know them.
pub(crate) fn overlay_nodes(c: &Cluster) -> Vec<OverlayNode> {
    c.nodes
        .iter()
        .map(|n| OverlayNode {
            name: n.name.to_string(),
            address: n.lan_addr.addr(),
            pod_cidr: Cidr::new(n.pod_slice).expect("validated topology"),
        })
        .collect()
}

/// The inventory of a lab cluster.
pub(crate) struct LabInventory {
    pub(crate) lab: Lab,
    pub(crate) cluster: Cluster,
}

impl liqo_peering::Inventory for LabInventory {
    type Error = LabError;

    async fn cluster(&mut self) -> Result<ClusterInfo, LabError> {
        let c = &self.cluster;
        Ok(ClusterInfo {
            id: id(c),
            pod_cidr: pod_cidr(c),
            endpoint: (!c.behind_nat).then(|| SocketAddr::from((c.wan_addr.addr(), GATEWAY_PORT))),
        })
    }

    async fn nodes(&mut self) -> Result<Vec<OverlayNode>, LabError> {
        Ok(overlay_nodes(&self.cluster))
    }

    async fn gateway_node(&mut self) -> Result<String, LabError> {
        gateway_node(&self.lab, &self.cluster)
    }
}

/// The recorded peerings of a lab cluster.
pub(crate) struct LabRecords {
    pub(crate) path: PathBuf,
}

impl LabRecords {
    pub(crate) fn of(lab: &Lab, c: &Cluster) -> LabRecords {
        LabRecords {
            path: lab.files(c).peerings(),
        }
    }

    pub(crate) fn read(&self) -> Result<Peerings, LabError> {
        let what = || format!("reading the peerings of {}", self.path.display());
        match fs::read_to_string(&self.path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| LabError::build(what(), e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Peerings::new()),
            Err(e) => Err(LabError::build(what(), e)),
        }
    }
}

impl liqo_peering::Records for LabRecords {
    type Error = LabError;

    async fn load(&mut self) -> Result<Peerings, LabError> {
        self.read()
    }

    async fn save(&mut self, p: &Peerings) -> Result<(), LabError> {
        let text = serde_json::to_string_pretty(p)
            .map_err(|e| LabError::build("encoding the peerings", e))?;
        write_atomic(&self.path, &text)
    }
}

/// Every peering of the lab, as `(cluster, peer, the cluster's view of the peer)`, from the
/// clusters' records.
pub fn peerings(lab: &Lab) -> Result<Vec<(String, String, PeerView)>, LabError> {
    let mut out = Vec::new();
    for c in &lab.topology.clusters {
        for (peer, p) in LabRecords::of(lab, c).read()? {
            out.push((c.name.to_string(), peer.to_string(), p.view));
        }
    }
    Ok(out)
}
