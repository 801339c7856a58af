//! Storage of a lab with real nodes, standing in for a cloud's disks: the class
//! [`CLASS`] (`kubernetes.io/no-provisioner`, bound at the first consumer, `Retain`) and
//! [`PER_NODE`] static hostPath volumes of [`SIZE`] on each node, under the node's data
//! directory (so `liqo-lab down` removes them), pinned to it. Liqo is installed with it as its
//! real class (`storage.realStorageClassName`): `liqo` claims get their data there, on a
//! consumer's node or a provider's.

use k8s_openapi::api::{core::v1::PersistentVolume, storage::v1::StorageClass};
use kube::{Api, Client, api::PostParams};
use serde_json::json;

use super::{K8sLabError, realnode::NodePaths};
use crate::{lab::Lab, topology::Cluster};

/// The lab's real storage class.
pub const CLASS: &str = "lab-local";
/// Volumes per node.
pub const PER_NODE: usize = 8;
/// Each volume's size.
pub const SIZE: &str = "1Gi";

/// Makes the class and the volumes of cluster `c` (an existing one is kept).
pub async fn create(lab: &Lab, c: &Cluster, client: &Client) -> Result<(), K8sLabError> {
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": CLASS},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Retain",
    }))
    .map_err(|e| K8sLabError::lab("forging the lab's StorageClass", e))?;
    created(
        Api::<StorageClass>::all(client.clone())
            .create(&PostParams::default(), &class)
            .await,
        format!("creating StorageClass {CLASS} on {}", c.name),
    )?;
    let volumes = Api::<PersistentVolume>::all(client.clone());
    for n in &c.nodes {
        let node = n.name.as_str();
        let dir = NodePaths::of(lab, c, node).data.join("volumes");
        for i in 0..PER_NODE {
            let name = format!("{CLASS}-{node}-{i}");
            let v: PersistentVolume = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {
                    "capacity": {"storage": SIZE},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": CLASS,
                    "hostPath": {"path": dir.join(i.to_string()), "type": "DirectoryOrCreate"},
                    // By the hostname label, as local volumes are: the scheduler's volume
                    // binding reads a volume's affinity against node labels only.
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
                },
            }))
            .map_err(|e| K8sLabError::lab("forging a lab volume", e))?;
            created(
                volumes.create(&PostParams::default(), &v).await,
                format!("creating PersistentVolume {name} on {}", c.name),
            )?;
        }
    }
    Ok(())
}

fn created<T>(r: Result<T, kube::Error>, what: String) -> Result<(), K8sLabError> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(K8sLabError::kube(what)(e)),
    }
}
