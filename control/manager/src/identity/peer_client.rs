//! The identity manager ([`Peers`]): a kube client for each peer ([`PeerClient`]), built from
//! its signed identity Secret and cached until the Secret changes; every one with timeouts, so
//! that a peer that accepts and never answers holds nothing forever.

use std::{collections::HashMap, sync::Mutex};

use control::api::ClusterId;
use kube::{Client, Config, config::KubeConfigOptions};

use super::secret::{IdentityError, find, kubeconfig, state};
use control::peering::fc::IdentityState;

pub use liqo_auth::peer_client::{
    PEER_CONNECT_TIMEOUT, PEER_READ_TIMEOUT, PEER_WATCH_READ_TIMEOUT, PeerClient, peer_configs,
};

/// The identity manager: a client per peer, cached by the identity Secret's UID and
/// resourceVersion.
#[derive(Default)]
pub struct Peers {
    cache: Mutex<HashMap<ClusterId, (String, PeerClient)>>,
}

impl Peers {
    /// The client for a peer, from its signed identity Secret in our tenant namespace; `None`
    /// while we hold no signed identity.
    pub async fn client(
        &self,
        local: &Client,
        tenant_namespace: &str,
        peer: &ClusterId,
    ) -> Result<Option<PeerClient>, IdentityError> {
        let Some(secret) = find(local, tenant_namespace, peer).await? else {
            return Ok(None);
        };
        if !matches!(state(Some(&secret)), IdentityState::Signed { .. }) {
            return Ok(None);
        }
        let version = format!(
            "{}/{}",
            secret.metadata.uid.as_deref().unwrap_or_default(),
            secret
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or_default()
        );
        if let Some((v, client)) = self.lock().get(peer)
            && *v == version
        {
            return Ok(Some(client.clone()));
        }
        let name = secret.metadata.name.clone().unwrap_or_default();
        let config =
            Config::from_custom_kubeconfig(kubeconfig(&secret)?, &KubeConfigOptions::default())
                .await
                .map_err(|source| IdentityError::Config {
                    secret: name.clone(),
                    source,
                })?;
        let mut config = config;
        liqo_auth::user_agent::set(
            &mut config,
            "liqo-controller-manager",
            env!("CARGO_PKG_VERSION"),
        );
        let client =
            PeerClient::from_config(config, liqo_auth::rate::DEFAULT).map_err(|source| {
                IdentityError::Client {
                    secret: name.clone(),
                    source,
                }
            })?;
        self.lock().insert(peer.clone(), (version, client.clone()));
        Ok(Some(client))
    }

    /// Forgets a peer's client.
    pub fn forget(&self, peer: &ClusterId) {
        self.lock().remove(peer);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ClusterId, (String, PeerClient)>> {
        // A panic while holding the lock leaves a consistent map (inserts and removes only).
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}
