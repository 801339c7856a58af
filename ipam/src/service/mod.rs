//! The `liqo-ipam` service: the [`crate::Ipam`] behind gRPC, persisted after every change;
//! [`server`] serves it (TLS, authentication, clean stop), [`client`] connects to it.

pub mod auth;
pub mod client;
mod grpc;
pub mod metrics;
pub mod server;

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
    /// The store failed; the change was rolled back.
    #[error("persisting the IPAM state")]
    Store(#[from] crate::store::StoreError),
}

struct Inner {
    ipam: Ipam,
    store: Box<dyn Store + Send>,
}

/// The shared state of the service.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Mutex<Inner>>,
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
            inner: Arc::new(Mutex::new(Inner { ipam, store })),
            metrics,
            managed: Arc::default(),
        })
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

    /// Reads the IPAM.
    pub fn read<T>(&self, f: impl FnOnce(&Ipam) -> T) -> T {
        f(&self.inner.lock().unwrap_or_else(|p| p.into_inner()).ipam)
    }

    /// Changes the IPAM with `f` and persists the result. If `f` fails nothing changed; if
    /// saving fails the change is undone, so memory and disk never disagree.
    pub fn mutate<T>(
        &self,
        f: impl FnOnce(&mut Ipam) -> Result<T, Error>,
    ) -> Result<T, ServiceError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let before = inner.ipam.clone();
        let out = match f(&mut inner.ipam) {
            Ok(out) => out,
            Err(e) => {
                // Whatever the operation did before failing is undone here too.
                inner.ipam = before;
                return Err(e.into());
            }
        };
        let state = inner.ipam.state();
        if state != before.state() {
            if let Err(e) = inner.store.save(&state) {
                inner.ipam = before;
                return Err(e.into());
            }
            self.metrics.observe(&inner.ipam);
        }
        Ok(out)
    }

    /// Sets the pools and reserved subnets `change` gives (the others stay) on the running
    /// IPAM, with the checks of the runtime changes; all or nothing, saved.
    pub fn reconfigure(&self, change: &Overrides) -> Result<(), ServiceError> {
        self.mutate(|ipam| {
            let mut wanted = ipam.config().clone();
            if let Some(p) = &change.pools {
                wanted.pools.clone_from(p);
            }
            if let Some(r) = &change.reserved {
                wanted.reserved.clone_from(r);
            }
            ipam.reconfigure(wanted)
        })
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
