//! `peer in-band` and `unpeer in-band` (§1.6 of the control-plane spec; upstream's
//! `pkg/liqoctl/peerib`, `unpeerib` and `inbound`): with both clusters' kubeconfigs, liqoctl
//! builds the network first, then lets authentication and the API traffic go through the
//! tunnel.
//!
//! The order, adapted to liqo-rs's network manager (which keys the network on the
//! ForeignCluster): on each side a ForeignCluster for the other with `foreignProxyUrl` set
//! (that marks it in-band: the network manager builds the network before any direction is
//! pending), networking `Yes`, outgoing `No` and the auth URL the peer's Service has inside
//! its cluster (not reachable yet); each side's NetworkConfig (made by its network manager)
//! copied by liqoctl into the peer as the replicator would (the replicator cannot reach the
//! peer before authentication), the peer's processing copied back, until both
//! TunnelEndpoints exist; then each side's IPAM maps (`MapIp` ENDPOINT) its auth service and
//! its `liqo-proxy` for the peer, and the ForeignClusters get `foreignAuthUrl` and
//! `foreignProxyUrl` at those addresses and outgoing `Yes` (the reverse one only with
//! `--bidirectional`); then it waits for the stages as `peer` does.
//!
//! This module holds the pure parts (addresses from Services, URLs, the bodies written);
//! [`run`] does the I/O.

pub mod run;

use std::net::Ipv4Addr;

use control::api::discovery::{ForeignClusterSpec, PeeringEnabled};
use k8s_openapi::api::{core::v1::Service, discovery::v1::EndpointSlice};
use serde_json::{Value, json};

/// The Service of `liqo-proxy` in the Liqo namespace.
pub use control::consts::objects::PROXY_SERVICE;

/// The Service port names upstream looks for (`https` for the auth service, `http` for the
/// proxy); a Service with a single port is used whatever its name.
pub const AUTH_PORT_NAME: &str = "https";
/// See [`AUTH_PORT_NAME`].
pub const PROXY_PORT_NAME: &str = "http";

/// An address inside a cluster (a Service's ClusterIP, or a headless Service's endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Address {
    /// The IP.
    pub ip: Ipv4Addr,
    /// The port.
    pub port: u16,
}

/// Why a Service gives no address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// No port named so, and not a single port.
    #[error("Service {service} has no port named {port:?} (and more or less than one port)")]
    NoPort {
        /// The Service.
        service: String,
        /// The port name.
        port: &'static str,
    },
    /// A ClusterIP that is not IPv4.
    #[error("Service {service} has clusterIP {ip:?}, not an IPv4 address")]
    ClusterIp {
        /// The Service.
        service: String,
        /// Its ClusterIP.
        ip: String,
    },
    /// A headless Service without a ready IPv4 endpoint.
    #[error("headless Service {service} has no ready IPv4 endpoint with port {port:?}")]
    NoEndpoint {
        /// The Service.
        service: String,
        /// The port name.
        port: &'static str,
    },
}

/// The port named `name`, else the only one.
fn pick_port<'a, T>(
    ports: &'a [T],
    name: &str,
    name_of: impl Fn(&T) -> Option<&str>,
) -> Option<&'a T> {
    ports
        .iter()
        .find(|p| name_of(p) == Some(name))
        .or_else(|| (ports.len() == 1).then(|| &ports[0]))
}

/// Where a Service is reached inside its cluster: its ClusterIP and port; for a headless
/// Service (`clusterIP: None`), the first ready IPv4 endpoint of its EndpointSlices and the
/// slice's port.
pub fn service_address(
    svc: &Service,
    slices: &[EndpointSlice],
    port_name: &'static str,
) -> Result<Address, AddressError> {
    let service = svc.metadata.name.clone().unwrap_or_default();
    let spec = svc.spec.clone().unwrap_or_default();
    let cluster_ip = spec.cluster_ip.clone().unwrap_or_default();
    if cluster_ip != "None" && !cluster_ip.is_empty() {
        let ip = cluster_ip.parse().map_err(|_| AddressError::ClusterIp {
            service: service.clone(),
            ip: cluster_ip.clone(),
        })?;
        let ports = spec.ports.unwrap_or_default();
        let port =
            pick_port(&ports, port_name, |p| p.name.as_deref()).ok_or(AddressError::NoPort {
                service,
                port: port_name,
            })?;
        return Ok(Address {
            ip,
            port: u16::try_from(port.port).unwrap_or_default(),
        });
    }
    for slice in slices.iter().filter(|s| s.address_type == "IPv4") {
        let ports = slice.ports.clone().unwrap_or_default();
        let Some(port) = pick_port(&ports, port_name, |p| p.name.as_deref())
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        let ready = slice
            .endpoints
            .iter()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true));
        if let Some(ip) = ready
            .flat_map(|e| e.addresses.iter())
            .find_map(|a| a.parse::<Ipv4Addr>().ok())
        {
            return Ok(Address { ip, port });
        }
    }
    Err(AddressError::NoEndpoint {
        service,
        port: port_name,
    })
}

/// The auth URL of an address (`https://ip[:port]`, the port omitted when 443).
pub fn auth_url(a: Address) -> String {
    if a.port == 443 {
        format!("https://{}", a.ip)
    } else {
        format!("https://{}:{}", a.ip, a.port)
    }
}

/// The proxy URL of an address (`http://ip:port`).
pub fn proxy_url(a: Address) -> String {
    format!("http://{}:{}", a.ip, a.port)
}

/// The outgoing setting of the ForeignCluster on one side: `Yes` when asked (the local side
/// always, the remote side with `--bidirectional`), else what it already is (a rerun without
/// `--bidirectional` never disables a reverse peering), else `No`.
pub fn outgoing(asked: bool, existing: Option<&ForeignClusterSpec>) -> PeeringEnabled {
    if asked {
        PeeringEnabled::Yes
    } else {
        existing.map_or(PeeringEnabled::No, |s| s.outgoing_peering_enabled)
    }
}

/// The copy of a NetworkConfig (as read, raw) that the replicator of its cluster (`origin`)
/// would write in the peer's tenant namespace `namespace`: the same labels but marked as a
/// replica of `origin`, the same annotations and spec, no status (the peer writes it).
pub fn network_config_copy(source: &Value, origin: &str, namespace: &str) -> Value {
    use control::peering::replicate::{Source, desired};
    let map = |key: &str| -> std::collections::BTreeMap<String, String> {
        source
            .pointer(&format!("/metadata/{key}"))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    };
    let d = desired(
        &Source {
            name: source
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            deleting: false,
            has_finalizer: false,
            labels: map("labels"),
            annotations: map("annotations"),
            spec: source.get("spec").cloned().unwrap_or(Value::Null),
            status: None,
        },
        origin,
    );
    json!({
        "apiVersion": source.get("apiVersion"),
        "kind": source.get("kind"),
        "metadata": {
            "name": d.name,
            "namespace": namespace,
            "labels": d.labels,
            "annotations": d.annotations,
        },
        "spec": d.spec,
    })
}

/// Whether a NetworkConfig status (raw) says `processed: true`.
pub fn processed(status: Option<&Value>) -> bool {
    status
        .and_then(|s| s.get("processed"))
        .and_then(Value::as_bool)
        == Some(true)
}

#[cfg(test)]
mod tests;
