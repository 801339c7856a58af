//! `generate peer-command`, `status` and `version`: read the local identity, the local token,
//! the auth URL and the ForeignClusters (through `liqo_auth`), and print them.

use control::api::discovery::ForeignCluster;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment},
    core::v1::ConfigMap,
};
use kube::{Api, Client, api::ListParams};
use liqo_auth::url::Overrides;

use crate::{
    client::ApiFailure,
    install::{MANAGER_DEPLOYMENT, ready},
    render::{self, ComponentStatus, Missing, Network, StatusReport},
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

/// The auth URL overrides the controller-manager runs with (the chart's
/// `auth.config.addressOverride`/`portOverride` are its flags): peers must be told the same
/// URL it announces. None without its Deployment (a cluster without the chart); a Deployment
/// that cannot be read is said on stderr, as the URL may then differ from the announced one.
async fn manager_overrides(client: &Client, ns: &str) -> Overrides {
    let deploy = Api::<Deployment>::namespaced(client.clone(), ns)
        .get_opt(MANAGER_DEPLOYMENT)
        .await;
    let args: Vec<String> = match deploy {
        Ok(Some(d)) => d
            .spec
            .and_then(|s| s.template.spec)
            .map(|p| p.containers)
            .unwrap_or_default()
            .into_iter()
            .flat_map(|c| c.args.unwrap_or_default())
            .collect(),
        Ok(None) => Vec::new(),
        Err(e) => {
            eprintln!(
                "warning: reading Deployment {ns}/{MANAGER_DEPLOYMENT} ({}): its auth URL overrides are not applied, the URL below may differ from the one it announces",
                liqo_types::chain(&e)
            );
            Vec::new()
        }
    };
    Overrides::from_args(&args)
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
    let url = liqo_auth::url::discover(client, ns, &manager_overrides(client, ns).await)
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
    let auth_url = liqo_auth::url::discover(client, ns, &manager_overrides(client, ns).await)
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
        network: network(client, ns).await,
        components: components(client, ns).await,
    }
}

/// The network from the IPAM's state in the API server (`None`: no such ConfigMap).
async fn network(client: &Client, ns: &str) -> Result<Option<Network>, Missing> {
    use ipam::store::configmap::{DATA_KEY, DEFAULT_NAME};
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm = api
        .get_opt(DEFAULT_NAME)
        .await
        .map_err(|e| Missing::Network(format!("reading ConfigMap {ns}/{DEFAULT_NAME}: {e}")))?;
    let Some(cm) = cm else {
        return Ok(None);
    };
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .ok_or_else(|| {
            Missing::Network(format!("ConfigMap {ns}/{DEFAULT_NAME} has no {DATA_KEY}"))
        })?;
    let state: ipam::state::State = serde_json::from_str(text).map_err(|e| {
        Missing::Network(format!(
            "ConfigMap {ns}/{DEFAULT_NAME} holds no IPAM state: {e}"
        ))
    })?;
    let strings = |v: &[ipnet::Ipv4Net]| v.iter().map(ToString::to_string).collect();
    Ok(Some(Network {
        pod_cidr: state.config.pod_cidr.to_string(),
        service_cidr: state.config.service_cidr.to_string(),
        external_cidr: state.external_cidr.to_string(),
        reserved_subnets: strings(&state.config.reserved),
        pools: strings(&state.config.pools),
        peers: state.peers.len(),
        endpoints: state.endpoints.len(),
    }))
}

/// The release's Deployments and DaemonSets, ready or not, with their versions.
async fn components(client: &Client, ns: &str) -> Result<Vec<ComponentStatus>, Missing> {
    let lp = ListParams::default().labels("app.kubernetes.io/part-of=liqo");
    let fail = |e: kube::Error| Missing::Components(ApiFailure::from(e).into());
    let version = |m: &kube::api::ObjectMeta| {
        m.labels
            .as_ref()
            .and_then(|l| l.get("app.kubernetes.io/version").cloned())
    };
    let line = |c: ready::Component, v: Option<String>| ComponentStatus {
        name: c.name,
        ready: c.ready,
        wanted: c.wanted,
        done: c.done,
        version: v,
    };
    let mut out: Vec<ComponentStatus> = Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map_err(fail)?
        .items
        .iter()
        .map(|d| line(ready::deployment(d), version(&d.metadata)))
        .collect();
    out.extend(
        Api::<DaemonSet>::namespaced(client.clone(), ns)
            .list(&lp)
            .await
            .map_err(fail)?
            .items
            .iter()
            .map(|d| line(ready::daemon_set(d), version(&d.metadata))),
    );
    Ok(out)
}

/// The Kubernetes API server's version, for `version` without `--client`.
pub async fn server_version(client: &Client) -> Result<String, kube::Error> {
    client.apiserver_version().await.map(|v| v.git_version)
}
