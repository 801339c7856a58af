//! Where the provider's pods reach the home API server (API server support): the address and
//! HTTPS port of the home cluster's `default/kubernetes` EndpointSlice, the address exposed to
//! the provider through the IPAM (`MapIp{ENDPOINT}`: an external-CIDR address the gateway
//! translates; without an IPAM, as it is).

use std::collections::BTreeMap;

use control::{consts::reflection::SERVICE_NAME, shadowpod::token::HomeApi};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, api::ListParams};

use crate::{
    VkConfig,
    reflection::key::Key,
    resources::endpoints::{EndpointError, Endpoints},
};

/// Why the home API server's address is not known.
#[derive(Debug, thiserror::Error)]
pub enum HomeApiError {
    /// Its EndpointSlice could not be read.
    #[error("reading the EndpointSlices of default/kubernetes")]
    Read(#[source] kube::Error),
    /// The IPAM options are unusable.
    #[error("the IPAM client")]
    Ipam(#[source] ipam::service::client::ClientError),
    /// The IPAM did not map it.
    #[error("exposing the home API server to the provider")]
    Map(#[source] EndpointError),
    /// The IPAM's answer lacked it.
    #[error("no mapping of the home API server's address {0}")]
    Unmapped(String),
}

/// The home API server as the provider's pods reach it; none when the home cluster does not
/// publish its address (an API server without its endpoint reconciler): the offloaded pods
/// then get no token (a warning says so).
pub async fn resolve(cfg: &VkConfig) -> Result<Option<HomeApi>, HomeApiError> {
    let api: Api<EndpointSlice> = Api::namespaced(cfg.local.clone(), "default");
    let slices = api
        .list(&ListParams::default().labels(&format!("{SERVICE_NAME}=kubernetes")))
        .await
        .map_err(HomeApiError::Read)?;
    let found = control::shadowpod::token::api_endpoint(&slices.items);
    let Some((ip, port)) = found else {
        tracing::warn!(
            "default/kubernetes publishes no address and port: offloaded pods get no \
             ServiceAccount token (API server support unavailable)"
        );
        return Ok(None);
    };
    let endpoints = Endpoints::new(
        cfg.ipam.as_ref(),
        cfg.foreign.cluster_id.to_string(),
        control::consts::reflection::IPAM_HOLDER_HOME_API,
    )
    .map_err(HomeApiError::Ipam)?;
    let key = Key {
        namespace: "default".into(),
        name: "kubernetes".into(),
    };
    let mapped = endpoints
        .map(&key, std::slice::from_ref(&ip), &BTreeMap::new())
        .await
        .map_err(HomeApiError::Map)?;
    let host = mapped.get(&ip).cloned().ok_or(HomeApiError::Unmapped(ip))?;
    tracing::info!(%host, port, "the home API server as the provider's pods reach it");
    Ok(Some(HomeApi { host, port }))
}

/// The home API server as the provider's pods reach it, with API server support: given, or
/// found once (for a pod whose ShadowPod needs it: it waits until then); none without.
pub async fn for_pod(
    shared: &crate::reflection::shared::Shared,
    local: Option<&k8s_openapi::api::core::v1::Pod>,
) -> Result<Option<HomeApi>, HomeApiError> {
    let cfg = &shared.cfg;
    if let Some(a) = &cfg.home_api {
        return Ok(Some(a.clone()));
    }
    if !cfg.api_support() {
        return Ok(None);
    }
    let needed = local.is_some_and(|l| {
        l.metadata.deletion_timestamp.is_none() && control::shadowpod::token::need(l).is_some()
    });
    if let Some(a) = shared.home_api.get() {
        return Ok(Some(a.clone()));
    }
    if !needed {
        return Ok(None);
    }
    // Only an address is kept: an API server that publishes none yet is asked again.
    let found = resolve(cfg).await?;
    if let Some(a) = &found
        && shared.home_api.set(a.clone()).is_err()
    {
        // Another worker resolved it meanwhile (the same address, the same IPAM answer).
        tracing::debug!("home API server resolved by another worker");
    }
    Ok(found)
}
