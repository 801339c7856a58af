//! The objects the network manager writes, as pure functions of what it decided: our
//! NetworkConfig's spec, the status of the peer's copy, the TunnelEndpoint's spec, where the
//! peer shows our ranges (read back from our NetworkConfig's status), the digest that marks
//! a refused spec.

use std::collections::BTreeMap;

use crate::{
    api::{
        ClusterId,
        cidr::NatCidr,
        discovery::ClusterIdentity,
        net::{NetworkConfigSpec, NetworkConfigStatus, TunnelEndpointSpec},
    },
    consts::net,
};
use liqo_types::view::Ranges;
use liqo_types::{Cidr, FieldError, PeerView, PublicKey, field::bad};
use serde_json::Value;

use super::{endpoint::Endpoint, validate::PeerConfig};

/// What we announce: our ranges (from the IPAM) and our gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    /// Our pod CIDR and external CIDR.
    pub ranges: Ranges,
    /// Our gateway's key (Secret `wireguard-pubkey`).
    pub public_key: PublicKey,
    /// Where peers reach our gateway.
    pub endpoint: Endpoint,
}

/// A digest of a spec (FNV-1a over its JSON text, hex): marks which spec a refusal was for,
/// so that the same spec is not tried and refused again on every pass.
pub fn spec_digest(spec: &Value) -> String {
    let text = spec.to_string();
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// `None` when `seen` is `announced` (not remapped), else `seen`.
pub fn nat(announced: Cidr, seen: Cidr) -> NatCidr {
    NatCidr((seen != announced).then_some(seen))
}

/// The status we write on the peer's copy once its ranges are remapped here.
pub fn copy_status(announced: Ranges, seen_here: Ranges) -> NetworkConfigStatus {
    NetworkConfigStatus {
        processed: true,
        pod_cidr_nat: Some(nat(announced.pods, seen_here.pods)),
        external_cidr_nat: Some(nat(announced.external, seen_here.external)),
        refused: None,
    }
}

/// Our NetworkConfig's spec.
pub fn own_spec(peer: &ClusterIdentity, local: &Local) -> NetworkConfigSpec {
    NetworkConfigSpec {
        cluster: peer.clone(),
        pod_cidr: local.ranges.pods,
        external_cidr: local.ranges.external,
        endpoint_ip: local.endpoint.host.clone(),
        backend_type: net::WIREGUARD.to_owned(),
        backend_config: backend(&local.public_key, local.endpoint.port),
    }
}

fn backend(key: &PublicKey, port: u16) -> BTreeMap<String, String> {
    BTreeMap::from([
        (net::PUBLIC_KEY.to_owned(), key.to_string()),
        (net::PORT.to_owned(), port.to_string()),
    ])
}

/// Where the peer shows our ranges, from our NetworkConfig's status (`None` or missing:
/// unchanged); `Ok(None)` until it is processed.
pub fn at_peer(status: Option<&Value>, ours: Ranges) -> Result<Option<Ranges>, FieldError> {
    let Some(s) = status else { return Ok(None) };
    if s.get("processed").and_then(Value::as_bool) != Some(true) {
        return Ok(None);
    }
    let field = |key: &str, own: Cidr| -> Result<Cidr, FieldError> {
        match s.get(key) {
            None | Some(Value::Null) => Ok(own),
            Some(Value::String(t)) => t
                .parse::<NatCidr>()
                .map(|n| n.or(own))
                .map_err(|e| bad(format!("status.{key}"), e.to_string())),
            Some(other) => Err(bad(
                format!("status.{key}"),
                format!("{other} is not a string"),
            )),
        }
    };
    Ok(Some(Ranges {
        pods: field("podCIDRNAT", ours.pods)?,
        external: field("externalCIDRNAT", ours.external)?,
    }))
}

/// The TunnelEndpoint of a peering: our ranges and the view ([`PeerView::of`] the two IPAM
/// decisions, as the lab's peering makes it): where the peer shows ours (`localNAT*`: the
/// peer's decision) and where we show the peer's (`remoteNAT*`: ours); the peer's gateway.
/// [`super::tunnel::read`] reads the same view back.
pub fn tunnel_spec(
    peer: &ClusterId,
    ours: Ranges,
    view: PeerView,
    theirs: &PeerConfig,
) -> TunnelEndpointSpec {
    let remote = theirs.announced;
    TunnelEndpointSpec {
        cluster_id: peer.clone(),
        local_pod_cidr: ours.pods,
        local_nat_pod_cidr: nat(ours.pods, view.local_pods_at_peer),
        local_external_cidr: ours.external,
        local_nat_external_cidr: nat(ours.external, view.local_external_at_peer),
        remote_pod_cidr: remote.pods,
        remote_nat_pod_cidr: nat(remote.pods, view.remote_pods),
        remote_external_cidr: remote.external,
        remote_nat_external_cidr: nat(remote.external, view.remote_external),
        endpoint_ip: theirs.endpoint.host.clone(),
        backend_type: net::WIREGUARD.to_owned(),
        backend_config: backend(&theirs.public_key, theirs.endpoint.port),
    }
}
