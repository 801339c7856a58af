//! What the in-band setup recorded ([`InBand`], read by [`load`]), shown to an operator ([`render`],
//! [`peer_command`]), and what `liqoctl unpeer in-band` must leave none of ([`leftovers`],
//! [`endpoint_mappings`]).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

use control::{
    api::{discovery::ForeignCluster, net::TunnelEndpoint},
    consts::{labels, values},
};
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client, api::ListParams};
use serde::{Deserialize, Serialize};

use crate::lab::{
    Prefix,
    error::STATE_DIR,
    k8s::{K8sLab, K8sLabError},
};

/// Where the record of lab `prefix` is.
pub(super) fn record(prefix: &Prefix) -> PathBuf {
    Path::new(STATE_DIR)
        .join(format!("{prefix}.d"))
        .join("inband.json")
}

/// What the in-band setup made in one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InBand {
    /// The cluster.
    pub cluster: String,
    /// The gateway node's namespace, where everything below is reachable.
    pub netns: String,
    /// The `liqo-auth` ClusterIP and port.
    pub auth: SocketAddr,
    /// The `liqo-proxy` ClusterIP and port.
    pub proxy: SocketAddr,
    /// The API server's address as the kubeconfig says it (root namespace only).
    pub api_server: String,
    /// The log of `liqo-proxy` (one line per CONNECT, with `from=`).
    pub proxy_log: PathBuf,
    /// The log of the moved controller-manager.
    pub manager_log: PathBuf,
    /// The moved controller-manager's pid (`liqo.json` records it too).
    pub manager_pid: u32,
}

/// What the in-band setup of lab `prefix` made (`None`: the lab is not in-band, or the
/// setup did not finish).
pub fn load(prefix: &Prefix) -> Result<Option<Vec<InBand>>, K8sLabError> {
    let path = record(prefix);
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| K8sLabError::lab(format!("reading {}", path.display()), e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(K8sLabError::lab(format!("reading {}", path.display()), e)),
    }
}

/// The `liqoctl peer in-band` line that peers `a` with `b` (both ways) on this lab.
pub fn peer_command(k: &K8sLab, a: &str, b: &str) -> Option<String> {
    let ipam = |c: &str| {
        k.liqo
            .get(c)?
            .get("liqo-ipam")?
            .listen
            .as_deref()
            .map(|l| format!("http://{l}"))
    };
    Some(format!(
        "liqoctl --context {a} peer in-band --bidirectional --remote-context {b} \
         --ipam-address {} --remote-ipam-address {}",
        ipam(a)?,
        ipam(b)?
    ))
}

/// Human lines saying what is reachable where (for `status`).
pub fn render(record: &[InBand]) -> String {
    let mut s = String::from(
        "in-band: API servers and auth services are reachable only inside their cluster; \
         peer with `liqoctl peer in-band`\n",
    );
    for r in record {
        s.push_str(&format!(
            "  {}: in {}: liqo-auth {}, liqo-proxy {} (CONNECT to {} only), \
             liqo-controller-manager pid {} (moved here)\n",
            r.cluster, r.netns, r.auth, r.proxy, r.api_server, r.manager_pid
        ));
    }
    s
}

/// What is left in a cluster that in-band unpeering must remove: ForeignClusters,
/// TunnelEndpoints, and tenant namespaces not being deleted (one line each; empty: nothing).
pub async fn leftovers(client: &Client) -> Result<Vec<String>, K8sLabError> {
    let all = ListParams::default();
    let mut left = Vec::new();
    for fc in Api::<ForeignCluster>::all(client.clone())
        .list(&all)
        .await
        .map_err(K8sLabError::kube("listing ForeignClusters"))?
    {
        left.push(format!(
            "ForeignCluster {}",
            fc.metadata.name.unwrap_or_default()
        ));
    }
    for tep in Api::<TunnelEndpoint>::all(client.clone())
        .list(&all)
        .await
        .map_err(K8sLabError::kube("listing TunnelEndpoints"))?
    {
        left.push(format!(
            "TunnelEndpoint {}",
            tep.metadata.name.unwrap_or_default()
        ));
    }
    let tenants =
        ListParams::default().labels(&format!("{}={}", labels::TENANT_NAMESPACE, values::TRUE));
    for ns in Api::<Namespace>::all(client.clone())
        .list(&tenants)
        .await
        .map_err(K8sLabError::kube("listing tenant namespaces"))?
    {
        if ns.metadata.deletion_timestamp.is_none() {
            left.push(format!(
                "namespace {}",
                ns.metadata.name.unwrap_or_default()
            ));
        }
    }
    Ok(left)
}

/// The endpoint mappings (auth, proxy, ...) the IPAM at `address` holds (its `List`).
pub async fn endpoint_mappings(
    address: &str,
) -> Result<Vec<ipam::service::proto::Endpoint>, K8sLabError> {
    let options = ipam::service::client::ClientOptions::new(address.to_owned());
    let mut client = ipam::service::client::connect(&options)
        .await
        .map_err(|e| K8sLabError::lab(format!("connecting to the IPAM at {address}"), e))?;
    Ok(client
        .list(ipam::service::proto::Empty {})
        .await
        .map_err(|e| K8sLabError::lab(format!("listing the IPAM at {address}"), e))?
        .into_inner()
        .endpoints)
}
