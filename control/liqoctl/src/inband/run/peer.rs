//! The I/O of `peer in-band` (the order is in [`crate::inband`]'s doc).

use std::time::Duration;

use control::{
    api::{
        ClusterId,
        discovery::ForeignCluster,
        net::{NetworkConfig, TunnelEndpoint},
    },
    consts::{labels, values},
    names::UniqueName,
};
use ipam::service::proto;
use kube::{
    Api, Client,
    api::{DynamicObject, Patch, PatchParams},
    core::ApiResource,
};
use serde_json::json;
use tokio::time::Instant;

use super::common::{Cluster, Side, find_fc, other, poll, read, tenant, whole_seconds};
use crate::{
    consts::FIELD_MANAGER,
    inband::{Address, auth_url, network_config_copy, outgoing, processed, proxy_url},
    peer::{
        Reach,
        error::{PeerError, kube_err},
        foreign_cluster_apply,
    },
};

/// Writes the ForeignCluster for `peer` on `on`; `urls` = (auth, proxy), `None`: the peer's
/// in-cluster addresses unless the ForeignCluster already has a proxy URL.
async fn write_fc(
    on: &Cluster,
    peer: &Cluster,
    urls: Option<(String, String)>,
    asked_outgoing: bool,
) -> Result<ForeignCluster, PeerError> {
    let existing = find_fc(&on.client, &peer.identity.cluster_id).await?;
    let spec = existing.as_ref().map(|fc| &fc.spec);
    let (auth, proxy) = match (urls, spec) {
        (Some(u), _) => u,
        (None, Some(s)) if let Some(p) = s.proxy_url() => {
            (s.foreign_auth_url.clone(), p.to_owned())
        }
        (None, _) => (auth_url(peer.auth), proxy_url(peer.proxy)),
    };
    let name = existing
        .as_ref()
        .and_then(|fc| fc.metadata.name.clone())
        .unwrap_or_else(|| peer.identity.cluster_name.to_string());
    let reach = Reach {
        auth_url: &auth,
        proxy_url: Some(&proxy),
    };
    let body = foreign_cluster_apply(
        &name,
        &peer.identity,
        reach,
        outgoing(asked_outgoing, spec),
        spec,
    );
    // A new peer: the token first (the controller-manager starts when the ForeignCluster
    // appears). An existing one: the ForeignCluster first, so that a new token, tried at once,
    // goes to the new URLs, never the old ones (as `peer out-of-band` does).
    let write_token = || async {
        liqo_auth::tokens::write_remote_token(
            &on.client,
            &on.ns,
            &peer.identity.cluster_id,
            &peer.token,
        )
        .await
        .map_err(PeerError::Token)
    };
    if existing.is_none() {
        write_token().await?;
    }
    let fc = Api::<ForeignCluster>::all(on.client.clone())
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(kube_err(format!(
            "writing ForeignCluster {name} in the {} cluster",
            on.label
        )))?;
    if existing.is_some() {
        write_token().await?;
    }
    Ok(fc)
}

fn nc_api(c: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(c.clone(), ns, &ApiResource::erase::<NetworkConfig>(&()))
}

/// One round of the NetworkConfig exchange from `a` to `b` (`a_ns`, `b_ns`: their tenant
/// namespaces for each other): `a`'s NetworkConfig copied into `b`, `b`'s processing copied
/// back. True once `a`'s TunnelEndpoint exists.
async fn exchange(a: &Cluster, a_ns: &str, b: &Cluster, b_ns: &str) -> Result<bool, PeerError> {
    let name = UniqueName::new(&b.identity).to_object_name().to_string();
    let own = nc_api(&a.client, a_ns)
        .get_opt(&name)
        .await
        .map_err(kube_err(format!("reading NetworkConfig {a_ns}/{name}")))?
        .filter(|o| {
            o.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::REPLICATION))
                == Some(&values::TRUE.to_owned())
        });
    let Some(own) = own else { return Ok(false) };
    let own = serde_json::to_value(&own).map_err(|source| PeerError::Json {
        what: format!(
            "NetworkConfig {a_ns}/{name} of the {} cluster as JSON",
            a.label
        ),
        source,
    })?;

    let copy = network_config_copy(&own, a.identity.cluster_id.as_str(), b_ns);
    let copied = nc_api(&b.client, b_ns)
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&copy),
        )
        .await
        .map_err(kube_err(format!(
            "copying NetworkConfig {name} into {b_ns} of the {} cluster",
            b.label
        )))?;
    let status = copied.data.get("status").filter(|s| !s.is_null());
    if processed(status) && own.get("status") != status {
        nc_api(&a.client, a_ns)
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": status })),
            )
            .await
            .map_err(kube_err(format!(
                "writing the status of NetworkConfig {a_ns}/{name}"
            )))?;
        println!(
            "NetworkConfig of cluster {} processed by cluster {}",
            a.identity.cluster_name, b.identity.cluster_name
        );
    }
    let tep = Api::<DynamicObject>::namespaced_with(
        a.client.clone(),
        a_ns,
        &ApiResource::erase::<TunnelEndpoint>(&()),
    )
    .get_opt(&name)
    .await
    .map_err(kube_err(format!("reading TunnelEndpoint {a_ns}/{name}")))?;
    Ok(tep.is_some())
}

/// `MapIp` ENDPOINT of `ip` of `on` for `peer`: the address `peer` reaches it at.
async fn map(
    on: &Cluster,
    peer: &ClusterId,
    ip: std::net::Ipv4Addr,
) -> Result<std::net::Ipv4Addr, PeerError> {
    let mut ipam = on.ipam.clone();
    let answer = ipam
        .map_ip(proto::MapIpRequest {
            cluster_id: peer.to_string(),
            ip: ip.to_string(),
            direction: proto::Direction::Endpoint as i32,
            holder: super::common::IPAM_HOLDER.into(),
        })
        .await
        .map_err(|s| {
            other(format!(
                "mapping {ip} of the {} cluster: {}",
                on.label,
                s.message()
            ))
        })?
        .into_inner();
    answer.ip.parse().map_err(|_| {
        other(format!(
            "the {} IPAM mapped {ip} to {:?}, not an IPv4 address",
            on.label, answer.ip
        ))
    })
}

/// `peer in-band`.
pub async fn peer(
    local: Side,
    remote: Side,
    bidirectional: bool,
    timeout: Duration,
) -> Result<(), PeerError> {
    let deadline = Instant::now() + timeout;
    let a = read(local).await?;
    let b = read(remote).await?;
    if a.identity.cluster_id == b.identity.cluster_id {
        return Err(PeerError::OwnCluster(b.identity.cluster_id.clone()));
    }
    let (an, bn) = (&a.identity.cluster_name, &b.identity.cluster_name);
    // The ForeignClusters first: the network managers build the network from them.
    let fc_a = write_fc(&a, &b, None, false).await?;
    let fc_b = write_fc(&b, &a, None, bidirectional).await?;
    println!("ForeignCluster for {bn} written in {an}, for {an} in {bn}");
    let (fa, fb) = (
        fc_a.metadata.name.clone().unwrap_or_default(),
        fc_b.metadata.name.clone().unwrap_or_default(),
    );
    let a_ns = poll(deadline, "the tenant namespaces", || async {
        // Only "not there yet" is waited for; a refusal or a lost connection is an error.
        let fc = Api::<ForeignCluster>::all(a.client.clone())
            .get_opt(&fa)
            .await
            .map_err(kube_err(format!("reading ForeignCluster {fa}")))?;
        Ok(fc.as_ref().and_then(tenant))
    })
    .await?;
    let b_ns = poll(deadline, "the tenant namespaces", || async {
        // Only "not there yet" is waited for; a refusal or a lost connection is an error.
        let fc = Api::<ForeignCluster>::all(b.client.clone())
            .get_opt(&fb)
            .await
            .map_err(kube_err(format!("reading ForeignCluster {fb}")))?;
        Ok(fc.as_ref().and_then(tenant))
    })
    .await?;
    println!("Tenant namespaces {a_ns} in {an} and {b_ns} in {bn}");
    poll(
        deadline,
        "the network configurations to be exchanged",
        || async {
            let ta = exchange(&a, &a_ns, &b, &b_ns).await?;
            let tb = exchange(&b, &b_ns, &a, &a_ns).await?;
            Ok((ta && tb).then_some(()))
        },
    )
    .await?;
    println!("TunnelEndpoints created in {an} and {bn}");
    // The auth service and the proxy of each side, as the other side reaches them.
    let a_auth = map(&a, &b.identity.cluster_id, a.auth.ip).await?;
    let a_proxy = map(&a, &b.identity.cluster_id, a.proxy.ip).await?;
    let b_auth = map(&b, &a.identity.cluster_id, b.auth.ip).await?;
    let b_proxy = map(&b, &a.identity.cluster_id, b.proxy.ip).await?;
    println!(
        "Mapped for {bn}: auth {} -> {a_auth}, proxy {} -> {a_proxy}; for {an}: auth {} -> \
         {b_auth}, proxy {} -> {b_proxy}",
        a.auth.ip, a.proxy.ip, b.auth.ip, b.proxy.ip
    );
    let at = |ip, port| Address { ip, port };
    let fc_a = write_fc(
        &a,
        &b,
        Some((
            auth_url(at(b_auth, b.auth.port)),
            proxy_url(at(b_proxy, b.proxy.port)),
        )),
        true,
    )
    .await?;
    let fc_b = write_fc(
        &b,
        &a,
        Some((
            auth_url(at(a_auth, a.auth.port)),
            proxy_url(at(a_proxy, a.proxy.port)),
        )),
        bidirectional,
    )
    .await?;
    println!("Peering enabled: ForeignCluster {fa:?} in {an} has outgoing peering Yes");
    let left = whole_seconds(deadline);
    crate::peer::wait_peering(&a.client, &fc_a, left, &crate::stages::since_now()).await?;
    if bidirectional {
        println!("Peering enabled: ForeignCluster {fb:?} in {bn} has outgoing peering Yes");
        let left = whole_seconds(deadline);
        crate::peer::wait_peering(&b.client, &fc_b, left, &crate::stages::since_now()).await?;
    }
    Ok(())
}
