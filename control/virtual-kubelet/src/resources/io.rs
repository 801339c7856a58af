//! What a kind needs from the outside before its decision, and after a copy is gone: nothing
//! for most; for an EndpointSlice, its Service's reflection (from the Service reflector's
//! stores) and its addresses mapped through the IPAM, released once the copy is gone.

use std::sync::Arc;

use control::reflection::{
    Inputs, Reflect, ServiceState, Skip, endpointslice, meta::skip as meta_skip,
};
use k8s_openapi::api::{
    core::v1::{ConfigMap, Secret, Service, ServiceAccount},
    discovery::v1::EndpointSlice,
    networking::v1::Ingress,
};
use kube::runtime::reflector::ObjectRef;

use super::{endpoints::Endpoints, error::HandleError, reflector::Reflector};
use crate::reflection::key::Key;

/// A kind's needs besides its own stores.
pub trait Io: Reflect {
    /// What the reflector holds for them.
    type Extra: Send + Sync + 'static;

    /// The inputs of the decision about `local`.
    fn inputs(
        _r: &Reflector<Self, Self::Extra>,
        _key: &Key,
        _local: Option<&Self>,
    ) -> impl Future<Output = Result<Inputs, HandleError>> + Send {
        async { Ok(Inputs::default()) }
    }

    /// The copy of `key` is gone (or was never made): release what it held.
    fn released(
        _r: &Reflector<Self, Self::Extra>,
        _key: &Key,
    ) -> impl Future<Output = Result<(), HandleError>> + Send {
        async { Ok(()) }
    }
}

impl Io for Service {
    type Extra = ();
}
impl Io for Ingress {
    type Extra = ();
}
impl Io for ConfigMap {
    type Extra = ();
}
impl Io for Secret {
    type Extra = ();
}
impl Io for ServiceAccount {
    type Extra = ();
}

/// What EndpointSlices need: the Service reflector (absent when Services are not reflected)
/// and the IPAM.
pub struct Slices {
    /// The Service reflector.
    pub services: Option<Arc<Reflector<Service, ()>>>,
    /// The addresses' mappings.
    pub endpoints: Endpoints,
}

impl Io for EndpointSlice {
    type Extra = Slices;

    async fn inputs(
        r: &Reflector<Self, Slices>,
        key: &Key,
        local: Option<&Self>,
    ) -> Result<Inputs, HandleError> {
        let Some(local) = local else {
            return Ok(Inputs::default());
        };
        let service = service_state(r, key, local);
        if service != ServiceState::Reflected {
            return Ok(Inputs {
                service,
                ..Inputs::default()
            });
        }
        let Some(pair) = r.pair(&key.namespace) else {
            return Ok(Inputs::default());
        };
        let ctx = r.ctx(&key.namespace, &pair.remote);
        let addresses = endpointslice::addresses(local, &ctx);
        let addresses = r
            .extra
            .endpoints
            .map(key, &addresses)
            .await
            .map_err(HandleError::Endpoint)?;
        Ok(Inputs { addresses, service })
    }

    async fn released(r: &Reflector<Self, Slices>, key: &Key) -> Result<(), HandleError> {
        r.extra
            .endpoints
            .release(key)
            .await
            .map_err(HandleError::Endpoint)
    }
}

/// Where the slice's Service stands: reflected (its copy is ours), pending (to be reflected,
/// not there yet, or the stores are not listed), or not reflected.
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
    if !pair.ready() {
        return ServiceState::Pending;
    }
    let Some(local) = pair.local.get(&ObjectRef::new(name).within(&key.namespace)) else {
        return ServiceState::NotReflected;
    };
    let ctx = services.ctx(&key.namespace, &pair.remote);
    match meta_skip(&local.metadata)
        .or_else(|| <Service as Reflect>::skip(&local, &ctx, &Inputs::default()))
    {
        // Refused as it is: its copy, if any, stays as it was, and so do the slices'.
        Some(Skip::Refused(_) | Skip::Wait(_)) => return ServiceState::Pending,
        Some(Skip::Excluded(_)) => return ServiceState::NotReflected,
        None => {}
    }
    match pair
        .remote_objects
        .get(&ObjectRef::new(name).within(&pair.remote))
    {
        Some(remote)
            if control::shadowpod::consumer::is_reflected(
                remote.metadata.labels.as_ref(),
                ctx.home,
                ctx.foreign,
            ) =>
        {
            ServiceState::Reflected
        }
        Some(_) => ServiceState::NotReflected,
        None => ServiceState::Pending,
    }
}
