//! The `liqo-ipam` service: the [`crate::Ipam`] behind gRPC, persisted after every change;
//! [`server`] serves it (TLS, authentication, clean stop), with its certificate and token from
//! files or from a Secret it keeps itself ([`tls_secret`]); [`client`] connects to it.

pub mod auth;
pub mod client;
mod grpc;
pub mod metrics;
pub mod server;
pub mod tls_secret;

use std::sync::{Arc, Mutex};

use crate::{Config, Error, Ipam, store::Store};

/// The generated gRPC types (package `liqo.ipam.v1`).
#[allow(
    missing_docs,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    reason = "generated code"
)]
pub mod proto {
    tonic::include_proto!("liqo.ipam.v1");
}

/// Why the service could not start or apply a change.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The IPAM refused.
    #[error(transparent)]
    Ipam(#[from] Error),
    /// The store failed (it names the file or the ConfigMap); a change was rolled back.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The runtime is shutting down: the change was not applied.
    #[error("the service is stopping")]
    Stopped,
}

/// The shared state of the service.
///
/// Changes take the store's lock, apply to a copy of the IPAM, save it and only then publish
/// it: changes are saved one at a time, a failed save leaves the IPAM as it was, and reads
/// (which take the IPAM's lock only to look) never wait for a save nor see a change that is not
/// saved.
#[derive(Clone)]
pub struct Service {
    /// The IPAM as last saved.
    ipam: Arc<Mutex<Ipam>>,
    /// Held by a change from its start to the end of its save.
    store: Arc<Mutex<Box<dyn Store + Send>>>,
    /// Where the state is kept ([`Store::describe`]).
    location: Arc<str>,
    metrics: Arc<metrics::Metrics>,
    managed: Arc<Mutex<Managed>>,
}

/// Who sets the pools and the reserved subnets when not the API (a flag, or the watched config
/// file): a change through the API would be replaced from there at the next restart or file
/// change, so the API refuses it, naming the source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Managed {
    /// The source of the pools, if any.
    pub pools: Option<String>,
    /// The source of the reserved subnets, if any.
    pub reserved: Option<String>,
}

/// What to do with pools and reserved subnets found in the stored state at start-up.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Replace the stored pools with these.
    pub pools: Option<Vec<ipnet::Ipv4Net>>,
    /// Replace the stored reserved subnets with these.
    pub reserved: Option<Vec<ipnet::Ipv4Net>>,
}

impl Service {
    /// Opens the service: restores the stored state if there is one and applies `config` to it
    /// (local CIDRs may change only without peers; pools and reserved subnets only when given
    /// in `overrides`), else starts fresh from `config`. The result is saved before serving.
    pub fn open(
        config: Config,
        overrides: Overrides,
        mut store: Box<dyn Store + Send>,
    ) -> Result<Service, ServiceError> {
        let ipam = match store.load()? {
            Some(state) => {
                let mut ipam = Ipam::restore(state)?;
                let mut wanted = ipam.config().clone();
                wanted.pod_cidr = config.pod_cidr;
                wanted.service_cidr = config.service_cidr;
                wanted.external_cidr = config.external_cidr;
                if let Some(p) = overrides.pools {
                    wanted.pools = p;
                }
                if let Some(r) = overrides.reserved {
                    wanted.reserved = r;
                }
                ipam.reconfigure(wanted)?;
                ipam
            }
            None => Ipam::new(config)?,
        };
        store.save(&ipam.state())?;
        let metrics = Arc::new(metrics::Metrics::default());
        metrics.observe(&ipam);
        Ok(Service {
            ipam: Arc::new(Mutex::new(ipam)),
            location: store.describe().into(),
            store: Arc::new(Mutex::new(store)),
            metrics,
            managed: Arc::default(),
        })
    }

    /// Where the state is kept: `file <path>`, `configmap <namespace>/<name>`.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Records who sets the pools and reserved subnets (see [`Managed`]).
    pub fn set_managed(&self, managed: Managed) {
        *self.managed.lock().unwrap_or_else(|p| p.into_inner()) = managed;
    }

    /// Who sets the pools and reserved subnets.
    pub fn managed(&self) -> Managed {
        self.managed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Reads the IPAM as last saved (never waits for a save).
    pub fn read<T>(&self, f: impl FnOnce(&Ipam) -> T) -> T {
        f(&self.ipam.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Changes the IPAM with `f` and persists the result; the change is seen (and the call
    /// returns `Ok`) only once saved. If `f` fails nothing changed; if saving fails the IPAM
    /// stays as it was, so memory and the store never disagree. It blocks while saving: from
    /// async code use [`Service::mutate_async`].
    pub fn mutate<T>(
        &self,
        f: impl FnOnce(&mut Ipam) -> Result<T, Error>,
    ) -> Result<T, ServiceError> {
        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        // Only a change (holding the store's lock) replaces the IPAM: this copy is current.
        let (mut next, before) = self.read(|i| (i.clone(), i.state()));
        // On failure, whatever `f` did to the copy is dropped with it.
        let out = f(&mut next)?;
        let state = next.state();
        if state != before {
            store.save(&state)?;
            self.metrics.observe(&next);
        }
        *self.ipam.lock().unwrap_or_else(|p| p.into_inner()) = next;
        Ok(out)
    }

    /// [`Service::mutate`] on the blocking pool, so that a slow store never holds a runtime
    /// worker (nor the calls and tasks waiting for one).
    pub async fn mutate_async<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Ipam) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let service = self.clone();
        match tokio::task::spawn_blocking(move || service.mutate(f)).await {
            Ok(r) => r,
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // Cancelled: only when the runtime shuts down, before it ran.
                Err(_) => Err(ServiceError::Stopped),
            },
        }
    }

    /// Sets the pools and reserved subnets `change` gives (the others stay) on the running
    /// IPAM, with the checks of the runtime changes; all or nothing, saved.
    pub fn reconfigure(&self, change: &Overrides) -> Result<(), ServiceError> {
        self.mutate(|ipam| reconfigured(ipam, change))
    }

    /// [`Service::reconfigure`] off the runtime's workers.
    pub async fn reconfigure_async(&self, change: Overrides) -> Result<(), ServiceError> {
        self.mutate_async(move |ipam| reconfigured(ipam, &change))
            .await
    }

    /// The metrics of this service.
    pub fn metrics(&self) -> Arc<metrics::Metrics> {
        Arc::clone(&self.metrics)
    }

    /// The gRPC server for this service, every call checked by `auth` first.
    pub fn grpc_with(
        &self,
        auth: auth::Authenticator,
    ) -> tonic::service::interceptor::InterceptedService<
        proto::ipam_server::IpamServer<Service>,
        auth::Authenticator,
    > {
        proto::ipam_server::IpamServer::with_interceptor(self.clone(), auth)
    }
}

/// `ipam` with the pools and reserved subnets `change` gives.
fn reconfigured(ipam: &mut Ipam, change: &Overrides) -> Result<(), Error> {
    let mut wanted = ipam.config().clone();
    if let Some(p) = &change.pools {
        wanted.pools.clone_from(p);
    }
    if let Some(r) = &change.reserved {
        wanted.reserved.clone_from(r);
    }
    ipam.reconfigure(wanted)
}

#[cfg(test)]
mod tests;
