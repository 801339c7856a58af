//! What liqoctl prints, built from values: the peer command of `generate peer-command` and the
//! report of `status`. Pure: the callers gather the values.

use std::sync::Arc;

use control::{
    api::discovery::{ForeignCluster, PeeringConditionType as T},
    identity::AuthToken,
};
use liqo_auth::{cluster::IdentityError, url::UrlError};
use liqo_types::chain;

use crate::client::ApiFailure;

/// The sentence `generate peer-command` prints before the command (upstream's).
pub const PEER_COMMAND_SENTENCE: &str = "Execute this command on a *different* cluster to enable an outgoing peering with the current cluster:";

/// The command a different cluster runs to peer with this one; `name` falls back to the ID.
pub fn peer_command(
    program: &str,
    cluster_id: &str,
    cluster_name: Option<&str>,
    auth_url: &str,
    token: &AuthToken,
) -> String {
    let name = cluster_name.filter(|n| !n.is_empty()).unwrap_or(cluster_id);
    format!(
        "{program} peer out-of-band {name} --auth-url {auth_url} --cluster-id {cluster_id} --auth-token {}",
        token.expose()
    )
}

/// The whole output of `generate peer-command` (`--only-command`: the command alone).
pub fn peer_command_output(command: &str, only_command: bool) -> String {
    if only_command {
        format!("{command}\n")
    } else {
        format!("Peering information correctly retrieved\n\n{PEER_COMMAND_SENTENCE}\n\n{command}\n")
    }
}

/// Why a piece of the `status` report is missing (printed with its causes). Shared (`Arc`):
/// the report is a value, cloned as such.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Missing {
    /// The cluster identity could not be read.
    #[error(transparent)]
    Identity(Arc<IdentityError>),
    /// The auth URL could not be found.
    #[error(transparent)]
    AuthUrl(Arc<UrlError>),
    /// The ForeignClusters could not be listed.
    #[error("listing ForeignClusters")]
    Peers(#[source] Arc<ApiFailure>),
    /// The IPAM's state could not be read.
    #[error("{0}")]
    Network(String),
    /// The components could not be listed.
    #[error("listing the Deployments and DaemonSets")]
    Components(#[source] Arc<ApiFailure>),
}

/// The network as the IPAM's state holds it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    /// The pod CIDR.
    pub pod_cidr: String,
    /// The service CIDR.
    pub service_cidr: String,
    /// The external CIDR in use.
    pub external_cidr: String,
    /// The reserved subnets.
    pub reserved_subnets: Vec<String>,
    /// The pools.
    pub pools: Vec<String>,
    /// How many peers have ranges.
    pub peers: usize,
    /// How many endpoint mappings there are.
    pub endpoints: usize,
}

/// One component: readiness and the version its labels say.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentStatus {
    /// `Deployment/<name>` or `DaemonSet/<name>`.
    pub name: String,
    /// Pods ready.
    pub ready: i32,
    /// Pods wanted.
    pub wanted: i32,
    /// Whether it is ready.
    pub done: bool,
    /// `app.kubernetes.io/version`.
    pub version: Option<String>,
}

/// What `status` found; each piece is a value or why it is missing.
#[derive(Debug, Clone)]
pub struct StatusReport {
    /// The namespace looked in.
    pub namespace: String,
    /// The API server's address, as the kubeconfig gives it.
    pub api_server: Option<String>,
    /// The cluster identity: (ID, name).
    pub identity: Result<(String, String), Missing>,
    /// The auth URL.
    pub auth_url: Result<String, Missing>,
    /// The ForeignClusters.
    pub peers: Result<Vec<ForeignCluster>, Missing>,
    /// The network (`None`: no IPAM state in the API server: none saved yet, or in a file).
    pub network: Result<Option<Network>, Missing>,
    /// The components.
    pub components: Result<Vec<ComponentStatus>, Missing>,
}

/// The `status` report.
pub fn status(report: &StatusReport) -> String {
    let mut out = format!("Liqo namespace: {}\n", report.namespace);
    if let Some(server) = &report.api_server {
        out.push_str(&format!("API server: {server}\n"));
    }
    match &report.identity {
        Ok((id, name)) => out.push_str(&format!("Cluster ID: {id}\nCluster name: {name}\n")),
        Err(why) => out.push_str(&format!("Cluster identity: missing ({})\n", chain(why))),
    }
    match &report.auth_url {
        Ok(url) => out.push_str(&format!("Auth URL: {url}\n")),
        Err(why) => out.push_str(&format!("Auth URL: unknown ({})\n", chain(why))),
    }
    match &report.network {
        Ok(Some(n)) => out.push_str(&format!(
            "Network: pod CIDR {}, service CIDR {}, external CIDR {}, reserved subnets [{}], pools [{}]; {} peer(s) with ranges, {} endpoint mapping(s)\n",
            n.pod_cidr,
            n.service_cidr,
            n.external_cidr,
            n.reserved_subnets.join(", "),
            n.pools.join(", "),
            n.peers,
            n.endpoints
        )),
        Ok(None) => out.push_str(
            "Network: no IPAM state in the API server (none saved yet, or kept in a file: liqo-ipam list)\n",
        ),
        Err(why) => out.push_str(&format!("Network: unknown ({})\n", chain(why))),
    }
    match &report.components {
        Ok(cs) if cs.is_empty() => out.push_str("Components: none found\n"),
        Ok(cs) => {
            out.push_str("Components:\n");
            for c in cs {
                out.push_str(&format!(
                    "  {} {}/{} {}{}\n",
                    c.name,
                    c.ready,
                    c.wanted,
                    if c.done { "ready" } else { "NOT READY" },
                    c.version
                        .as_deref()
                        .map(|v| format!(" (version {v})"))
                        .unwrap_or_default()
                ));
            }
        }
        Err(why) => out.push_str(&format!("Components: unknown ({})\n", chain(why))),
    }
    match &report.peers {
        Err(why) => out.push_str(&format!("Peers: unknown ({})\n", chain(why))),
        Ok(fcs) if fcs.is_empty() => out.push_str("Peers: none (no ForeignCluster)\n"),
        Ok(fcs) => {
            out.push_str("Peers:\n");
            for fc in fcs {
                out.push_str(&peer_line(fc));
                out.push('\n');
            }
        }
    }
    out
}

/// The `status` report as data (`-o json|yaml`): a missing piece is `{"error": ...}`.
pub fn status_value(report: &StatusReport) -> serde_json::Value {
    use serde_json::json;
    fn or_error<T>(
        r: &Result<T, Missing>,
        f: impl FnOnce(&T) -> serde_json::Value,
    ) -> serde_json::Value {
        match r {
            Ok(v) => f(v),
            Err(why) => json!({"error": chain(why)}),
        }
    }
    let cond = |fc: &ForeignCluster, t| {
        fc.status
            .as_ref()
            .map(|s| format!("{:?}", s.condition(t)))
            .unwrap_or_else(|| "None".to_owned())
    };
    json!({
        "namespace": report.namespace,
        "apiServer": report.api_server,
        "identity": or_error(&report.identity, |(id, name)| json!({"clusterID": id, "clusterName": name})),
        "authURL": or_error(&report.auth_url, |u| json!(u)),
        "network": or_error(&report.network, |n| json!(n)),
        "components": or_error(&report.components, |c| json!(c)),
        "peers": or_error(&report.peers, |fcs| fcs.iter().map(|fc| json!({
            "name": fc.metadata.name,
            "clusterID": fc.spec.cluster_identity.cluster_id,
            "authURL": fc.spec.foreign_auth_url,
            "outgoing": cond(fc, T::OutgoingPeering),
            "incoming": cond(fc, T::IncomingPeering),
            "authentication": cond(fc, T::AuthenticationStatus),
            "network": cond(fc, T::NetworkStatus),
        })).collect::<Vec<_>>().into()),
    })
}

fn peer_line(fc: &ForeignCluster) -> String {
    let name = fc.metadata.name.as_deref().unwrap_or("<unnamed>");
    let cond = |t| match &fc.status {
        Some(s) => format!("{:?}", s.condition(t)),
        None => "None".to_owned(),
    };
    let mut line = format!(
        "  {name} (cluster ID {}, auth URL {}): outgoing {} (enabled {:?}), incoming {} (enabled {:?}), authentication {}, network {}",
        fc.spec.cluster_identity.cluster_id,
        fc.spec.foreign_auth_url,
        cond(T::OutgoingPeering),
        fc.spec.outgoing_peering_enabled,
        cond(T::IncomingPeering),
        fc.spec.incoming_peering_enabled,
        cond(T::AuthenticationStatus),
        cond(T::NetworkStatus),
    );
    if fc.status.is_none() {
        line.push_str(" [no status yet: no controller has processed it]");
    }
    line
}

#[cfg(test)]
mod tests;
