//! The startup sweep of the IPAM's endpoint mappings: once the NamespaceMaps are listed, the
//! holds of this virtual kubelet for its provider that no EndpointSlice copy records and no
//! slice of this process uses are dropped (a mapping taken just before a crash, before its
//! copy recorded it; the copies of a namespace unoffloaded while nobody ran). A failure is
//! retried with a backoff; the sweep never drops another holder's hold.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use control::{
    consts::reflection::{ENDPOINTSLICE_MANAGED_BY, ENDPOINTSLICE_MANAGER, ORIGIN},
    reflection::endpointslice,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, api::ListParams};
use tokio::sync::watch::Receiver;

use super::{endpoints::EndpointError, io::Slices, reflector::Reflector};
use crate::{VkConfig, namespaces::Mapping};

/// The first retry's delay; doubled up to [`MAX_BACKOFF`].
const BACKOFF: Duration = Duration::from_secs(2);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The local addresses the copies of our slices on the provider record, in the remote
/// namespaces of `mapping`.
async fn recorded(cfg: &VkConfig, mapping: &Mapping) -> Result<BTreeSet<String>, EndpointError> {
    let cluster = cfg.foreign.cluster_id.to_string();
    let selector = format!(
        "{ENDPOINTSLICE_MANAGED_BY}={ENDPOINTSLICE_MANAGER},{ORIGIN}={}",
        cfg.home.cluster_id
    );
    let mut out = BTreeSet::new();
    for remote in mapping.values() {
        let api: Api<EndpointSlice> = Api::namespaced(cfg.remote.api.clone(), remote);
        let copies = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| EndpointError::Copies {
                cluster: cluster.clone(),
                source,
            })?;
        for copy in copies {
            let addresses =
                endpointslice::recorded(&copy).map_err(|source| EndpointError::Recorded {
                    cluster: cluster.clone(),
                    namespace: remote.clone(),
                    name: copy.metadata.name.clone().unwrap_or_default(),
                    source,
                })?;
            out.extend(addresses.into_keys());
        }
    }
    Ok(out)
}

/// Sweeps once the NamespaceMaps are listed (`listed` true), retrying until it succeeds.
pub(super) async fn run(
    slices: Option<Arc<Reflector<EndpointSlice, Slices>>>,
    mut listed: Receiver<bool>,
    mapping: Receiver<Arc<Mapping>>,
) {
    let Some(slices) = slices else {
        return;
    };
    if listed.wait_for(|l| *l).await.is_err() {
        // The NamespaceMap watch ended before its first listing: reflection ends with it.
        tracing::debug!("no NamespaceMap listing: no sweep");
        return;
    }
    let mut delay = BACKOFF;
    loop {
        let current = mapping.borrow().clone();
        let cfg = &slices.cfg;
        match slices
            .extra
            .endpoints
            .sweep(|| recorded(cfg, &current))
            .await
        {
            Ok(dropped) => {
                tracing::info!(
                    dropped = dropped.len(),
                    addresses = ?dropped,
                    "endpoint mappings no copy records swept"
                );
                return;
            }
            Err(e) => {
                tracing::warn!(error = %liqo_types::chain(&e), retry_in = ?delay, "sweeping the endpoint mappings");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_BACKOFF);
            }
        }
    }
}
