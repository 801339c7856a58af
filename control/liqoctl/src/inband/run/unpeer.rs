//! The I/O of `unpeer in-band` (the shared reading of both sides and the waits are
//! [`super::common`]'s).

use std::time::Duration;

use control::api::discovery::ForeignCluster;
use ipam::service::proto;
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, api::DeleteParams};
use tokio::time::Instant;

use super::common::{Side, find_fc, other, poll, read, tenant, whole_seconds};
use crate::peer::error::{PeerError, kube_err};

/// `unpeer in-band`: outgoing `No` on both sides (waited for), the ForeignClusters deleted
/// (their network torn down by the network managers) and waited for, then the tenant
/// namespaces, and last any auth/proxy mapping the IPAM still holds.
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
        if let Some(ns) = tenant {
            match Api::<Namespace>::all(on.client.clone())
                .delete(&ns, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(kube_err(format!("deleting namespace {ns}"))(e)),
            }
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
