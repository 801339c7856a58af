//! The gateway operator's decisions, pure: the gateway's config file from its base settings,
//! the record of peerings (rendered with the core's [`plan::gateway_peers`]) and the IPAM's
//! endpoint mappings; the connection each TunnelEndpoint reports; when a deleted one may go.
//!
//! A peer the gateway would refuse (its ranges overlap ours or another peer's, its key is ours)
//! is left out with the field named, and the others are rendered: the gateway's own validation
//! runs here first, so one bad TunnelEndpoint never gets the whole file refused.

use std::collections::BTreeMap;

use super::plan::{self, Peerings};
use crate::api::net::{Connection, ConnectionStatus};
use liqo_gateway_api::config::File;
use liqo_types::{Cidr, ClusterId, EndpointMapping, FieldError, PublicKey, field::bad};

use super::{
    daemon::{HANDSHAKE_FRESH_SECS, Look, Want, gateway_look, runs},
    tunnel::Tep,
};

/// What the IPAM adds to the gateway's file: our external CIDR and the endpoints mapped in it
/// (the operator reads its `List` answer with the peering core's `grpc::external_of`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// `List.external_cidr`.
    pub local_external_cidr: Option<Cidr>,
    /// `List.endpoints`.
    pub endpoints: Vec<EndpointMapping>,
}

/// A rendered gateway config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The file.
    pub file: File,
    /// Its exact text.
    pub text: String,
    /// The peers in it.
    pub peers: Peerings,
    /// The peers left out, with the field the gateway would refuse.
    pub refused: BTreeMap<ClusterId, FieldError>,
    /// The endpoint mappings left out (the IPAM's, refused by the gateway's checks).
    pub refused_endpoints: Vec<(EndpointMapping, FieldError)>,
}

/// Why nothing could be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The base config (or the IPAM's part) is refused by the gateway's validation.
    #[error("the gateway's base config")]
    Base(#[source] FieldError),
    /// The base config lists peers: they come from TunnelEndpoints only.
    #[error("the gateway's base config lists peers; they come from TunnelEndpoints only")]
    BaseHasPeers,
    /// Encoding the file failed.
    #[error("encoding the gateway's config")]
    Encode(#[source] serde_saphyr::ser::Error),
}

/// The TunnelEndpoint field behind a field of a gateway peer entry.
fn tep_field(peer_field: &str) -> &'static str {
    match peer_field {
        "id" => "spec.clusterID",
        "publicKey" => "spec.backend_config.publicKey",
        "endpoint" => "spec.endpointIP",
        "remotePodCIDR" => "spec.remoteNATPodCIDR/remotePodCIDR",
        "remoteExternalCIDR" => "spec.remoteNATExternalCIDR/remoteExternalCIDR",
        "localPodCIDRAtPeer" => "spec.localNATPodCIDR/localPodCIDR",
        "localExternalCIDRAtPeer" => "spec.localNATExternalCIDR/localExternalCIDR",
        _ => "spec",
    }
}

/// `peers[3].remotePodCIDR` → `(3, "remotePodCIDR")` (with `list` = `peers`).
fn index<'a>(list: &str, field: &'a str) -> Option<(usize, &'a str)> {
    let rest = field.strip_prefix(list)?.strip_prefix('[')?;
    let (i, rest) = rest.split_once(']')?;
    Some((i.parse().ok()?, rest.strip_prefix('.').unwrap_or(rest)))
}

/// The gateway's file: `base` (fixed settings, no peers) with the private key file the
/// operator writes, our external CIDR and the endpoints (`endpoints`; the external CIDR falls
/// back to the base's), and the peers of `peerings` the gateway accepts.
/// `own_key`: the gateway's public key (a peer with it is refused).
pub fn render(
    base: &File,
    private_key_file: Option<&str>,
    own_key: Option<PublicKey>,
    peerings: &Peerings,
    endpoints: &Endpoints,
) -> Result<Rendered, RenderError> {
    if !base.peers.is_empty() {
        return Err(RenderError::BaseHasPeers);
    }
    let mut file = base.clone();
    if let Some(k) = private_key_file {
        file.private_key_file = Some(k.into());
    }
    // The gateway runs the key file's key only once it is this one: a rotation reaches it
    // with this file, written after the key file.
    if own_key.is_some() {
        file.public_key = own_key;
    }
    file.local_external_cidr = endpoints.local_external_cidr.or(base.local_external_cidr);
    file.endpoints.clone_from(&endpoints.endpoints);
    let mut peers = peerings.clone();
    let mut refused = BTreeMap::new();
    let mut refused_endpoints = Vec::new();
    loop {
        file.peers = plan::gateway_peers(&peers);
        let e = match file.validate(own_key) {
            Ok(_) => break,
            Err(e) => e,
        };
        if let Some((i, _)) = index("endpoints", &e.field)
            && i < file.endpoints.len()
        {
            refused_endpoints.push((file.endpoints.remove(i), e));
            continue;
        }
        // The peer entries are in the record's order.
        let Some((i, field)) = index("peers", &e.field) else {
            return Err(RenderError::Base(e));
        };
        let Some(id) = peers.keys().nth(i).cloned() else {
            return Err(RenderError::Base(e));
        };
        peers.remove(&id);
        refused.insert(
            id,
            bad(
                tep_field(field),
                format!("the gateway refuses it ({}: {})", e.field, e.problem),
            ),
        );
    }
    let text = serde_saphyr::to_string(&file).map_err(RenderError::Encode)?;
    Ok(Rendered {
        file,
        text,
        peers,
        refused,
        refused_endpoints,
    })
}

/// What the operator saw of the gateway.
#[derive(Debug, Clone, Copy)]
pub enum Observed<'a> {
    /// No data plane (`--fake-dataplane`): a rendered peer counts as connected.
    Fake,
    /// Its `/status`.
    Status(&'a liqo_gateway_api::status::Status),
    /// Its `/status` could not be read (why).
    Unreachable(&'a str),
}

fn conn(status: ConnectionStatus, message: impl Into<String>) -> Connection {
    Connection {
        status: Some(status),
        status_message: Some(message.into()),
        peer_configuration: BTreeMap::new(),
    }
}

/// The connection a TunnelEndpoint reports. `left_out`: why it is not rendered, if it is not
/// (a bad field, a duplicate, a refusal); `written`: the digest of the text written.
pub fn connection(
    tep: &Tep,
    left_out: Option<&FieldError>,
    written: &str,
    seen: Observed<'_>,
) -> Connection {
    use ConnectionStatus::{Connected, Connecting, Error};
    if let Some(e) = left_out {
        return conn(Error, e.to_string());
    }
    let p = match &tep.parsed {
        Ok(p) => p,
        Err(e) => return conn(Error, e.to_string()),
    };
    let s = match seen {
        Observed::Fake => return conn(Connected, "rendered (no data plane: --fake-dataplane)"),
        Observed::Unreachable(why) => {
            return conn(Connecting, format!("the gateway's status: {why}"));
        }
        Observed::Status(s) => s,
    };
    match runs(&s.reload, written) {
        Look::Ready => {}
        Look::Refused(e) => return conn(Error, format!("the gateway refused its config: {e}")),
        // Messages stay stable while nothing changes (no status write per look).
        Look::NotYet(_) => {
            return conn(
                Connecting,
                format!("waiting for the gateway to run config {written}"),
            );
        }
    }
    let Some(entry) = s.peers.iter().find(|e| e.id == p.peer.as_str()) else {
        return conn(Connecting, format!("the gateway does not list {}", p.peer));
    };
    let mut c = match entry.handshake_age_secs {
        Some(a) if a <= HANDSHAKE_FRESH_SECS => conn(Connected, "handshake seen recently"),
        Some(_) => conn(
            Connecting,
            format!("no handshake in the last {HANDSHAKE_FRESH_SECS} s"),
        ),
        None => conn(Connecting, "no handshake yet"),
    };
    if let Some(ep) = &entry.endpoint {
        c.peer_configuration.insert("endpoint".into(), ep.clone());
    }
    c
}

/// Whether a TunnelEndpoint being deleted may lose the operator's finalizer: nothing of it is
/// rendered (it did not parse, or its peer is rendered from another TunnelEndpoint) or the
/// gateway runs the text written and no longer lists the peer.
pub fn released(tep: &Tep, rendered: &Rendered, written: &str, seen: Observed<'_>) -> bool {
    let Ok(p) = &tep.parsed else {
        return true;
    };
    if rendered.peers.contains_key(&p.peer) {
        return true;
    }
    match seen {
        Observed::Fake => true,
        Observed::Unreachable(_) => false,
        Observed::Status(s) => gateway_look(s, Some(written), &p.peer, Want::Gone) == Look::Ready,
    }
}

/// Why the gateway cannot confirm anything (its `/status` cannot be read, or it refuses the
/// text written); `None` when it only has not caught up yet.
pub fn failing(seen: Observed<'_>, written: &str) -> Option<String> {
    match seen {
        Observed::Fake => None,
        Observed::Unreachable(why) => Some(format!("the gateway's status cannot be read ({why})")),
        Observed::Status(s) => match runs(&s.reload, written) {
            Look::Refused(e) => Some(format!("the gateway refuses its config ({e})")),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests;
