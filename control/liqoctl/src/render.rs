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
