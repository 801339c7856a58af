//! A TunnelEndpoint's spec read back as what the data plane needs: the peer, the view
//! (a NAT field, else the real range: the inverse of [`super::specs::tunnel_spec`]), the peer
//! gateway's key and endpoint. Every field is checked and a bad one named by its path
//! (`spec.backend_config.port: ...`). The gateway and route operators read TunnelEndpoints
//! with it; the lab's peering makes the same view ([`PeerView::of`]).

use std::net::{IpAddr, SocketAddr};

use liqo_types::{Cidr, ClusterId, FieldError, PeerView, PublicKey, field::bad};

use crate::{api::net::TunnelEndpointSpec, consts::net};

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

/// The view a TunnelEndpoint's spec describes: each NAT field, else the real range.
pub fn view(spec: &TunnelEndpointSpec) -> PeerView {
    PeerView {
        remote_pods: spec.remote_nat_pod_cidr.or(spec.remote_pod_cidr),
        remote_external: spec.remote_nat_external_cidr.or(spec.remote_external_cidr),
        local_pods_at_peer: spec.local_nat_pod_cidr.or(spec.local_pod_cidr),
        local_external_at_peer: spec.local_nat_external_cidr.or(spec.local_external_cidr),
    }
}

/// The fields of a TunnelEndpoint's spec: the peer, the view, its key and its endpoint.
pub fn read(spec: TunnelEndpointSpec) -> Result<Parsed, FieldError> {
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
