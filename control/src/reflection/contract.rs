//! The contract every reflected kind follows: the kinds, the context of a namespace pair,
//! the inputs a forge needs besides the object, why an object is not reflected, and the
//! [`Reflect`] trait itself.

use std::collections::BTreeMap;

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use liqo_types::FieldError;
use serde::{Serialize, de::DeserializeOwned};

use crate::api::ClusterId;

/// Event reason: the local object cannot be reflected as it is (a bad field or annotation, or
/// the provider refused the copy); the copy, if any, is left as it was.
pub const REASON_REFUSED: &str = "ReflectionRefused";

/// The kinds reflected besides pods, in the order their reflectors start (a Service before
/// its EndpointSlices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `v1/Service`.
    Service,
    /// `discovery.k8s.io/v1/EndpointSlice`.
    EndpointSlice,
    /// `networking.k8s.io/v1/Ingress`.
    Ingress,
    /// `v1/ConfigMap`.
    ConfigMap,
    /// `v1/Secret`.
    Secret,
    /// `v1/ServiceAccount`.
    ServiceAccount,
    /// `v1/PersistentVolumeClaim` (of class `liqo`, bound on the virtual node).
    PersistentVolumeClaim,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 7] = [
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Ingress,
        Kind::ConfigMap,
        Kind::Secret,
        Kind::ServiceAccount,
        Kind::PersistentVolumeClaim,
    ];

    /// The kind's name as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Ingress => "Ingress",
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
            Kind::ServiceAccount => "ServiceAccount",
            Kind::PersistentVolumeClaim => "PersistentVolumeClaim",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who reflects, where: the same for every object of a namespace pair.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    /// The home (consumer) cluster.
    pub home: &'a ClusterId,
    /// The provider.
    pub foreign: &'a ClusterId,
    /// The local namespace.
    pub local_namespace: &'a str,
    /// The remote namespace it is offloaded to.
    pub remote_namespace: &'a str,
    /// The virtual node of the provider (its pods' endpoints are the provider's own).
    pub node: &'a str,
}

/// What a Service's reflection stands at, for its EndpointSlices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServiceState {
    /// The remote Service of that name is our copy: the slices are reflected.
    Reflected,
    /// The local Service is to be reflected and its copy is not there yet: the slices wait.
    Pending,
    /// No local Service to reflect, or the remote name is not ours: no slice is reflected.
    #[default]
    NotReflected,
}

/// What a forge needs besides the object, gathered by the caller.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// EndpointSlices: each local address to reflect → its address as the provider reaches it
    /// (the IPAM's `MapIp{ENDPOINT}` answers).
    pub addresses: BTreeMap<String, String>,
    /// EndpointSlices: their Service's reflection.
    pub service: ServiceState,
    /// PersistentVolumeClaims: the class of their copies (the offer's default); none: the
    /// provider's default.
    pub storage_class: Option<String>,
}

/// Why a local object is not reflected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// Not to be reflected (opted out, a copy reflected here from elsewhere, a kind's fixed
    /// exception): a copy of ours is deleted.
    Excluded(&'static str),
    /// Not reflected yet (an EndpointSlice whose Service's copy is not there): nothing is
    /// done, the caller retries.
    Wait(&'static str),
    /// Refused as it is (a bad annotation or field): a Warning Event names it; a copy of ours
    /// is left as it was.
    Refused(FieldError),
}

/// One kind's reflection contract.
pub trait Reflect:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The kind.
    const KIND: Kind;

    /// The remote name of the local object `local` (most keep theirs).
    fn remote_name(local: &str, _ctx: &Ctx<'_>) -> String {
        local.to_owned()
    }

    /// The local name whose copy `remote` is, if any (the inverse of [`Reflect::remote_name`]).
    fn local_name(remote: &str, _ctx: &Ctx<'_>) -> Option<String> {
        Some(remote.to_owned())
    }

    /// Whether the remote object `remote` (with our reflection labels) is a copy this kind's
    /// reflection manages (most are; a pod's token Secret is not a copy of a local Secret).
    fn is_copy(_remote: &Self) -> bool {
        true
    }

    /// Whether the copy of `local`, excluded from reflection (opted out, a fixed exception), is
    /// kept rather than deleted: a claim's copy holds data, and goes only with its claim.
    fn keeps_excluded_copy(_local: &Self) -> bool {
        false
    }

    /// Why `local` is not reflected as it is (`None`: it is), beyond what `meta::skip`
    /// checks for every kind.
    fn skip(_local: &Self, _ctx: &Ctx<'_>, _inputs: &Inputs) -> Option<Skip> {
        None
    }

    /// The remote copy of `local`, whole (name, namespace, labels and annotations by
    /// `meta::remote`); a field that cannot be reflected is refused.
    fn forge(local: &Self, ctx: &Ctx<'_>, inputs: &Inputs) -> Result<Self, FieldError>;

    /// What [`Reflect::exact`] cannot say: whether `actual` holds what `desired` says in the
    /// kind's own terms (a Service's ports, where the provider may add a `nodePort`).
    fn same_content(_desired: &Self, _actual: &Self) -> bool {
        true
    }

    /// The paths (from the object's root) whose value in a copy must equal the forged one
    /// exactly; elsewhere a copy may hold more than the forge wrote (the provider's defaults:
    /// a ClusterIP, a port's protocol).
    fn exact() -> &'static [&'static [&'static str]] {
        &[&["metadata", "labels"], &["metadata", "annotations"]]
    }
}
