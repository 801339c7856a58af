//! What a kind needs from the outside around its decision: nothing for most; for an
//! EndpointSlice, its Service's reflection (from the Service reflector's stores) and its
//! addresses mapped through the IPAM (only for a slice to be reflected), released once its
//! copy is gone; for a Service, its slices queued again after it is handled (they follow it).

use std::{
    collections::BTreeMap,
    sync::{Arc, OnceLock, Weak},
};

use control::{
    reflection::{Inputs, Reflect, ServiceState, endpointslice, meta, ours},
    shadowpod::token::POD_LABEL,
};
use k8s_openapi::api::{
    core::v1::{
        ConfigMap, ObjectReference, PersistentVolumeClaim, Secret, Service, ServiceAccount,
    },
    discovery::v1::EndpointSlice,
    networking::v1::Ingress,
};
use kube::runtime::{events::EventType, reflector::ObjectRef};

use super::{endpoints::Endpoints, error::HandleError, reflector::Reflector};
use crate::reflection::key::Key;

/// A kind's needs besides its own stores.
pub trait Io: Reflect {
    /// What the reflector holds for them.
    type Extra: Send + Sync + 'static;

    /// The inputs of the decision about `local`, whose remote name holds `remote`.
    fn inputs(
        _r: &Reflector<Self, Self::Extra>,
        _key: &Key,
        _local: Option<&Self>,
        _remote: Option<&Self>,
    ) -> impl Future<Output = Result<Inputs, HandleError>> + Send {
        async { Ok(Inputs::default()) }
    }

    /// The copy of `key` is gone (or was never made; `copy`: what it was): release what it
    /// held.
    fn released(
        _r: &Reflector<Self, Self::Extra>,
        _key: &Key,
        _copy: Option<&Self>,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The copy of `key` is as last decided (created, applied, or already equal): what it
    /// no longer holds is released.
    fn written(_r: &Reflector<Self, Self::Extra>, _key: &Key) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// `key` was handled.
    fn handled(_r: &Reflector<Self, Self::Extra>, _key: &Key) {}

    /// What the remote store keeps of `remote`: all of it unless the kind says.
    fn trim_remote(_remote: &mut Self) {}
}

/// What Services need: the EndpointSlice reflector (set once both exist).
#[derive(Default)]
pub struct Followers {
    /// The slices' reflector.
    pub slices: OnceLock<Weak<Reflector<EndpointSlice, Slices>>>,
}

impl Io for Service {
    type Extra = Followers;

    fn handled(r: &Reflector<Self, Followers>, key: &Key) {
        let Some(slices) = r.extra.slices.get().and_then(Weak::upgrade) else {
            return;
        };
        let Some(pair) = slices.pair(&key.namespace) else {
            return;
        };
        for s in pair.local.state() {
            if endpointslice::service_of(&s) == Some(key.name.as_str())
                && let Some(name) = s.metadata.name.clone()
            {
                slices.queue.add(Key {
                    namespace: key.namespace.clone(),
                    name,
                });
            }
        }
    }
}
impl Io for Ingress {
    type Extra = ();
}
impl Io for ConfigMap {
    type Extra = ();
}
impl Io for Secret {
    type Extra = ();

    /// An offloaded pod's token Secret (pod reflection's, never a copy) without its token: its
    /// name is still seen (a local Secret of that name is reported as colliding), no token
    /// kept in memory.
    fn trim_remote(remote: &mut Self) {
        if remote
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(POD_LABEL))
        {
            remote.data = None;
            remote.string_data = None;
        }
    }
}
impl Io for ServiceAccount {
    type Extra = ();
}

/// A claim's copy takes the class the offer names as its default (read from the accepted offer
/// at each decision: claims are few, the offer may change), or keeps the class it was made
/// with (immutable). Once a copy is deleted for a claim marked for deletion, an Event on the
/// claim says so (`liqoctl ... --delete-remote-volumes` waits for it).
impl Io for PersistentVolumeClaim {
    type Extra = ();

    async fn inputs(
        r: &Reflector<Self, ()>,
        key: &Key,
        local: Option<&Self>,
        remote: Option<&Self>,
    ) -> Result<Inputs, HandleError> {
        if local.is_none() {
            return Ok(Inputs::default());
        }
        if let Some(class) = remote.and_then(|c| c.spec.as_ref()?.storage_class_name.clone()) {
            return Ok(Inputs {
                storage_class: Some(class),
                ..Inputs::default()
            });
        }
        let cfg = &r.cfg;
        let offers: kube::Api<control::api::sharing::ResourceOffer> =
            kube::Api::namespaced(cfg.local.clone(), &cfg.tenant_namespace);
        let offer = offers
            .get_opt(&cfg.offer)
            .await
            .map_err(|source| HandleError::Kube {
                what: format!(
                    "get ResourceOffer {}/{} (the class of the copy of {key})",
                    cfg.tenant_namespace, cfg.offer
                ),
                source,
            })?;
        Ok(Inputs {
            storage_class: offer.and_then(|o| {
                o.spec
                    .storage_classes
                    .into_iter()
                    .find(|c| c.default)
                    .map(|c| c.storage_class_name)
            }),
            ..Inputs::default()
        })
    }

    /// The copy of a claim that is going (marked for deletion, or gone) deleted, or such a
    /// claim of ours with no copy there: an Event on the claim says so (referenced by the
    /// copy's record of its UID when it is gone already).
    async fn released(r: &Reflector<Self, ()>, key: &Key, copy: Option<&Self>) {
        let local = r.pair(&key.namespace).and_then(|p| {
            p.local
                .get(&ObjectRef::new(&key.name).within(&key.namespace))
        });
        if local
            .as_ref()
            .is_some_and(|l| l.metadata.deletion_timestamp.is_none())
        {
            return;
        }
        let note = match (copy, local.as_deref()) {
            (Some(copy), _) => format!(
                "its copy on {} ({}/{}) was deleted: the data there goes once the pods there are \
                 gone",
                r.cfg.foreign.cluster_id,
                copy.metadata.namespace.as_deref().unwrap_or_default(),
                copy.metadata.name.as_deref().unwrap_or_default()
            ),
            (None, Some(l))
                if control::storage::is_virtual(l)
                    && control::storage::selected_node(l) == Some(r.cfg.node_name().as_str()) =>
            {
                format!("it has no copy on {}", r.cfg.foreign.cluster_id)
            }
            (None, _) => return,
        };
        let reference = match (local.as_deref(), copy) {
            (Some(l), _) => kube::Resource::object_ref(l, &()),
            (None, Some(copy)) => ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: Some(key.namespace.clone()),
                name: Some(key.name.clone()),
                uid: control::reflection::meta::local_uid(&copy.metadata).map(str::to_owned),
                ..ObjectReference::default()
            },
            (None, None) => return,
        };
        super::event::publish(
            &r.recorder,
            &reference,
            EventType::Normal,
            control::consts::storage::REASON_COPY_DELETED,
            note,
        )
        .await;
    }
}

/// What EndpointSlices need: the Service reflector (absent when Services are not reflected)
/// and the IPAM.
pub struct Slices {
    /// The Service reflector.
    pub services: Option<Arc<Reflector<Service, Followers>>>,
    /// The addresses' mappings.
    pub endpoints: Endpoints,
}

impl Io for EndpointSlice {
    type Extra = Slices;

    async fn inputs(
        r: &Reflector<Self, Slices>,
        key: &Key,
        local: Option<&Self>,
        remote: Option<&Self>,
    ) -> Result<Inputs, HandleError> {
        let (Some(local), Some(pair)) = (local, r.pair(&key.namespace)) else {
            return Ok(Inputs::default());
        };
        let ctx = r.ctx(&key.namespace, &pair.remote);
        let service = service_state(r, key, local);
        let inputs = Inputs {
            service,
            ..Inputs::default()
        };
        // Mapped only for a slice to be reflected here: not skipped, its Service reflected,
        // its remote name free or ours.
        let skipped = meta::skip(&local.metadata).is_some()
            || <EndpointSlice as Reflect>::skip(local, &ctx, &inputs).is_some();
        if skipped || remote.is_some_and(|c| !ours(c, &ctx)) {
            return Ok(inputs);
        }
        let recorded = remote.map(recorded).unwrap_or_default();
        let addresses = r
            .extra
            .endpoints
            .map(key, &endpointslice::addresses(local, &ctx), &recorded)
            .await
            .map_err(HandleError::Endpoint)?;
        // Unoffloaded (or mapped elsewhere) meanwhile, its namespace's mappings released
        // already: what this call mapped is released too.
        if r.pair(&key.namespace)
            .is_none_or(|now| !Arc::ptr_eq(&now, &pair))
        {
            r.extra.endpoints.release(key, &BTreeMap::new()).await;
            return Ok(Inputs::default());
        }
        Ok(Inputs {
            addresses,
            service,
            ..Inputs::default()
        })
    }

    async fn written(r: &Reflector<Self, Slices>, key: &Key) {
        r.extra.endpoints.written(key).await;
    }

    async fn released(r: &Reflector<Self, Slices>, key: &Key, copy: Option<&Self>) {
        let recorded = copy.map(recorded).unwrap_or_default();
        r.extra.endpoints.release(key, &recorded).await;
    }
}

/// What a copy records as mapped; an unreadable record is logged and counts as none (its
/// addresses are then the startup sweep's: it stops until the record is fixed).
fn recorded(copy: &EndpointSlice) -> BTreeMap<String, String> {
    endpointslice::recorded(copy).unwrap_or_else(|e| {
        tracing::warn!(
            copy = copy.metadata.name.as_deref().unwrap_or_default(),
            error = %e,
            "a reflected EndpointSlice's record of its addresses does not read"
        );
        BTreeMap::new()
    })
}

/// Where the slice's Service stands (`control::reflection::endpointslice::service_state`).
fn service_state(
    r: &Reflector<EndpointSlice, Slices>,
    key: &Key,
    slice: &EndpointSlice,
) -> ServiceState {
    let (Some(services), Some(name)) = (&r.extra.services, endpointslice::service_of(slice)) else {
        return ServiceState::NotReflected;
    };
    let Some(pair) = services.pair(&key.namespace) else {
        return ServiceState::NotReflected;
    };
    let local = pair.local.get(&ObjectRef::new(name).within(&key.namespace));
    let remote = pair
        .remote_objects
        .get(&ObjectRef::new(name).within(&pair.remote));
    let ctx = services.ctx(&key.namespace, &pair.remote);
    endpointslice::service_state(local.as_deref(), remote.as_deref(), &ctx, pair.ready())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(labels: serde_json::Value) -> Secret {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "liqo-token-web-1", "labels": labels},
            "data": {"token": "dG9r"},
            "stringData": {"namespace": "demo"},
        }))
        .expect("a Secret")
    }

    #[test]
    fn the_remote_store_keeps_no_token_of_an_offloaded_pod() {
        let mut token = secret(serde_json::json!({ POD_LABEL: "web-1" }));
        Secret::trim_remote(&mut token);
        assert_eq!((token.data, token.string_data), (None, None));
        assert_eq!(token.metadata.name.as_deref(), Some("liqo-token-web-1"));
        let mut other = secret(serde_json::json!({"app": "web"}));
        Secret::trim_remote(&mut other);
        assert!(other.data.is_some() && other.string_data.is_some());
    }
}
