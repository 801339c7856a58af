//! The peering core's record and inventory over Kubernetes objects: the peerings are the
//! TunnelEndpoints (read only: the network manager writes them), the nodes are the Node objects
//! and the gateway's node is the holder of the Lease `liqo-gateway`.

use std::{collections::BTreeMap, net::SocketAddr};

use control::consts::{keys, net, objects};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Node},
};
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams},
};
use liqo_peering::{ClusterInfo, Inventory, Peerings, Records};
use liqo_types::{Cidr, FieldError, OverlayNode};

use super::{
    error::{KubeError, api},
    teps::{list_teps, resolve},
};
use control::network::{routes, tunnel};

/// The peerings of a cluster as its TunnelEndpoints say (those that parse; see
/// [`tunnel::peerings`]).
#[derive(Clone)]
pub struct TepRecords {
    /// The client.
    pub client: Client,
}

/// The TunnelEndpoints as read at one moment, and the record they make.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The objects (for their finalizers and field managers).
    pub objects: Vec<DynamicObject>,
    /// Each read ([`tunnel::read`]), in the same order.
    pub teps: Vec<tunnel::Tep>,
    /// The record: those that parse and are not being deleted.
    pub peerings: Peerings,
    /// Why each other one is left out, by `namespace/name`.
    pub left_out: BTreeMap<String, FieldError>,
}

impl TepRecords {
    /// Every TunnelEndpoint, read (endpoint names resolved).
    pub async fn read(&self) -> Result<Snapshot, KubeError> {
        let objects = list_teps(&self.client).await?;
        let teps: Vec<tunnel::Tep> = objects.iter().map(tunnel::read).collect();
        let names = resolve(&teps).await;
        let (peerings, left_out) =
            tunnel::peerings(&teps, |h, port| names.get(&(h.to_owned(), port)).copied());
        Ok(Snapshot {
            objects,
            teps,
            peerings,
            left_out,
        })
    }
}

impl Records for TepRecords {
    type Error = KubeError;

    async fn load(&mut self) -> Result<Peerings, KubeError> {
        Ok(self.read().await?.peerings)
    }

    async fn save(&mut self, _: &Peerings) -> Result<(), KubeError> {
        Err(KubeError::ReadOnly)
    }
}

/// A cluster's inventory: its identity (the identity ConfigMap), its nodes (Node objects with
/// an InternalIP and a pod CIDR) and its gateway's node (the Lease holder). The pod CIDR and the
/// public endpoint are not Kubernetes objects: the caller gives them (from the IPAM and the
/// gateway Service).
#[derive(Clone)]
pub struct KubeInventory {
    /// The client.
    pub client: Client,
    /// The Liqo namespace.
    pub namespace: String,
    /// The cluster's pod CIDR, if known.
    pub pod_cidr: Option<Cidr>,
    /// The gateway's public endpoint, if it has one.
    pub endpoint: Option<SocketAddr>,
}

impl KubeInventory {
    /// The cluster ID in the identity ConfigMap.
    pub async fn cluster_id(&self) -> Result<liqo_types::ClusterId, KubeError> {
        let what = format!(
            "ConfigMap {}/{}",
            self.namespace,
            objects::CLUSTER_ID_CONFIGMAP
        );
        let cm = Api::<ConfigMap>::namespaced(self.client.clone(), &self.namespace)
            .get(objects::CLUSTER_ID_CONFIGMAP)
            .await
            .map_err(api(format!("reading {what}")))?;
        let id = cm
            .data
            .and_then(|d| d.get(keys::CLUSTER_ID).cloned())
            .unwrap_or_default();
        id.parse().map_err(|e| KubeError::Object {
            what: format!("{what} data.{}", keys::CLUSTER_ID),
            problem: format!("{id:?}: {e}"),
        })
    }

    /// The Nodes.
    pub async fn node_objects(&self) -> Result<Vec<Node>, KubeError> {
        Ok(Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(api("listing Nodes"))?
            .items)
    }

    /// The gateway's node, if the Lease names one.
    pub async fn lease_holder(&self) -> Result<Option<String>, KubeError> {
        let lease = Api::<Lease>::namespaced(self.client.clone(), &self.namespace)
            .get_opt(net::GATEWAY_LEASE)
            .await
            .map_err(api(format!(
                "reading Lease {}/{}",
                self.namespace,
                net::GATEWAY_LEASE
            )))?;
        Ok(lease.as_ref().and_then(routes::lease_holder))
    }
}

impl Inventory for KubeInventory {
    type Error = KubeError;

    async fn cluster(&mut self) -> Result<ClusterInfo, KubeError> {
        let id = self.cluster_id().await?;
        let pod_cidr = self.pod_cidr.ok_or_else(|| KubeError::Object {
            what: format!("the inventory of {id}"),
            problem: "its pod CIDR was not given".into(),
        })?;
        Ok(ClusterInfo {
            id,
            pod_cidr,
            endpoint: self.endpoint,
        })
    }

    async fn nodes(&mut self) -> Result<Vec<OverlayNode>, KubeError> {
        Ok(routes::overlay_nodes(&self.node_objects().await?).0)
    }

    async fn gateway_node(&mut self) -> Result<String, KubeError> {
        self.lease_holder().await?.ok_or_else(|| KubeError::Object {
            what: format!("Lease {}/{}", self.namespace, net::GATEWAY_LEASE),
            problem: "no holder (no gateway runs)".into(),
        })
    }
}
