//! The network manager's state and settings: its flags ([`Config`]), the IPAM client, the
//! Event recorder and the per-peer retry bookkeeping ([`Manager`]), and its names and limits.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use ipam::service::client::{Client as IpamClient, ClientError, ClientOptions};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::{Recorder, Reporter};

/// The controller's name in metrics and logs.
pub const NAME: &str = "network";

/// The reason of the Warning Event on a peer's NetworkConfig we refused.
pub const REASON_REFUSED: &str = "NetworkConfigRefused";

/// The reason of the Warning Event on a ForeignCluster whose ranges were released after the
/// grace, with its network objects still present.
pub const REASON_RELEASED_AFTER_GRACE: &str = "ReleasedAfterGrace";

/// The default of `--network-release-grace`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(300);

/// The network manager's flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// How to reach `liqo-ipam` (`--ipam-address`, and its TLS and token files).
    pub ipam: ClientOptions,
    /// `--gateway-address-override`, `--gateway-port-override`.
    pub gateway: control::network::endpoint::Overrides,
    /// `--network-release-grace`: how long a teardown waits for the peer (and the operators)
    /// before it releases the IPAM ranges anyway.
    pub grace: Duration,
}

/// The network manager's state: the IPAM client, the Event recorder, the retry counts.
pub struct Manager {
    /// Its flags.
    pub config: Config,
    pub(super) ipam: IpamClient,
    pub(super) recorder: Recorder,
    failures: Mutex<HashMap<String, u32>>,
    /// Per ForeignCluster, why we last could not announce ourselves (logged once).
    waiting: Mutex<HashMap<String, String>>,
    /// Per ForeignCluster, since when its reconciles fail on the IPAM.
    ipam_down: Mutex<HashMap<String, Timestamp>>,
}

/// How long one call to `liqo-ipam` may take.
pub const IPAM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Manager {
    /// A manager whose IPAM connection is made on first use (and again after a failure), so
    /// that it starts before `liqo-ipam` serves.
    pub fn new(client: kube::Client, config: Config) -> Result<Self, ClientError> {
        let prepared = config.ipam.prepare()?;
        // Every call has a deadline: an IPAM that accepts and never answers fails the
        // reconcile (which backs off) instead of holding it.
        let channel = prepared
            .endpoint
            .clone()
            .timeout(IPAM_TIMEOUT)
            .connect_lazy();
        let ipam = prepared.client(channel);
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: crate::FIELD_MANAGER.into(),
                instance: None,
            },
        );
        Ok(Manager {
            config,
            ipam,
            recorder,
            failures: Mutex::new(HashMap::new()),
            waiting: Mutex::new(HashMap::new()),
            ipam_down: Mutex::new(HashMap::new()),
        })
    }

    pub(super) fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        // Inserts and removes only: a poisoned map is still consistent.
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The delay before retrying `name` after one more failure: 2 s, doubling up to
    /// [`crate::kit::MAX_BACKOFF`].
    pub fn backoff(&self, name: &str) -> Duration {
        let mut f = self.failures();
        let n = f.entry(name.to_owned()).or_insert(0);
        *n = n.saturating_add(1);
        crate::kit::backoff(*n)
    }

    /// Records why `name` waits; whether that is new (then it is logged).
    pub(super) fn waiting(&self, name: &str, why: &str) -> bool {
        self.waits()
            .insert(name.to_owned(), why.to_owned())
            .as_deref()
            != Some(why)
    }

    /// `name` no longer waits.
    pub(super) fn announced(&self, name: &str) {
        self.waits().remove(name);
    }

    pub(super) fn waits(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        // Inserts and removes only: a poisoned map is still consistent.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn succeeded(&self, name: &str) {
        self.failures().remove(name);
        self.ipam_down().remove(name);
    }

    pub(super) fn ipam_down(&self) -> std::sync::MutexGuard<'_, HashMap<String, Timestamp>> {
        // Inserts and removes only: a poisoned map is still consistent.
        self.ipam_down.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Since when `name`'s reconciles fail on the IPAM (`now` if this is the first).
    pub(super) fn ipam_failed(&self, name: &str, now: Timestamp) -> Timestamp {
        *self.ipam_down().entry(name.to_owned()).or_insert(now)
    }

    /// `name` is gone: nothing kept about it.
    pub(super) fn forget(&self, name: &str) {
        self.failures().remove(name);
        self.waits().remove(name);
        self.ipam_down().remove(name);
    }
}

/// The shared handle the controller runs with.
pub type Shared = Arc<Manager>;
