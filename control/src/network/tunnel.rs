//! A TunnelEndpoint read back as the peering core's [`Peering`]: the peer, the view (a NAT
//! field, else the real range: the inverse of [`super::specs::tunnel_spec`]), the peer
//! gateway's key and endpoint. Every field is checked and a bad one named by its path
//! (`spec.backend_config.port: ...`), so one bad TunnelEndpoint is refused alone and the others
//! are still rendered; the objects are read untyped (a typed watch would fail on the first
//! object whose field does not parse, for every object). The gateway and route operators read
//! TunnelEndpoints with it; the lab's peering makes the same view ([`PeerView::of`]).

use std::{
    collections::BTreeMap,
    net::{IpAddr, SocketAddr},
};

use kube::api::DynamicObject;
use liqo_types::{Cidr, ClusterId, FieldError, PeerView, PublicKey, field::bad};

use super::plan::{Peering, Peerings};
use crate::{
    api::net::{TunnelEndpointSpec, TunnelEndpointStatus},
    consts::net,
};

/// Where the peer's gateway listens, as the TunnelEndpoint says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// No endpoint: the peer is behind NAT and calls us.
    None,
    /// An address.
    Addr(SocketAddr),
    /// A DNS name (a cloud load balancer's), resolved by the operator before rendering.
    Name(String, u16),
}

/// A TunnelEndpoint whose fields parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The peer.
    pub peer: ClusterId,
    /// How we see the peer and how it sees us.
    pub view: PeerView,
    /// The peer gateway's key.
    pub public_key: PublicKey,
    /// The peer gateway's endpoint.
    pub endpoint: Endpoint,
    /// Our own external CIDR (`spec.localExternalCIDR`; the same in every TunnelEndpoint).
    pub local_external: Cidr,
}

impl Parsed {
    /// The peering record, with the endpoint resolved (`None` for a name not resolved).
    pub fn peering(&self, resolved: Option<SocketAddr>) -> Peering {
        Peering {
            view: self.view,
            public_key: self.public_key,
            endpoint: match &self.endpoint {
                Endpoint::None => None,
                Endpoint::Addr(a) => Some(*a),
                Endpoint::Name(..) => resolved,
            },
        }
    }
}

/// The view a TunnelEndpoint's spec describes: each NAT field, else the real range.
pub fn view(spec: &TunnelEndpointSpec) -> PeerView {
    PeerView {
        remote_pods: spec.remote_nat_pod_cidr.or(spec.remote_pod_cidr),
        remote_external: spec.remote_nat_external_cidr.or(spec.remote_external_cidr),
        local_pods_at_peer: spec.local_nat_pod_cidr.or(spec.local_pod_cidr),
        local_external_at_peer: spec.local_nat_external_cidr.or(spec.local_external_cidr),
    }
}

/// The fields of a TunnelEndpoint's spec: the peer, how we see it and it sees us (a NAT view,
/// else the real range: [`view`]), its key and its endpoint.
pub fn parse_spec(spec: TunnelEndpointSpec) -> Result<Parsed, FieldError> {
    if spec.backend_type != net::WIREGUARD {
        return Err(bad(
            "spec.backendType",
            format!("{:?} is not {:?}", spec.backend_type, net::WIREGUARD),
        ));
    }
    let config = |key: &str| {
        spec.backend_config
            .get(key)
            .ok_or_else(|| bad(format!("spec.backend_config.{key}"), "is missing"))
    };
    let public_key: PublicKey = liqo_types::field::parse(
        &format!("spec.backend_config.{}", net::PUBLIC_KEY),
        config(net::PUBLIC_KEY)?,
    )?;
    let endpoint = if spec.endpoint_ip.is_empty() {
        Endpoint::None
    } else {
        let port_field = format!("spec.backend_config.{}", net::PORT);
        let port: u16 = liqo_types::field::parse(&port_field, config(net::PORT)?)?;
        if port == 0 {
            return Err(bad(port_field, "0 is not a port"));
        }
        match spec.endpoint_ip.parse::<IpAddr>() {
            Ok(ip) => Endpoint::Addr(SocketAddr::new(ip, port)),
            Err(_) if liqo_types::dns::is_dns_name(&spec.endpoint_ip) => {
                Endpoint::Name(spec.endpoint_ip.clone(), port)
            }
            Err(_) => {
                return Err(bad(
                    "spec.endpointIP",
                    format!(
                        "{:?} is neither an IP address nor a DNS name",
                        spec.endpoint_ip
                    ),
                ));
            }
        }
    };
    Ok(Parsed {
        view: view(&spec),
        peer: spec.cluster_id,
        public_key,
        endpoint,
        local_external: spec.local_external_cidr,
    })
}

/// One TunnelEndpoint as the operators see it.
#[derive(Debug, Clone)]
pub struct Tep {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Being deleted.
    pub deleting: bool,
    /// When its deletion was asked.
    pub deleted_at: Option<k8s_openapi::jiff::Timestamp>,
    /// Its finalizers.
    pub finalizers: Vec<String>,
    /// Its fields, or the first bad one.
    pub parsed: Result<Parsed, FieldError>,
    /// Its status as it is (an unreadable status reads as none).
    pub status: TunnelEndpointStatus,
}

impl Tep {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether it carries `finalizer`.
    pub fn has(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }
}

/// Reads a TunnelEndpoint object.
pub fn read(obj: &DynamicObject) -> Tep {
    let status = obj
        .data
        .get("status")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default();
    Tep {
        namespace: obj.metadata.namespace.clone().unwrap_or_default(),
        name: obj.metadata.name.clone().unwrap_or_default(),
        deleting: obj.metadata.deletion_timestamp.is_some(),
        deleted_at: obj.metadata.deletion_timestamp.as_ref().map(|t| t.0),
        finalizers: obj.metadata.finalizers.clone().unwrap_or_default(),
        parsed: parse(obj),
        status,
    }
}

fn spec_field(e: FieldError) -> FieldError {
    match e.field.as_str() {
        "<file>" => bad("spec", e.problem),
        f => bad(format!("spec.{f}"), e.problem),
    }
}

/// The fields of a TunnelEndpoint object: its spec ([`parse_spec`]), its cluster-ID label
/// checked against it.
pub fn parse(obj: &DynamicObject) -> Result<Parsed, FieldError> {
    let spec = obj
        .data
        .get("spec")
        .cloned()
        .ok_or_else(|| bad("spec", "is missing"))?;
    let spec: TunnelEndpointSpec = liqo_types::field::json(spec).map_err(spec_field)?;
    if let Some(label) = obj
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(net::TEP_CLUSTER_ID_LABEL))
        && label != spec.cluster_id.as_str()
    {
        return Err(bad(
            format!("metadata.labels.{}", net::TEP_CLUSTER_ID_LABEL),
            format!("{label:?} is not spec.clusterID {}", spec.cluster_id),
        ));
    }
    parse_spec(spec)
}

/// Our external CIDR as the TunnelEndpoints say (the first that parses, by `namespace/name`):
/// what the gateway needs when the IPAM is not asked.
pub fn local_external(teps: &[Tep]) -> Option<liqo_types::Cidr> {
    let mut sorted: Vec<&Tep> = teps.iter().filter(|t| !t.deleting).collect();
    sorted.sort_by_key(|t| t.key());
    sorted
        .into_iter()
        .find_map(|t| t.parsed.as_ref().ok().map(|p| p.local_external))
}

/// The TunnelEndpoints to render (not being deleted, parsed, endpoint resolved), as the core's
/// record, and why each other one is left out (by `namespace/name`). Two TunnelEndpoints for
/// one peer: the first by `namespace/name` is kept, the other refused naming it.
/// `resolve` gives the address of an endpoint name (`None`: not resolved).
pub fn peerings(
    teps: &[Tep],
    resolve: impl Fn(&str, u16) -> Option<SocketAddr>,
) -> (Peerings, BTreeMap<String, FieldError>) {
    let mut sorted: Vec<&Tep> = teps.iter().collect();
    sorted.sort_by_key(|t| t.key());
    let mut out = Peerings::new();
    let mut owner: BTreeMap<ClusterId, String> = BTreeMap::new();
    let mut refused = BTreeMap::new();
    for t in sorted.into_iter().filter(|t| !t.deleting) {
        let p = match &t.parsed {
            Ok(p) => p,
            Err(e) => {
                refused.insert(t.key(), e.clone());
                continue;
            }
        };
        if let Some(first) = owner.get(&p.peer) {
            refused.insert(
                t.key(),
                bad(
                    "spec.clusterID",
                    format!("TunnelEndpoint {first} already leads to {}", p.peer),
                ),
            );
            continue;
        }
        let resolved = match &p.endpoint {
            Endpoint::Name(host, port) => match resolve(host, *port) {
                Some(a) => Some(a),
                None => {
                    refused.insert(
                        t.key(),
                        bad("spec.endpointIP", format!("{host:?} does not resolve")),
                    );
                    continue;
                }
            },
            _ => None,
        };
        owner.insert(p.peer.clone(), t.key());
        out.insert(p.peer.clone(), p.peering(resolved));
    }
    (out, refused)
}

#[cfg(test)]
mod tests;
