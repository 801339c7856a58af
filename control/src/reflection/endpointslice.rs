//! EndpointSlices (IPv4 only: the IPAM maps IPv4), reflected only for a Service whose copy is
//! ours: the endpoints of the provider's own pods (on its virtual node) are left out (the
//! provider's native slices hold them); every other address is replaced by its address as the
//! provider reaches it (the caller's IPAM answers: a home pod in the provider's view of our
//! pods, anything else an external-CIDR address the gateway translates). A slice with nothing
//! left to reflect keeps a copy with no endpoints, so the remote Service stays consistent.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    core::v1::ObjectReference,
    discovery::v1::{Endpoint, EndpointSlice},
};
use liqo_types::{FieldError, field::bad};

use super::{Ctx, Inputs, Kind, Reflect, ServiceState, Skip};
use k8s_openapi::api::core::v1::Service;

use super::meta;
use crate::{
    consts::reflection::{
        ENDPOINT_ADDRESSES, ENDPOINTSLICE_MANAGED_BY, ENDPOINTSLICE_MANAGER, SERVICE_NAME,
    },
    shadowpod::consumer::is_reflected,
};

/// The addresses a copy records as mapped (local → as the provider reaches it): what to
/// release once the copy is gone, also after a restart. None recorded is an empty map; an
/// annotation that does not read is refused, naming it.
pub fn recorded(copy: &EndpointSlice) -> Result<BTreeMap<String, String>, FieldError> {
    match copy
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ENDPOINT_ADDRESSES))
    {
        None => Ok(BTreeMap::new()),
        Some(j) => serde_json::from_str(j).map_err(|e| {
            bad(
                format!("metadata.annotations[{ENDPOINT_ADDRESSES}]"),
                format!("not a JSON map of addresses: {e}"),
            )
        }),
    }
}

/// Where a slice's Service stands, from the local Service (`None`: none), the remote object
/// of its name, and whether both were listed: reflected when its copy is ours (also while the
/// local Service is refused as it is: the copy serves, its slices keep following the pods),
/// pending while its copy is to come, else not reflected.
pub fn service_state(
    local: Option<&Service>,
    remote: Option<&Service>,
    ctx: &Ctx<'_>,
    listed: bool,
) -> ServiceState {
    if !listed {
        return ServiceState::Pending;
    }
    let Some(local) = local else {
        return ServiceState::NotReflected;
    };
    let copy_ours = remote.map(|r| is_reflected(r.metadata.labels.as_ref(), ctx.home, ctx.foreign));
    match meta::skip(&local.metadata).or_else(|| Service::skip(local, ctx, &Inputs::default())) {
        Some(Skip::Excluded(_)) => return ServiceState::NotReflected,
        Some(Skip::Refused(_) | Skip::Wait(_)) if copy_ours != Some(true) => {
            return ServiceState::NotReflected;
        }
        _ => {}
    }
    match copy_ours {
        Some(true) => ServiceState::Reflected,
        Some(false) => ServiceState::NotReflected,
        None => ServiceState::Pending,
    }
}

/// The only address type reflected.
pub const IPV4: &str = "IPv4";
/// The prefix of a reflected endpoint's `targetRef.kind` (`RemotePod`).
pub const REMOTE_KIND_PREFIX: &str = "Remote";

/// The Service a slice belongs to (its `kubernetes.io/service-name` label).
pub fn service_of(slice: &EndpointSlice) -> Option<&str> {
    slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(SERVICE_NAME))
        .map(String::as_str)
}

/// Whether a slice was reflected by a virtual kubelet (never reflected again).
pub fn is_reflected_slice(slice: &EndpointSlice) -> bool {
    slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ENDPOINTSLICE_MANAGED_BY))
        .is_some_and(|m| m == ENDPOINTSLICE_MANAGER)
}

/// The endpoints of `slice` that are reflected: not on the provider's virtual node.
pub fn reflected_endpoints<'s>(
    slice: &'s EndpointSlice,
    ctx: &Ctx<'_>,
) -> impl Iterator<Item = &'s Endpoint> {
    let node = ctx.node.to_owned();
    slice
        .endpoints
        .iter()
        .filter(move |e| e.node_name.as_deref() != Some(node.as_str()))
}

/// The addresses of `slice` to map through the IPAM (those of [`reflected_endpoints`]).
pub fn addresses(slice: &EndpointSlice, ctx: &Ctx<'_>) -> Vec<String> {
    let mut out: Vec<String> = reflected_endpoints(slice, ctx)
        .flat_map(|e| e.addresses.iter().cloned())
        .collect();
    out.sort();
    out.dedup();
    out
}

impl Reflect for EndpointSlice {
    const KIND: Kind = Kind::EndpointSlice;

    /// Only a slice we manage: the provider's EndpointSlice controller copies the labels of
    /// our Service copy (the reflection labels among them) onto the slices it makes for it,
    /// and those are the provider's, never to be deleted as copies without a source.
    fn is_copy(remote: &Self) -> bool {
        is_reflected_slice(remote)
    }

    fn skip(local: &Self, _ctx: &Ctx<'_>, inputs: &Inputs) -> Option<Skip> {
        if is_reflected_slice(local) {
            return Some(Skip::Excluded("a reflected copy"));
        }
        if local.address_type != IPV4 {
            return Some(Skip::Excluded("not IPv4"));
        }
        if service_of(local).is_none() {
            return Some(Skip::Excluded("no kubernetes.io/service-name label"));
        }
        match inputs.service {
            ServiceState::Reflected => None,
            ServiceState::Pending => Some(Skip::Wait("its Service's copy is not there yet")),
            ServiceState::NotReflected => Some(Skip::Excluded("its Service is not reflected")),
        }
    }

    fn forge(local: &Self, ctx: &Ctx<'_>, inputs: &Inputs) -> Result<Self, FieldError> {
        let name = local.metadata.name.clone().unwrap_or_default();
        let extra = [(
            ENDPOINTSLICE_MANAGED_BY.to_owned(),
            ENDPOINTSLICE_MANAGER.to_owned(),
        )];
        let mut endpoints = Vec::new();
        for (i, e) in local.endpoints.iter().enumerate() {
            if e.node_name.as_deref() == Some(ctx.node) {
                continue;
            }
            endpoints.push(endpoint(e, i, ctx, &inputs.addresses)?);
        }
        let mut metadata = meta::remote(&local.metadata, name, ctx, extra);
        let used: BTreeMap<&String, &String> = inputs
            .addresses
            .iter()
            .filter(|(a, _)| local.endpoints.iter().any(|e| e.addresses.contains(a)))
            .collect();
        if !used.is_empty() {
            metadata.annotations.get_or_insert_default().insert(
                ENDPOINT_ADDRESSES.to_owned(),
                serde_json::to_string(&used).unwrap_or_default(),
            );
        }
        Ok(EndpointSlice {
            metadata,
            address_type: local.address_type.clone(),
            endpoints,
            ports: local.ports.clone(),
        })
    }

    fn exact() -> &'static [&'static [&'static str]] {
        &[
            &["metadata", "labels"],
            &["metadata", "annotations"],
            &["endpoints"],
            &["ports"],
        ]
    }
}

fn endpoint(
    e: &Endpoint,
    i: usize,
    ctx: &Ctx<'_>,
    addresses: &BTreeMap<String, String>,
) -> Result<Endpoint, FieldError> {
    let mut mapped = Vec::with_capacity(e.addresses.len());
    for (j, a) in e.addresses.iter().enumerate() {
        let m = addresses.get(a).ok_or_else(|| {
            bad(
                format!("endpoints[{i}].addresses[{j}]"),
                format!("{a} has no mapping"),
            )
        })?;
        mapped.push(m.clone());
    }
    Ok(Endpoint {
        addresses: mapped,
        conditions: e.conditions.clone(),
        hostname: e.hostname.clone(),
        node_name: Some(ctx.home.to_string()),
        target_ref: e.target_ref.as_ref().map(|r| ObjectReference {
            kind: r.kind.as_ref().map(|k| format!("{REMOTE_KIND_PREFIX}{k}")),
            name: r.name.clone(),
            namespace: r.namespace.clone(),
            uid: r.uid.clone(),
            ..ObjectReference::default()
        }),
        zone: None,
        hints: None,
        deprecated_topology: None,
    })
}
