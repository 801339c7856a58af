//! What the ForeignCluster controller reads for NETWORKING ([`control::peering::fc::network`]):
//! our TunnelEndpoint's connection, the gateway operator's Lease beside a `Connected` one
//! ([`crate::gateway_lease`]), and the peer's refusal of our NetworkConfig. Reads only.

use control::{
    api::{
        discovery::ClusterIdentity,
        net::{ConnectionStatus, NetworkConfig, TunnelEndpoint},
    },
    consts::{labels, values},
};
use kube::{
    Api, Resource,
    api::{ApiResource, DynamicObject},
};

use crate::error::{Error, kube as kerr};
use control::peering::fc::{OwnRefused, TunnelState};

fn is<K: Resource>(o: &K, key: &str, value: &str) -> bool {
    o.meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .is_some_and(|v| v == value)
}

/// Our TunnelEndpoint's connection (the network manager's object, labelled with the peer);
/// beside a `Connected` one, the gateway Lease (a read error of the Lease is part of it).
pub async fn tunnel_state(
    ctx: &crate::context::Context,
    tenant: &str,
    peer: &ClusterIdentity,
) -> Result<Option<TunnelState>, Error> {
    let name = crate::network::tunnel_name(peer);
    let tep = Api::<TunnelEndpoint>::namespaced(ctx.client.clone(), tenant)
        .get_opt(&name)
        .await
        .map_err(kerr(format!("get TunnelEndpoint {tenant}/{name}")))?
        .filter(|t| {
            is(
                t,
                control::consts::net::TEP_CLUSTER_ID_LABEL,
                peer.cluster_id.as_str(),
            )
        });
    let Some(t) = tep else {
        return Ok(None);
    };
    if t.metadata.deletion_timestamp.is_some() {
        return Ok(Some(TunnelState::Deleting));
    }
    let c = t.status.and_then(|s| s.connection).unwrap_or_default();
    Ok(Some(match c.status {
        Some(ConnectionStatus::Connected) => {
            TunnelState::Connected(crate::gateway_lease::read(ctx).await)
        }
        Some(ConnectionStatus::Error) => TunnelState::Error(c.status_message.unwrap_or_default()),
        Some(ConnectionStatus::Connecting) | None => TunnelState::Connecting,
    }))
}

/// The peer's refusal of our NetworkConfig for it (`status.refused`, written by the peer and
/// copied back by the replicator), if any.
pub async fn own_refused(
    ctx: &crate::context::Context,
    tenant: &str,
    peer: &ClusterIdentity,
) -> Result<Option<OwnRefused>, Error> {
    let name = crate::network::tunnel_name(peer);
    // Untyped: a status of a bad shape (the peer writes it) is no refusal, not an error.
    let ar = ApiResource::erase::<NetworkConfig>(&());
    let own = Api::<DynamicObject>::namespaced_with(ctx.client.clone(), tenant, &ar)
        .get_opt(&name)
        .await
        .map_err(kerr(format!("get NetworkConfig {tenant}/{name}")))?
        .filter(|o| is(o, labels::REPLICATION, values::TRUE));
    Ok(own
        .as_ref()
        .and_then(|o| o.data.pointer("/status/refused"))
        .and_then(|v| v.as_str())
        .filter(|why| !why.is_empty())
        .map(|why| OwnRefused {
            peer: peer.cluster_name.to_string(),
            why: why.to_owned(),
        }))
}
