//! The network manager on two real clusters (the test kit's harness) with the SAME pod CIDR, each
//! running liqo-auth, an in-process liqo-ipam and the controllers under the chart's
//! ClusterRole. No gateway operator runs: the test plays it (it sets the TunnelEndpoints'
//! `status.connection` and renews its Lease `liqo-gateway`). Peering out of band: both NetworkConfigs processed, TunnelEndpoints
//! with the peer's pod CIDR remapped to a distinct range, each side's `localNAT*` = the
//! other's `remoteNAT*`, keys and endpoints crossed; NETWORKING Pending, then Established
//! (Connected) and None/TunnelEndpointError with the message (Error); a Connected whose
//! gateway Lease is no longer renewed goes Pending (naming the Lease) at its expiry, and
//! Established again as soon as it is renewed; unpeering on both sides
//! removes the NetworkConfigs, TunnelEndpoints, the IPAM peers and the finalizer; peering
//! again builds the same TunnelEndpoint.

use crate::common;

use common::{net::*, *};

use std::time::{Duration, Instant};

use control::{
    api::{
        discovery::{ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T},
        net::{NetworkConfig, TunnelEndpoint},
    },
    consts::net,
    names,
};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use liqo_controller_manager::network::tunnel_name;
use serde_json::json;
use testkit::k8s;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn same_pod_cidr_clusters_get_crossed_tunnel_endpoints_and_unpeer_cleanly() {
    init_log();
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, TWO_SAME).await.unwrap();
    assert_eq!(set.clusters[0].pod_cidr, set.clusters[1].pod_cidr);
    let pod_cidr = set.clusters[0].pod_cidr.to_string();
    let rome_id = identity(ROME_ID, "rome");
    let milan_id = identity(MILAN_ID, "milan");
    let net = |public_key, port| {
        Some(Net {
            public_key,
            port,
            grace: liqo_controller_manager::network::DEFAULT_GRACE,
        })
    };
    let rome = start_with(&set.clusters[0], &rome_id, net(ROME_KEY, ROME_PORT)).await;
    let milan = start_with(&set.clusters[1], &milan_id, net(MILAN_KEY, MILAN_PORT)).await;
    let t = Instant::now();
    peer(&rome, &milan).await;
    let rome_ns = names::tenant_namespace(&milan_id).to_string();
    let milan_ns = names::tenant_namespace(&rome_id).to_string();
    let (rome_tep, milan_tep) = (tunnel_name(&milan_id), tunnel_name(&rome_id));

    eventually(30, "both TunnelEndpoints", || async {
        tep(&rome.client, &rome_ns, &rome_tep).await?;
        tep(&milan.client, &milan_ns, &milan_tep).await.map(drop)
    })
    .await;
    eprintln!(
        "TunnelEndpoints on both sides in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let r = tep(&rome.client, &rome_ns, &rome_tep).await.unwrap();
    let m = tep(&milan.client, &milan_ns, &milan_tep).await.unwrap();
    let labels_of = |t: &TunnelEndpoint| t.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels_of(&r)[net::TEP_CLUSTER_ID_LABEL], MILAN_ID);
    assert_eq!(labels_of(&m)[net::TEP_CLUSTER_ID_LABEL], ROME_ID);
    let (r, m) = (r.spec, m.spec);
    assert_eq!(r.cluster_id.as_str(), MILAN_ID);
    // Same pod CIDR on both sides: each remaps the other's to a distinct range.
    for s in [&r, &m] {
        assert_eq!(s.local_pod_cidr.to_string(), pod_cidr);
        assert_eq!(s.remote_pod_cidr.to_string(), pod_cidr);
        let seen = s.remote_nat_pod_cidr.0.expect("the peer's pods remapped");
        assert!(
            !seen.overlaps(&s.local_pod_cidr),
            "{seen} overlaps {pod_cidr}"
        );
        assert_eq!(seen.prefix_len(), s.remote_pod_cidr.prefix_len());
    }
    // localNAT* = the peer's decision (its remoteNAT*).
    assert_eq!(r.local_nat_pod_cidr, m.remote_nat_pod_cidr);
    assert_eq!(m.local_nat_pod_cidr, r.remote_nat_pod_cidr);
    assert_eq!(r.local_nat_external_cidr, m.remote_nat_external_cidr);
    assert_eq!(m.local_nat_external_cidr, r.remote_nat_external_cidr);
    assert_eq!(r.local_external_cidr, m.remote_external_cidr);
    assert_eq!(m.local_external_cidr, r.remote_external_cidr);
    // Keys and endpoints crossed.
    assert_eq!(r.backend_type, "wireguard");
    assert_eq!(r.backend_config[net::PUBLIC_KEY], MILAN_KEY);
    assert_eq!(r.backend_config[net::PORT], MILAN_PORT.to_string());
    assert_eq!(m.backend_config[net::PUBLIC_KEY], ROME_KEY);
    assert_eq!(m.backend_config[net::PORT], ROME_PORT.to_string());
    assert_eq!(r.endpoint_ip, "127.0.0.1");

    // Our NetworkConfigs came back processed with the peer's decision; the IPAMs hold it.
    let own = Api::<NetworkConfig>::namespaced(rome.client.clone(), &rome_ns)
        .get(&rome_tep)
        .await
        .unwrap();
    assert_eq!(own.spec.cluster.cluster_id.as_str(), MILAN_ID);
    let status = own.status.unwrap();
    assert!(status.processed);
    assert_eq!(status.pod_cidr_nat, Some(r.local_nat_pod_cidr));
    let peers = ipam_peers(rome.ipam.as_ref().unwrap()).await;
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].cluster_id, MILAN_ID);
    assert_eq!(peers[0].pod_view, r.remote_nat_pod_cidr.to_string());
    assert_eq!(peers[0].our_pod_view, m.remote_nat_pod_cidr.to_string());
    let fc = Api::<ForeignCluster>::all(rome.client.clone())
        .get("milan")
        .await
        .unwrap();
    assert!(
        fc.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&net::NETWORK_MANAGER_FINALIZER.to_owned())
    );

    // NETWORKING follows the TunnelEndpoint's connection, as the gateway operator writes it,
    // while the operator renews its Lease (here every second, valid LEASE_SECS).
    let mut rome_renewer = Some(renewer(rome.client.clone()));
    let milan_renewer = Renewer(renewer(milan.client.clone()));
    eventually(20, "NETWORKING Pending on both", || async {
        fc_conditions(&rome.client, "milan", &[(T::NetworkStatus, S::Pending)]).await?;
        fc_conditions(&milan.client, "rome", &[(T::NetworkStatus, S::Pending)]).await
    })
    .await;
    set_connection(
        &rome.client,
        &rome_ns,
        &rome_tep,
        json!({"status": "Connected"}),
    )
    .await;
    set_connection(
        &milan.client,
        &milan_ns,
        &milan_tep,
        json!({"status": "Error", "statusMessage": "gateway refused the peer: test"}),
    )
    .await;
    eventually(
        20,
        "NETWORKING Established on rome, Error on milan",
        || async {
            fc_conditions(&rome.client, "milan", &[(T::NetworkStatus, S::Established)]).await?;
            let c = network_condition(&milan.client, "rome").await?;
            match (c.status, c.reason.as_deref(), c.message.as_deref()) {
                (S::None, Some("TunnelEndpointError"), Some("gateway refused the peer: test")) => {
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    set_connection(
        &milan.client,
        &milan_ns,
        &milan_tep,
        json!({"status": "Connected"}),
    )
    .await;
    eventually(20, "NETWORKING Established on milan", || {
        fc_conditions(&milan.client, "rome", &[(T::NetworkStatus, S::Established)])
    })
    .await;

    // Rome's gateway operator dies: its Connected stays, its Lease is no longer renewed.
    // NETWORKING goes Pending at the Lease's expiry (a requeue: nothing else happens), naming
    // the Lease; renewed again, Established at once (the Lease is watched).
    rome_renewer.take().unwrap().abort();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let last = renew(&rome.client).await;
    eventually(
        LEASE_SECS + 10,
        "NETWORKING Pending on rome (stale Lease)",
        || async {
            let (status, message) = networking(&rome.client, "milan").await?;
            match status {
                S::Pending
                    if message.contains("liqo/liqo-gateway")
                        && message.contains("last renewed at") =>
                {
                    Ok(())
                }
                other => Err(format!("{other:?}: {message}")),
            }
        },
    )
    .await;
    let stale = last.elapsed().as_secs_f64();
    eprintln!(
        "NETWORKING Pending {stale:.1} s after the last renewal (Lease valid {LEASE_SECS} s)"
    );
    // At the expiry, not at the next resync (10 s) nor on another event.
    assert!(
        stale >= LEASE_SECS as f64 && stale < LEASE_SECS as f64 + 5.0,
        "{stale:.1} s"
    );
    let (_, message) = networking(&rome.client, "milan").await.unwrap();
    eprintln!("NETWORKING message: {message}");
    // While the Lease stays stale the status does not churn: read more than one resync (10 s)
    // apart, the ForeignCluster is the same object (same resourceVersion, same message).
    let version = |c: kube::Client| async move {
        Api::<ForeignCluster>::all(c)
            .get("milan")
            .await
            .unwrap()
            .metadata
            .resource_version
            .expect("a resourceVersion")
    };
    let before = version(rome.client.clone()).await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    let after = version(rome.client.clone()).await;
    let (status, again) = networking(&rome.client, "milan").await.unwrap();
    assert_eq!((status, &again), (S::Pending, &message));
    assert_eq!(
        before, after,
        "the ForeignCluster was rewritten while its Lease stayed stale"
    );
    // Still Connected in the TunnelEndpoint: only the Lease changed NETWORKING.
    let conn = tep(&rome.client, &rome_ns, &rome_tep)
        .await
        .unwrap()
        .status
        .and_then(|s| s.connection)
        .and_then(|c| c.status);
    assert_eq!(conn, Some(control::api::net::ConnectionStatus::Connected));
    let back = Instant::now();
    let rome_renewer = Renewer(renewer(rome.client.clone()));
    eventually(10, "NETWORKING Established on rome (Lease renewed)", || {
        fc_conditions(&rome.client, "milan", &[(T::NetworkStatus, S::Established)])
    })
    .await;
    let fresh = back.elapsed().as_secs_f64();
    eprintln!("NETWORKING Established {fresh:.1} s after the Lease was renewed");
    assert!(fresh < 3.0, "{fresh:.1} s");

    // Unpeer on both sides: the network goes on both, the IPAMs release.
    let t = Instant::now();
    for (side, fc) in [(&rome, "milan"), (&milan, "rome")] {
        Api::<ForeignCluster>::all(side.client.clone())
            .patch(
                fc,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"outgoingPeeringEnabled": "No"}})),
            )
            .await
            .unwrap();
    }
    eventually(60, "the network torn down on both sides", || async {
        for (side, name) in [(&rome, "rome"), (&milan, "milan")] {
            let ncs = count::<NetworkConfig>(&side.client).await;
            let teps = count::<TunnelEndpoint>(&side.client).await;
            let peers = ipam_peers(side.ipam.as_ref().unwrap()).await.len();
            if (ncs, teps, peers) != (0, 0, 0) {
                return Err(format!(
                    "{name}: {ncs} NetworkConfigs, {teps} TunnelEndpoints, {peers} IPAM peers"
                ));
            }
        }
        Ok(())
    })
    .await;
    eprintln!("network torn down in {:.1} s", t.elapsed().as_secs_f64());
    eventually(20, "rome's finalizer dropped, NETWORKING None", || async {
        let fc = Api::<ForeignCluster>::all(rome.client.clone())
            .get("milan")
            .await
            .map_err(|e| e.to_string())?;
        let f = fc.metadata.finalizers.clone().unwrap_or_default();
        if f.contains(&net::NETWORK_MANAGER_FINALIZER.to_owned()) {
            return Err(format!("finalizers {f:?}"));
        }
        fc_conditions(&rome.client, "milan", &[(T::NetworkStatus, S::None)]).await
    })
    .await;

    // Peering again builds the network again (the IPAMs give the same ranges back).
    Api::<ForeignCluster>::all(rome.client.clone())
        .patch(
            "milan",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"outgoingPeeringEnabled": "Yes"}})),
        )
        .await
        .unwrap();
    eventually(40, "both TunnelEndpoints again", || async {
        let again = tep(&rome.client, &rome_ns, &rome_tep).await?;
        tep(&milan.client, &milan_ns, &milan_tep).await?;
        if again.spec == r {
            Ok(())
        } else {
            Err(format!("{:?} differs from {r:?}", again.spec))
        }
    })
    .await;
    // Everything of the test's stops before the set is given back.
    drop((rome_renewer, milan_renewer));
    rome.stop().await;
    milan.stop().await;
    set.release().await.unwrap();
}

/// How long the test's gateway Lease is valid without renewal.
const LEASE_SECS: u64 = 5;

/// Renews (creates) the gateway Lease in `liqo` as the gateway operator does; when.
async fn renew(c: &kube::Client) -> Instant {
    use k8s_openapi::{
        api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::MicroTime, jiff::Timestamp,
    };
    let at = Instant::now();
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": net::GATEWAY_LEASE, "namespace": "liqo"},
        "spec": {
            "holderIdentity": "n0",
            "leaseDurationSeconds": LEASE_SECS,
            "renewTime": MicroTime(Timestamp::now()),
        },
    });
    Api::<Lease>::namespaced(c.clone(), "liqo")
        .patch(
            net::GATEWAY_LEASE,
            &PatchParams::apply("test-gateway-operator").force(),
            &Patch::Apply(lease),
        )
        .await
        .unwrap();
    at
}

/// Renews the Lease every second until aborted.
fn renewer(c: kube::Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            renew(&c).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

/// Stops a renewer when dropped.
struct Renewer(tokio::task::JoinHandle<()>);

impl Drop for Renewer {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// NETWORKING of a ForeignCluster: status and message.
async fn networking(c: &kube::Client, fc: &str) -> Result<(S, String), String> {
    let c = network_condition(c, fc).await?;
    Ok((c.status, c.message.unwrap_or_default()))
}
