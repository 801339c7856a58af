//! What `peer in-band` and `unpeer in-band` share: each side read (identity, token, the
//! addresses of its auth service and proxy, its IPAM), its ForeignCluster for the other found,
//! the waits and the in-band errors.

use std::time::Duration;

use control::{
    api::{
        ClusterId,
        discovery::{ClusterIdentity, ForeignCluster},
    },
    identity::AuthToken,
};
use ipam::service::client::{Client as IpamClient, ClientOptions};
use k8s_openapi::api::{core::v1::Service, discovery::v1::EndpointSlice};
use kube::{Api, Client, api::ListParams};
use tokio::time::Instant;

use crate::{
    inband::{AUTH_PORT_NAME, Address, PROXY_PORT_NAME, PROXY_SERVICE, service_address},
    peer::error::{PeerError, kube_err},
};

/// The holder of the IPAM endpoint mappings in-band peering takes (the auth service and the
/// proxy exposed to the peer): a virtual kubelet's releases never drop them.
pub(super) const IPAM_HOLDER: &str = "liqoctl-in-band";

/// One side of an in-band peering.
pub struct Side {
    /// What to call it in messages (`local`, `remote`).
    pub label: &'static str,
    /// Its client.
    pub client: Client,
    /// Its Liqo namespace.
    pub namespace: String,
    /// Its IPAM (`--ipam-address`, `--remote-ipam-address`).
    pub ipam_address: String,
}

/// A side as read.
pub(super) struct Cluster {
    /// What to call it in messages.
    pub(super) label: &'static str,
    /// Its client.
    pub(super) client: Client,
    /// Its Liqo namespace.
    pub(super) ns: String,
    /// Its identity.
    pub(super) identity: ClusterIdentity,
    /// Its auth token.
    pub(super) token: AuthToken,
    /// Its auth service.
    pub(super) auth: Address,
    /// Its `liqo-proxy`.
    pub(super) proxy: Address,
    /// Its IPAM.
    pub(super) ipam: IpamClient,
}

/// An in-band step that failed, said in `what`.
pub(super) fn other(what: String) -> PeerError {
    PeerError::InBand(what)
}

async fn address(
    c: &Client,
    ns: &str,
    name: &str,
    port: &'static str,
) -> Result<Address, PeerError> {
    let svc = Api::<Service>::namespaced(c.clone(), ns)
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading Service {ns}/{name}")))?
        .ok_or_else(|| other(format!("no Service {ns}/{name}")))?;
    let slices = Api::<EndpointSlice>::namespaced(c.clone(), ns)
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={name}")))
        .await
        .map_err(kube_err(format!(
            "listing the EndpointSlices of {ns}/{name}"
        )))?
        .items;
    service_address(&svc, &slices, port).map_err(|e| other(e.to_string()))
}

/// Reads `side`: its identity, token, auth service and proxy, and connects to its IPAM.
pub(super) async fn read(side: Side) -> Result<Cluster, PeerError> {
    let (c, ns) = (&side.client, side.namespace.as_str());
    let identity = liqo_auth::cluster::local_identity(c, ns)
        .await
        .map_err(PeerError::Identity)?;
    let token = liqo_auth::tokens::local_token(c, ns)
        .await
        .map_err(PeerError::Token)?;
    let auth = address(
        c,
        ns,
        control::consts::objects::AUTH_SERVICE,
        AUTH_PORT_NAME,
    )
    .await?;
    let proxy = address(c, ns, PROXY_SERVICE, PROXY_PORT_NAME).await?;
    let ipam = ipam::service::client::connect(&ClientOptions::new(side.ipam_address.clone()))
        .await
        .map_err(|e| {
            other(format!(
                "connecting to the {} IPAM at {}: {}",
                side.label,
                side.ipam_address,
                liqo_types::chain(&e)
            ))
        })?;
    println!(
        "Cluster {} ({}): auth service at {}:{}, proxy at {}:{}",
        identity.cluster_name, side.label, auth.ip, auth.port, proxy.ip, proxy.port
    );
    Ok(Cluster {
        label: side.label,
        client: side.client,
        ns: side.namespace,
        identity,
        token,
        auth,
        proxy,
        ipam,
    })
}

/// The ForeignCluster for `peer` on `c`, found by the cluster ID in its spec.
pub(super) async fn find_fc(
    c: &Client,
    peer: &ClusterId,
) -> Result<Option<ForeignCluster>, PeerError> {
    Ok(Api::<ForeignCluster>::all(c.clone())
        .list(&ListParams::default())
        .await
        .map_err(kube_err("listing ForeignClusters"))?
        .items
        .into_iter()
        .filter(|fc| fc.spec.cluster_identity.cluster_id == *peer)
        .min_by_key(|fc| fc.metadata.creation_timestamp.clone().map(|t| t.0)))
}

/// The tenant namespace `fc` reports, once it has one.
pub(super) fn tenant(fc: &ForeignCluster) -> Option<String> {
    fc.status
        .as_ref()
        .and_then(|s| s.tenant_namespace.as_ref())
        .and_then(|t| t.local.clone())
}

/// Polls `check` every half second until it gives `Some` or the deadline passes.
pub(super) async fn poll<T, F, Fut>(
    deadline: Instant,
    waiting_for: &str,
    mut check: F,
) -> Result<T, PeerError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, PeerError>>,
{
    loop {
        if let Some(t) = check().await? {
            return Ok(t);
        }
        if Instant::now() >= deadline {
            return Err(PeerError::Timeout(format!(
                "Timed out waiting for {waiting_for}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What is left until `deadline`, in whole seconds (at least one), as timeouts are printed.
pub(super) fn whole_seconds(deadline: Instant) -> Duration {
    let left = deadline.saturating_duration_since(Instant::now());
    Duration::from_secs(left.as_secs().max(1))
}
