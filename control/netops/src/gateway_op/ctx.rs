//! The gateway operator's settings and state: its client, the key as it knows it
//! ([`KeyState`]), its metrics, and the IPAM's endpoint mappings (asked each reconcile, the last
//! answer kept).

use std::time::Duration;

use kube::{
    Client,
    runtime::events::{Recorder, Reporter},
};
use liqo_gateway_api::config::File;
use liqo_types::PublicKey;

use control::network::gateway::Endpoints;

use crate::{error::OpError, metrics::Metrics, runner::Dataplane};

/// The field manager (and program) name.
pub const MANAGER: &str = "liqo-gateway-operator";

/// What the operator is told.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Liqo namespace (Secrets, Lease).
    pub namespace: String,
    /// The node the gateway runs on.
    pub node_name: String,
    /// The gateway's fixed settings (no peers).
    pub base: File,
    /// The IPAM service, for the endpoint mappings (checked: [`crate::cli::Ipam::options`]).
    pub ipam: Option<ipam::service::client::ClientOptions>,
    /// The data plane.
    pub dataplane: Dataplane,
    /// How long a deleted TunnelEndpoint waits for a gateway that cannot be read or refuses its
    /// file before its finalizer is released anyway (with a Warning Event).
    pub release_grace: Duration,
}

/// The operator's state.
pub struct Ctx {
    /// Its client.
    pub client: Client,
    /// Its settings.
    pub settings: Settings,
    /// The gateway's key.
    pub key: std::sync::Mutex<KeyState>,
    /// Its metrics.
    pub metrics: Metrics,
    ipam: tokio::sync::Mutex<Option<ipam::service::client::Client>>,
    /// The IPAM's answer last read: kept while the IPAM cannot be asked.
    pub(super) last_endpoints: std::sync::Mutex<Option<Endpoints>>,
    pub(super) recorder: Recorder,
}

impl Ctx {
    /// A context; `public_key` is the key the gateway is to run, `published` the one
    /// `wireguard-pubkey` holds (published by the first reconcile that sees the gateway run it).
    pub fn new(
        client: Client,
        settings: Settings,
        public_key: PublicKey,
        published: Option<PublicKey>,
        metrics: Metrics,
    ) -> Ctx {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: MANAGER.into(),
                instance: Some(settings.node_name.clone()),
            },
        );
        Ctx {
            recorder,
            client,
            settings,
            key: std::sync::Mutex::new(KeyState {
                current: public_key,
                published,
            }),
            metrics,
            ipam: tokio::sync::Mutex::new(None),
            last_endpoints: std::sync::Mutex::new(None),
        }
    }

    pub(super) async fn endpoints(&self) -> Result<Endpoints, OpError> {
        let Some(opts) = &self.settings.ipam else {
            return Ok(Endpoints::default());
        };
        let mut guard = self.ipam.lock().await;
        let client = match guard.as_mut() {
            Some(c) => c,
            None => {
                let c = ipam::service::client::connect(opts)
                    .await
                    .map_err(|source| OpError::IpamConnect {
                        address: opts.server.clone(),
                        source,
                    })?;
                guard.insert(c)
            }
        };
        match client.list(ipam::service::proto::Empty {}).await {
            Ok(l) => super::ipam::endpoints_of(&l.into_inner()).map_err(OpError::IpamAnswer),
            Err(s) => {
                // Connect again next time.
                *guard = None;
                Err(OpError::IpamCall(s.message().to_owned()))
            }
        }
    }
}

/// The gateway's key, as the operator knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyState {
    /// The public half of the key the gateway is to run (written to its key file).
    pub current: PublicKey,
    /// The public key `wireguard-pubkey` holds.
    pub published: Option<PublicKey>,
}
