//! `generate peer-command`, `status` and `version`: read the local identity, the local token,
//! the auth URL and the ForeignClusters (through `liqo_auth`), and print them.

use control::api::discovery::ForeignCluster;
use kube::{Api, Client, api::ListParams};
use liqo_auth::url::Overrides;

use crate::{
    client::ApiFailure,
    render::{self, Missing, StatusReport},
};

/// Why `generate peer-command` failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The local identity.
    #[error("reading this cluster's identity")]
    Identity(#[source] liqo_auth::cluster::IdentityError),
    /// The local token.
    #[error("reading this cluster's auth token")]
    Token(#[source] liqo_auth::tokens::TokenError),
    /// The auth URL.
    #[error("finding this cluster's auth URL")]
    Url(#[source] liqo_auth::url::UrlError),
}

/// The peer command of this cluster.
pub async fn peer_command(
    client: &Client,
    ns: &str,
    program: &str,
) -> Result<String, GenerateError> {
    let identity = liqo_auth::cluster::local_identity(client, ns)
        .await
        .map_err(GenerateError::Identity)?;
    let token = liqo_auth::tokens::local_token(client, ns)
        .await
        .map_err(GenerateError::Token)?;
    let url = liqo_auth::url::discover(client, ns, &Overrides::default())
        .await
        .map_err(GenerateError::Url)?;
    Ok(render::peer_command(
        program,
        identity.cluster_id.as_str(),
        Some(identity.cluster_name.as_str()),
        &url,
        &token,
    ))
}

/// What `status` finds; a missing piece is reported, never an error.
pub async fn status(client: &Client, ns: &str) -> StatusReport {
    let identity = liqo_auth::cluster::local_identity(client, ns)
        .await
        .map(|i| (i.cluster_id.to_string(), i.cluster_name.to_string()))
        .map_err(|e| Missing::Identity(e.into()));
    let auth_url = liqo_auth::url::discover(client, ns, &Overrides::default())
        .await
        .map_err(|e| Missing::AuthUrl(e.into()));
    let fcs: Api<ForeignCluster> = Api::all(client.clone());
    let peers = fcs
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| Missing::Peers(ApiFailure::from(e).into()));
    StatusReport {
        namespace: ns.to_owned(),
        api_server: None,
        identity,
        auth_url,
        peers,
    }
}

/// The Kubernetes API server's version, for `version` without `--client`.
pub async fn server_version(client: &Client) -> Result<String, kube::Error> {
    client.apiserver_version().await.map(|v| v.git_version)
}
