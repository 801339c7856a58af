//! The I/O of `unpeer in-band` (the shared reading of both sides and the waits are
//! [`super::common`]'s).

use std::time::Duration;

use control::api::{discovery::ForeignCluster, net::NetworkConfig};
use ipam::service::proto;
use kube::{
    Api,
    api::{ApiResource, DeleteParams, DynamicObject, ListParams},
};
use tokio::time::Instant;

use super::common::{Cluster, Side, find_fc, other, poll, read, tenant, whole_seconds};
use crate::{
    peer::error::{PeerError, kube_err},
    unpeer::Leftover,
};

/// `unpeer in-band`: outgoing `No` on both sides (waited for), the ForeignClusters deleted
/// (their network torn down by the network managers) and waited for, then the tenant
/// namespaces (waited for until gone), and last any auth/proxy mapping the IPAM still holds.
pub async fn unpeer(
    local: Side,
    remote: Side,
    timeout: Duration,
    delete_remote_volumes: bool,
    program: &str,
) -> Result<(), PeerError> {
    let deadline = Instant::now() + timeout;
    let a = read(local).await?;
    let b = read(remote).await?;
    // Claims of class liqo holding data on the peer, on either side: refused before anything
    // changes (or deleted, with --delete-remote-volumes).
    for (on, peer) in [(&a, &b), (&b, &a)] {
        crate::volumes::guard(
            &on.client,
            crate::volumes::Scope::Cluster(peer.identity.cluster_id.as_ref()),
            delete_remote_volumes,
            "unpeer in-band",
            program,
        )
        .await?;
    }
    let mut names = Vec::new();
    for (on, peer) in [(&a, &b), (&b, &a)] {
        let Some(fc) = find_fc(&on.client, &peer.identity.cluster_id).await? else {
            println!(
                "No ForeignCluster for {} in {}",
                peer.identity.cluster_name, on.identity.cluster_name
            );
            continue;
        };
        let name = fc.metadata.name.clone().unwrap_or_default();
        let left = whole_seconds(deadline);
        crate::peer::disable_outgoing(&on.client, &name, left).await?;
        names.push((on, peer, name));
    }
    // Each side's own NetworkConfig released by its replicator first, while the tunnel is up:
    // with outgoing No on both sides no direction wants it replicated, so the replicator
    // deletes its copy at the peer and drops its finalizer (the in-band network stays until the
    // ForeignClusters go). Left to the ForeignClusters' teardown, a side whose peer finished
    // first (and took the tunnel down) could no longer reach it to confirm the copy gone, and
    // its ForeignCluster stayed. Bounded: past RELEASE_WAIT the deletions go on as before.
    let until = deadline.min(Instant::now() + RELEASE_WAIT);
    for (on, peer, _) in &names {
        released(on, peer, until).await;
    }
    // Both ForeignClusters deleted before either is waited for: each side's teardown (and
    // its replicator) still finds the tunnel up for what it must tell the peer.
    let mut tenants = Vec::new();
    for (on, _, name) in &names {
        let fcs = Api::<ForeignCluster>::all(on.client.clone());
        let fc = fcs
            .get_opt(name)
            .await
            .map_err(kube_err(format!("reading ForeignCluster {name}")))?;
        tenants.push(fc.as_ref().and_then(tenant));
        match fcs.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(kube_err(format!("deleting ForeignCluster {name}"))(e)),
        }
    }
    for ((on, peer, name), tenant) in names.iter().zip(tenants) {
        let fcs = Api::<ForeignCluster>::all(on.client.clone());
        poll(
            deadline,
            &format!("ForeignCluster {name} to be deleted"),
            || async {
                let gone = fcs
                    .get_opt(name)
                    .await
                    .map_err(kube_err(format!("reading ForeignCluster {name}")))?
                    .is_none();
                Ok(gone.then_some(()))
            },
        )
        .await?;
        // Waited for until gone: a peering made again at once would otherwise get the
        // namespace still terminating as its tenant namespace (and lose what it wrote there).
        if let Some(ns) = tenant {
            let cluster = &on.identity.cluster_name;
            crate::unpeer::delete_namespace(&on.client, &ns, deadline)
                .await
                .map_err(|e| match e {
                    Leftover::StillThere { namespace, phase } => PeerError::Timeout(format!(
                        "Timed out waiting for namespace {namespace} to be deleted in {cluster} \
                         (still {phase}); the ForeignClusters are deleted"
                    )),
                    Leftover::Kube { what, source } => {
                        kube_err(format!("deleting {what} in {cluster}"))(source)
                    }
                })?;
        }
        println!(
            "ForeignCluster {name} for {} deleted in {}",
            peer.identity.cluster_name, on.identity.cluster_name
        );
    }
    // Only now, with both ForeignClusters gone, the auth and proxy mappings: dropped earlier,
    // each controller-manager would lose the peer's API server in the middle of its teardown.
    // The network manager's `Release` of the peer normally dropped them already (NotFound).
    let mut left = Vec::new();
    for (on, peer) in [(&a, &b), (&b, &a)] {
        for ip in [on.auth.ip, on.proxy.ip] {
            let mut ipam = on.ipam.clone();
            let request = proto::MapIpRequest {
                cluster_id: peer.identity.cluster_id.to_string(),
                ip: ip.to_string(),
                direction: proto::Direction::Endpoint as i32,
                holder: super::common::IPAM_HOLDER.into(),
            };
            match ipam.unmap_endpoint(request).await {
                Ok(_) => {}
                // The peer released by the IPAM (or already unpeered): nothing left to undo.
                Err(s) if s.code() == tonic::Code::NotFound => {}
                Err(s) => left.push(format!(
                    "{ip} of {} still mapped for {}: {}",
                    on.identity.cluster_name,
                    peer.identity.cluster_name,
                    s.message()
                )),
            }
        }
    }
    if !left.is_empty() {
        return Err(other(format!(
            "ForeignClusters deleted, but endpoint mappings are left: {}",
            left.join("; ")
        )));
    }
    println!(
        "In-band peering between {} and {} removed",
        a.identity.cluster_name, b.identity.cluster_name
    );
    Ok(())
}

/// How long `unpeer in-band` waits for each side's replicator to release its NetworkConfig.
const RELEASE_WAIT: Duration = Duration::from_secs(30);

/// Waits (until `until`) for `on`'s NetworkConfigs replicated to `peer` to carry no replicator
/// finalizer; past `until`, or when they cannot be read, it says so and returns (the teardown
/// may still complete, as it did before this wait).
async fn released(on: &Cluster, peer: &Cluster, until: Instant) {
    use control::consts::{finalizers, labels, values};
    let api: Api<DynamicObject> =
        Api::all_with(on.client.clone(), &ApiResource::erase::<NetworkConfig>(&()));
    let selector = format!(
        "{}={},{}={}",
        labels::REPLICATION,
        values::TRUE,
        labels::REMOTE_ID,
        peer.identity.cluster_id
    );
    let what = format!(
        "the NetworkConfig of {} for {} released by its replicator",
        on.identity.cluster_name, peer.identity.cluster_name
    );
    let waited = poll(until, &what, || async {
        let held = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(kube_err(format!("listing NetworkConfigs ({selector})")))?
            .items
            .iter()
            .any(|nc| {
                nc.metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == finalizers::CRD_REPLICATOR)
            });
        Ok((!held).then_some(()))
    })
    .await;
    match waited {
        Ok(()) => println!(
            "NetworkConfig of {} no longer replicated to {}",
            on.identity.cluster_name, peer.identity.cluster_name
        ),
        Err(PeerError::Timeout(_)) => {
            println!("Not yet: {what}; deleting the ForeignClusters anyway");
        }
        Err(e) => {
            eprintln!("warning: waiting for {what}: {e}; deleting the ForeignClusters anyway")
        }
    }
}
