//! What every controller shares: settings, clients, the identity manager, the launcher, the
//! metrics, the network manager's state and the gateway Lease's observations. Only types
//! defined below the controllers; the small I/O helpers are [`crate::kit`].

use std::{sync::Arc, time::Duration};

use control::{
    api::discovery::ClusterIdentity,
    offer::{OfferPod, Percent},
};
use kube::{
    Client,
    runtime::reflector::{Store, store::Writer},
};
use liqo_auth::{client::AuthClient, url::Overrides};

use crate::{identity::Peers, launcher::Launcher, metrics::Metrics};

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
    /// `--enable-storage` with `--storage-namespace` and `--real-storage-class-name`: the
    /// storage fabric's provisioner (its reclaim policy is read from the `liqo` class); none:
    /// off.
    pub storage: Option<control::storage::provision::Settings>,
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
            storage: None,
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
    pub gateway_lease: crate::gateway_lease::observations::SharedObservations,
    /// Each peer's last refused (or unanswered) identity request.
    pub auth_failures:
        std::sync::Mutex<std::collections::HashMap<control::api::ClusterId, AuthFailure>>,
    /// Every pod as the ResourceOffer reads it (`control::offer::OfferPod`), fed by the watch
    /// that also triggers the offers' recomputation (see [`Context::take_offer_pods_writer`]):
    /// the offer is computed from here, not from a listing of every pod.
    pub offer_pods: Store<OfferPod>,
    offer_pods_writer: std::sync::Mutex<Option<Writer<OfferPod>>>,
    /// Whether [`Context::offer_pods`] has listed, for concurrent waiters.
    offer_pods_ready: liqo_auth::ready::Listed,
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
        let (offer_pods, writer) = kube::runtime::reflector::store();
        Context {
            offer_pods_ready: liqo_auth::ready::shared(&offer_pods),
            offer_pods,
            offer_pods_writer: std::sync::Mutex::new(Some(writer)),
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

    /// Waits until [`Context::offer_pods`] has listed (`false`: its watch ended before). Any
    /// number of reconciles may wait at once (`liqo_auth::ready`: kube's `wait_until_ready`
    /// wakes only one of them).
    pub async fn offer_pods_listed(&self) -> bool {
        self.offer_pods_ready.clone().await
    }

    /// The writer of [`Context::offer_pods`], once (the watch that feeds it takes it; `None`
    /// after).
    pub fn take_offer_pods_writer(&self) -> Option<Writer<OfferPod>> {
        self.offer_pods_writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
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
