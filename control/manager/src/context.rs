//! What every controller shares: settings, clients, the identity manager, the launcher, the
//! metrics; and the small I/O helpers (server-side apply, the clock).

use std::{sync::Arc, time::Duration};

use control::{api::discovery::ClusterIdentity, offer::Percent};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{
    Api, Client, Resource,
    api::{Patch, PatchParams},
};
use liqo_auth::{client::AuthClient, url::Overrides};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{
    FIELD_MANAGER,
    error::{Error, kube as kerr},
    identity::Peers,
    launcher::Launcher,
    metrics::Metrics,
};

/// The controller-manager's configuration (its flags).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Liqo namespace.
    pub namespace: String,
    /// `--auth-service-address-override` / `--auth-service-port-override`.
    pub auth_overrides: Overrides,
    /// `--resource-sharing-percentage`.
    pub sharing: Percent,
    /// `--enable-incoming-peering`.
    pub enable_incoming: bool,
    /// `--resync-period`.
    pub resync: Duration,
    /// `--cluster-labels`: the labels our ResourceOffers carry (`spec.labels`), which the
    /// consumers' virtual nodes get and NamespaceOffloading selectors match.
    pub cluster_labels: std::collections::BTreeMap<String, String>,
}

impl Settings {
    /// The defaults of the flags.
    pub fn new(namespace: impl Into<String>) -> Self {
        Settings {
            namespace: namespace.into(),
            auth_overrides: Overrides::default(),
            sharing: Percent::new(30).expect("30 is a percentage"),
            enable_incoming: true,
            resync: Duration::from_secs(30),
            cluster_labels: Default::default(),
        }
    }
}

/// Shared by the controllers.
pub struct Context {
    /// Our apiserver.
    pub client: Client,
    /// The flags.
    pub settings: Settings,
    /// Our cluster.
    pub local: ClusterIdentity,
    /// Clients for the peers.
    pub peers: Peers,
    /// Auth client verifying TLS.
    pub auth_secure: AuthClient,
    /// Auth client skipping TLS verification (`insecureSkipTLSVerify`).
    pub auth_insecure: AuthClient,
    /// Virtual kubelets.
    pub launcher: Arc<dyn Launcher>,
    /// Counters.
    pub metrics: Metrics,
    /// The network manager (`None` without `--ipam-address`: then no network is built).
    pub network: Option<Arc<crate::network::Manager>>,
    /// When we last saw the gateway Lease renewed (our clock).
    pub gateway_lease: crate::gateway_lease::SharedObservations,
    /// Each peer's last refused (or unanswered) identity request.
    pub auth_failures:
        std::sync::Mutex<std::collections::HashMap<control::api::ClusterId, AuthFailure>>,
}

/// An identity request that failed: when, the condition it left (its message saying why and
/// when the next is), what was sent, and how many of that attempt failed in a row.
#[derive(Debug, Clone)]
pub struct AuthFailure {
    /// When.
    pub at: std::time::Instant,
    /// The condition it left.
    pub condition: control::conditions::NewCondition,
    /// What it was made with.
    pub attempt: Attempt,
    /// Failures of this attempt in a row (1 for the first).
    pub failures: u32,
}

/// What an identity request is made with: another ForeignCluster, auth URL or token is a new
/// attempt, sent at once (a corrected token is not left waiting for the retry period).
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// The ForeignCluster's UID.
    pub uid: Option<String>,
    /// Its auth URL.
    pub url: String,
    /// The peer's token we hold (compared in constant time).
    pub token: Option<control::identity::AuthToken>,
}

impl Context {
    /// A context.
    pub fn new(
        client: Client,
        settings: Settings,
        local: ClusterIdentity,
        launcher: Arc<dyn Launcher>,
        metrics: Metrics,
    ) -> Self {
        Context {
            client,
            settings,
            local,
            peers: Peers::default(),
            gateway_lease: Default::default(),
            auth_secure: AuthClient::new(false),
            auth_insecure: AuthClient::new(true),
            launcher,
            metrics,
            network: None,
            auth_failures: Default::default(),
        }
    }

    /// This context with the network manager.
    pub fn with_network(mut self, network: crate::network::Manager) -> Self {
        self.network = Some(Arc::new(network));
        self
    }

    /// The failed identity requests by peer.
    pub fn auth_failures(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<control::api::ClusterId, AuthFailure>>
    {
        // Inserts and removes only: a poisoned map is still consistent.
        self.auth_failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The auth client for a ForeignCluster's `insecureSkipTLSVerify`.
    pub fn auth(&self, insecure: bool) -> &AuthClient {
        if insecure {
            &self.auth_insecure
        } else {
            &self.auth_secure
        }
    }
}

/// `current` finalizers without `name`, then with it at the end when `add`.
pub fn with_finalizer(current: &[String], name: &str, add: bool) -> Vec<String> {
    let mut list: Vec<String> = current.iter().filter(|f| *f != name).cloned().collect();
    if add {
        list.push(name.to_owned());
    }
    list
}

/// The parameters of a merge patch, under our field manager (the fields it sets are ours).
pub fn merge_params() -> PatchParams {
    PatchParams {
        field_manager: Some(crate::FIELD_MANAGER.into()),
        ..PatchParams::default()
    }
}

/// Now, as the API's time.
pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Server-side applies an object (forced: the controller owns what it writes).
pub async fn apply<K>(api: &Api<K>, name: &str, object: &Value) -> Result<K, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(kerr(format!("apply {} {name}", K::kind(&()))))
}

/// Server-side applies a status (`{apiVersion, kind, status}`).
pub async fn apply_status<K>(api: &Api<K>, name: &str, status: &Value) -> Result<K, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let object = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .map_err(kerr(format!("apply status of {} {name}", K::kind(&()))))
}

/// Sets an object's finalizers to a new list, guarded by its resourceVersion.
pub async fn set_finalizers<K>(
    api: &Api<K>,
    name: &str,
    resource_version: Option<&str>,
    finalizers: Vec<String>,
) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": resource_version, "finalizers": finalizers},
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(kerr(format!("finalizers of {name}")))
}

/// A controller reference to an object (for `ownerReferences`).
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> Option<Value> {
    let meta = owner.meta();
    Some(serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "name": meta.name.as_ref()?,
        "uid": meta.uid.as_ref()?,
        "controller": true,
        "blockOwnerDeletion": true,
    }))
}

#[cfg(test)]
mod finalizer_tests {
    use super::with_finalizer;

    #[test]
    fn a_finalizer_is_added_once_and_removed_alone() {
        let cur = vec!["a".to_owned(), "x".to_owned(), "b".to_owned()];
        assert_eq!(with_finalizer(&cur, "x", true), ["a", "b", "x"]);
        assert_eq!(with_finalizer(&cur, "x", false), ["a", "b"]);
        assert_eq!(with_finalizer(&[], "x", true), ["x"]);
    }
}
