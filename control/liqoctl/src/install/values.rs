//! The Helm values `install` gives the chart (pure): what the flags and the detected CIDRs say,
//! under the chart's keys; `--set` is passed to Helm after them, so it can override any.

use std::collections::BTreeMap;

use control::api::{Cidr, ClusterName};
use serde_json::{Value, json};

/// What the values are made from.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    /// The cluster's name.
    pub cluster_name: ClusterName,
    /// Its labels.
    pub cluster_labels: BTreeMap<String, String>,
    /// The share of resources offered to each peer.
    pub sharing_percentage: u8,
    /// Its pod CIDR.
    pub pod_cidr: Cidr,
    /// Its service CIDR.
    pub service_cidr: Cidr,
    /// Subnets never used to remap peers.
    pub reserved_subnets: Vec<Cidr>,
    /// The API server URL given to peers, if not the kubeconfig's.
    pub api_server_url: Option<String>,
    /// The images' tag (this liqoctl's version).
    pub tag: String,
    /// Two controller-manager replicas electing a leader and two active/standby gateways
    /// (`--enable-ha`).
    pub ha: bool,
}

/// The values document.
pub fn values(i: &Inputs) -> Value {
    let mut v = json!({
        "tag": i.tag,
        "discovery": {"config": {
            "clusterName": i.cluster_name.as_str(),
            "clusterLabels": i.cluster_labels,
        }},
        "controllerManager": {
            "replicas": if i.ha { 2 } else { 1 },
            "config": {"resourceSharingPercentage": i.sharing_percentage},
        },
        "gateway": {"replicas": if i.ha { 2 } else { 1 }},
        "networkManager": {"config": {
            "podCIDR": i.pod_cidr.to_string(),
            "serviceCIDR": i.service_cidr.to_string(),
            "reservedSubnets": i.reserved_subnets.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }},
    });
    if let Some(url) = &i.api_server_url {
        v["apiServer"] = json!({"address": url});
    }
    v
}

/// The values as the YAML file `--only-output-values` writes (with a header saying where it
/// came from).
pub fn to_yaml(v: &Value) -> Result<String, serde_saphyr::SerializeError> {
    let body = serde_saphyr::to_string(v)?;
    Ok(format!(
        "# Helm values of the liqo chart, made by `liqoctl install` {}.\n{body}",
        env!("CARGO_PKG_VERSION")
    ))
}

/// A name for a cluster installed without `--cluster-name`: `cluster-` and 6 characters of
/// `seed` (random bytes), lowercase letters and digits.
pub fn generated_name(seed: &[u8]) -> ClusterName {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let suffix: String = seed
        .iter()
        .take(6)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect();
    format!("cluster-{suffix}")
        .parse()
        .expect("letters and digits make a valid cluster name")
}
