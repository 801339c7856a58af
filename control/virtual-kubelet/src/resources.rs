//! Resource reflection (§5 of the control-plane spec): the Services, EndpointSlices,
//! Ingresses, ConfigMaps, Secrets and ServiceAccounts of every namespace offloaded to the
//! provider, and its claims of class `liqo` bound on the virtual node, are copied into its remote namespace and kept equal; a local deletion deletes the
//! copy. One [`reflector::Reflector`] per kind (its workers from `--<kind>-reflection-workers`;
//! 0 turns the kind off), all following the NamespaceMaps' mapping that pod reflection
//! publishes. The decisions are `control::reflection`'s; this module reads, maps and writes.
//!
//! It never touches a remote object without the reflection labels (a Warning Event on the
//! local object says so), never watches the provider beyond the offloaded namespaces, and
//! never reflects a copy (with bidirectional peering copies would fight their sources).

pub mod endpoints;
pub mod error;
pub mod event;
pub mod io;
pub mod reflector;
mod sweep;
pub mod worker;

use std::sync::Arc;

use control::reflection::Kind;
use k8s_openapi::api::{
    core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service, ServiceAccount},
    discovery::v1::EndpointSlice,
    networking::v1::Ingress,
};
use kube::runtime::events::{Recorder, Reporter};
use tokio::{sync::watch::Receiver, task::JoinSet};

use crate::{VkConfig, namespaces::Mapping};

use self::{io::Io, reflector::Reflector};

/// Why resource reflection could not start.
#[derive(Debug, thiserror::Error)]
pub enum ResourcesError {
    /// The IPAM options are unusable.
    #[error("the IPAM client")]
    Ipam(#[source] ipam::service::client::ClientError),
}

/// One kind's reflector.
pub type Of<K> = Arc<Reflector<K, <K as Io>::Extra>>;

/// The reflectors that run, by kind.
pub struct Reflectors {
    /// Services.
    pub services: Option<Of<Service>>,
    /// EndpointSlices.
    pub slices: Option<Of<EndpointSlice>>,
    /// Ingresses.
    pub ingresses: Option<Of<Ingress>>,
    /// ConfigMaps.
    pub config_maps: Option<Of<ConfigMap>>,
    /// Secrets.
    pub secrets: Option<Of<Secret>>,
    /// ServiceAccounts.
    pub service_accounts: Option<Of<ServiceAccount>>,
    /// PersistentVolumeClaims of class `liqo` bound on the virtual node.
    pub claims: Option<Of<PersistentVolumeClaim>>,
}

fn make<K: Io>(cfg: &Arc<VkConfig>, recorder: &Recorder, extra: K::Extra) -> Option<Of<K>> {
    (workers::<K>(cfg) > 0).then(|| {
        let mut r = Reflector::new(cfg.clone(), recorder.clone(), extra);
        r.trim = K::trim_remote;
        Arc::new(r)
    })
}

/// The workers of kind `K`: as configured, but ConfigMaps always have one (for the root CA,
/// which the offloaded pods' projections name).
fn workers<K: Io>(cfg: &VkConfig) -> usize {
    let n = cfg.reflection.of(K::KIND);
    if K::KIND == Kind::ConfigMap {
        n.max(1)
    } else {
        n
    }
}

impl Reflectors {
    /// The reflectors of the kinds turned on.
    pub fn new(cfg: &Arc<VkConfig>) -> Result<Self, ResourcesError> {
        let recorder = Recorder::new(
            cfg.local.clone(),
            Reporter {
                controller: control::consts::reflection::FIELD_MANAGER.into(),
                instance: Some(cfg.node_name()),
            },
        );
        let services = make::<Service>(cfg, &recorder, io::Followers::default());
        let endpoints = endpoints::Endpoints::new(
            cfg.ipam.as_ref(),
            cfg.foreign.cluster_id.to_string(),
            control::consts::reflection::IPAM_HOLDER,
        )
        .map_err(ResourcesError::Ipam)?;
        let slices = services.as_ref().and_then(|s| {
            make::<EndpointSlice>(
                cfg,
                &recorder,
                io::Slices {
                    services: Some(s.clone()),
                    endpoints,
                },
            )
        });
        if let (Some(s), Some(e)) = (&services, &slices) {
            // The Services' reflector was made just above: its cell is empty, set here only.
            // Were it set, the slices would still be queued by that reflector: reported.
            if s.extra.slices.set(Arc::downgrade(e)).is_err() {
                tracing::warn!(
                    "the Services' reflector already follows an EndpointSlice reflector"
                );
            }
        }
        let config_maps = make::<ConfigMap>(cfg, &recorder, ()).map(|mut r| {
            if cfg.reflection.configmap == 0
                && let Some(r) = Arc::get_mut(&mut r)
            {
                r.only = Some(control::shadowpod::consumer::ROOT_CA_CONFIG_MAP);
            }
            r
        });
        Ok(Reflectors {
            services,
            slices,
            ingresses: make(cfg, &recorder, ()),
            config_maps,
            secrets: make(cfg, &recorder, ()),
            service_accounts: make(cfg, &recorder, ()),
            claims: make(cfg, &recorder, ()),
        })
    }

    async fn sync(&self, mapping: &Mapping) {
        fn one<K: Io>(r: &Option<Of<K>>, mapping: &Mapping) {
            if let Some(r) = r {
                r.sync(mapping);
            }
        }
        one(&self.services, mapping);
        if let Some(slices) = &self.slices {
            // The mappings of a namespace no longer offloaded are released.
            for ns in slices.sync(mapping) {
                slices.extra.endpoints.release_namespace(&ns).await;
            }
        }
        one(&self.ingresses, mapping);
        one(&self.config_maps, mapping);
        one(&self.secrets, mapping);
        one(&self.service_accounts, mapping);
        one(&self.claims, mapping);
    }

    fn spawn_workers(&self, tasks: &mut JoinSet<&'static str>) {
        fn one<K: Io>(r: &Option<Of<K>>, tasks: &mut JoinSet<&'static str>) {
            if let Some(r) = r {
                for _ in 0..workers::<K>(&r.cfg) {
                    tasks.spawn(worker::run(r.clone()));
                }
            }
        }
        one(&self.services, tasks);
        one(&self.slices, tasks);
        one(&self.ingresses, tasks);
        one(&self.config_maps, tasks);
        one(&self.secrets, tasks);
        one(&self.service_accounts, tasks);
        one(&self.claims, tasks);
    }

    /// The kinds reflected.
    pub fn kinds(&self) -> Vec<Kind> {
        Kind::ALL
            .into_iter()
            .filter(|k| match k {
                Kind::Service => self.services.is_some(),
                Kind::EndpointSlice => self.slices.is_some(),
                Kind::Ingress => self.ingresses.is_some(),
                Kind::ConfigMap => self.config_maps.is_some(),
                Kind::Secret => self.secrets.is_some(),
                Kind::ServiceAccount => self.service_accounts.is_some(),
                Kind::PersistentVolumeClaim => self.claims.is_some(),
            })
            .collect()
    }
}

/// Runs the reflectors, following `mapping`, until it closes (it ends with pod reflection);
/// once `listed` (the NamespaceMaps' first listing applied), sweeps the IPAM's endpoint
/// mappings no copy records.
pub async fn run(
    reflectors: Arc<Reflectors>,
    mut mapping: Receiver<Arc<Mapping>>,
    listed: Receiver<bool>,
) -> &'static str {
    let mut tasks = JoinSet::new();
    reflectors.spawn_workers(&mut tasks);
    // Aborted with the other tasks when this returns (the set is dropped).
    let mut sweeping = JoinSet::new();
    sweeping.spawn(sweep::run(
        reflectors.slices.clone(),
        listed,
        mapping.clone(),
    ));
    tracing::info!(kinds = ?reflectors.kinds(), "resource reflection started");
    loop {
        let current = mapping.borrow_and_update().clone();
        reflectors.sync(&current).await;
        tokio::select! {
            changed = mapping.changed() => if changed.is_err() { return "the NamespaceMap mapping" },
            Some(ended) = tasks.join_next() => return match ended {
                Ok(what) => what,
                Err(_) => "a resource reflection worker (panicked)",
            },
        }
    }
}
