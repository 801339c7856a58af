//! The network manager on two real clusters (the e2e harness) with the SAME pod CIDR, each
//! running liqo-auth, an in-process liqo-ipam and the controllers under the chart's
//! ClusterRole. No gateway operator runs: the test plays it (it sets the TunnelEndpoints'
//! `status.connection`).
//!
//! 1. Peering out of band: both NetworkConfigs processed, TunnelEndpoints with the peer's pod
//!    CIDR remapped to a distinct range, each side's `localNAT*` = the other's `remoteNAT*`,
//!    keys and endpoints crossed; NETWORKING Pending, then Established (Connected) and
//!    None/TunnelEndpointError with the message (Error); unpeering on both sides removes the
//!    NetworkConfigs, TunnelEndpoints, the IPAM peers and the finalizer.
//! 2. Bad input: hand-made NetworkConfigs from the peer (its controllers stopped) with a
//!    host-bits CIDR, overlapping pod and external CIDRs, a bad key, a bad endpoint, a bad
//!    port, another cluster's ID: each refused naming the field (Warning Event and
//!    annotation), status unprocessed, no IPAM peer, no TunnelEndpoint; an IPv6 CIDR is
//!    refused by the apiserver; a corrected one with our own pod CIDR is remapped; a change
//!    of its announced ranges is refused by the IPAM. Then a peer that never answers: after
//!    the grace the ranges are released anyway (Warning Event) and the finalizer goes.
//!
//! The two tests take turns (one set of clusters at a time).

mod common;

use common::*;

use std::time::Instant;

use control::{
    api::{
        discovery::{ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T},
        net::{NetworkConfig, TunnelEndpoint},
    },
    consts::{labels, net},
    names,
};
use e2e::k8s::{self, Clusters};
use k8s_openapi::api::events::v1::Event;
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams},
    core::ApiResource,
};
use liqo_auth::tokens;
use liqo_controller_manager::network::{REFUSED_ANNOTATION, tunnel_name};
use serde_json::{Value, json};

const ROME_KEY: &str = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";
const MILAN_KEY: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
const ROME_PORT: u16 = 51820;
const MILAN_PORT: u16 = 51821;

/// The teardown grace of the bad-input test's rome (its peer never answers).
const GRACE: std::time::Duration = std::time::Duration::from_secs(4);

static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn init_log() {
    // Another test of this binary may have installed it: then that one is used.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// What `liqoctl peer out-of-band milan` writes on rome.
async fn peer(rome: &Side, milan: &Side) {
    let milan_token = tokens::local_token(&milan.client, "liqo").await.unwrap();
    tokens::write_remote_token(
        &rome.client,
        "liqo",
        &MILAN_ID.parse().unwrap(),
        &milan_token,
    )
    .await
    .unwrap();
    let fc: ForeignCluster = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": "milan", "labels": {labels::CLUSTER_ID: MILAN_ID}},
        "spec": {
            "clusterIdentity": {"clusterID": MILAN_ID, "clusterName": "milan"},
            "foreignAuthUrl": milan.url,
            "outgoingPeeringEnabled": "Yes",
            "incomingPeeringEnabled": "Auto",
            "insecureSkipTLSVerify": true,
        },
    }))
    .unwrap();
    Api::<ForeignCluster>::all(rome.client.clone())
        .create(&PostParams::default(), &fc)
        .await
        .unwrap();
}

async fn tep(c: &Client, ns: &str, name: &str) -> Result<TunnelEndpoint, String> {
    Api::<TunnelEndpoint>::namespaced(c.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no TunnelEndpoint {ns}/{name}"))
}

async fn set_connection(c: &Client, ns: &str, name: &str, connection: Value) {
    Api::<TunnelEndpoint>::namespaced(c.clone(), ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"connection": connection}})),
        )
        .await
        .unwrap();
}

async fn count<K>(c: &Client) -> usize
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    // Raw objects: a peer's bad value must not fail the count.
    let ar = ApiResource::erase::<K>(&());
    Api::<DynamicObject>::all_with(c.clone(), &ar)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn same_pod_cidr_clusters_get_crossed_tunnel_endpoints_and_unpeer_cleanly() {
    let _turn = TURN.lock().await;
    init_log();
    let bins = k8s::binaries().unwrap();
    let opts = options();
    let _down = DownOnDrop(opts.prefix.clone());
    let set = Clusters::up(&bins, &opts).await.unwrap();
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

    // NETWORKING follows the TunnelEndpoint's connection, as the gateway operator writes it.
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
            let fc = Api::<ForeignCluster>::all(milan.client.clone())
                .get("rome")
                .await
                .map_err(|e| e.to_string())?;
            let c = fc
                .status
                .unwrap_or_default()
                .peering_conditions
                .into_iter()
                .find(|c| c.type_ == T::NetworkStatus)
                .ok_or("no NetworkStatus")?;
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
    rome.stop().await;
    milan.stop().await;
}

/// Milan's NetworkConfig for rome, as its copy in rome's tenant namespace.
fn copy(ns: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "net.liqo.io/v1alpha1", "kind": "NetworkConfig",
        "metadata": {"name": name, "namespace": ns, "labels": {
            labels::REPLICATION: "false",
            labels::REPLICATED: "true",
            labels::ORIGIN_ID: MILAN_ID,
            labels::REMOTE_ID: ROME_ID,
        }},
        "spec": spec,
    })
}

fn good_spec(pod_cidr: &str) -> Value {
    json!({
        "cluster": {"clusterID": ROME_ID, "clusterName": "rome"},
        "podCIDR": pod_cidr,
        "externalCIDR": "10.201.0.0/16",
        "endpointIP": "192.0.2.7",
        "backendType": "wireguard",
        "backend_config": {"publicKey": MILAN_KEY, "port": "51821"},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bad_network_config_is_refused_naming_the_field_and_changes_nothing() {
    let _turn = TURN.lock().await;
    init_log();
    let bins = k8s::binaries().unwrap();
    let opts = options();
    let _down = DownOnDrop(opts.prefix.clone());
    let set = Clusters::up(&bins, &opts).await.unwrap();
    let pod_cidr = set.clusters[0].pod_cidr.to_string();
    let rome_id = identity(ROME_ID, "rome");
    let milan_id = identity(MILAN_ID, "milan");
    let rome = start_with(
        &set.clusters[0],
        &rome_id,
        Some(Net {
            public_key: ROME_KEY,
            port: ROME_PORT,
            grace: GRACE,
        }),
    )
    .await;
    // Milan without a network manager: it makes no NetworkConfig; the test writes them.
    let milan = start(&set.clusters[1], &milan_id).await;
    peer(&rome, &milan).await;
    eventually(30, "rome's outgoing peering", || {
        fc_conditions(
            &rome.client,
            "milan",
            &[(T::OutgoingPeering, S::Established)],
        )
    })
    .await;
    // Milan's controllers stop (its replicator would delete copies it has no source for).
    milan.stop().await;
    let ns = names::tenant_namespace(&milan_id).to_string();
    let rome_name = tunnel_name(&milan_id);
    eventually(20, "rome's own NetworkConfig", || async {
        Api::<NetworkConfig>::namespaced(rome.client.clone(), &ns)
            .get_opt(&rome_name)
            .await
            .map_err(|e| e.to_string())?
            .map(drop)
            .ok_or_else(|| "none".to_owned())
    })
    .await;
    let ar = ApiResource::erase::<NetworkConfig>(&());
    let ncs = Api::<DynamicObject>::namespaced_with(rome.client.clone(), &ns, &ar);
    let name = tunnel_name(&rome_id);

    // What the apiserver itself refuses (the CRD's pattern): an IPv6 CIDR.
    let mut v6 = good_spec(&pod_cidr);
    v6["podCIDR"] = json!("fd00::/8");
    let obj: DynamicObject = serde_json::from_value(copy(&ns, &name, v6)).unwrap();
    let e = ncs.create(&PostParams::default(), &obj).await.unwrap_err();
    assert!(e.to_string().contains("spec.podCIDR"), "{e}");

    // What reaches us: each refused naming the field.
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "podCIDR",
            json!("10.244.0.1/16"),
            "spec.podCIDR: 10.244.0.1/16 has host bits set",
        ),
        (
            "externalCIDR",
            json!(pod_cidr.clone()),
            "spec.externalCIDR: ",
        ),
        (
            "endpointIP",
            json!("gateway_milan.example"),
            "spec.endpointIP: ",
        ),
        (
            "backend_config",
            json!({"publicKey": "bm90IGEga2V5", "port": "51821"}),
            "spec.backend_config.publicKey: ",
        ),
        (
            "backend_config",
            json!({"publicKey": MILAN_KEY, "port": "0"}),
            "spec.backend_config.port: ",
        ),
        (
            "cluster",
            json!({"clusterID": NAPLES_ID, "clusterName": "naples"}),
            "spec.cluster.clusterID: ",
        ),
    ];
    for (field, value, want) in cases {
        let mut spec = good_spec(&pod_cidr);
        spec[field] = value;
        let obj: DynamicObject = serde_json::from_value(copy(&ns, &name, spec)).unwrap();
        ncs.create(&PostParams::default(), &obj).await.unwrap();
        eventually(20, &format!("{field} refused"), || async {
            let o = ncs.get(&name).await.map_err(|e| e.to_string())?;
            let a = o.metadata.annotations.unwrap_or_default();
            a.contains_key(REFUSED_ANNOTATION)
                .then_some(())
                .ok_or_else(|| "not annotated yet".to_owned())
        })
        .await;
        let refusal =
            ncs.get(&name).await.unwrap().metadata.annotations.unwrap()[REFUSED_ANNOTATION].clone();
        assert!(
            refusal.starts_with(want),
            "{refusal:?} does not start with {want:?}"
        );
        // The Warning Event names the field too.
        let msg = refusal.clone();
        eventually(20, "the Warning Event", || async {
            let events = Api::<Event>::namespaced(rome.client.clone(), &ns)
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            events
                .items
                .iter()
                .find(|e| {
                    e.type_.as_deref() == Some("Warning")
                        && e.reason.as_deref() == Some("NetworkConfigRefused")
                        && e.note.as_deref() == Some(msg.as_str())
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(&name)
                })
                .map(drop)
                .ok_or_else(|| format!("no Event {msg:?}"))
        })
        .await;
        // Nothing else changed: unprocessed, no IPAM peer, no TunnelEndpoint.
        let o = ncs.get(&name).await.unwrap();
        let processed = o.data.get("status").and_then(|s| s.get("processed"));
        assert!(processed.is_none_or(|p| p == false), "{processed:?}");
        assert!(ipam_peers(rome.ipam.as_ref().unwrap()).await.is_empty());
        assert_eq!(count::<TunnelEndpoint>(&rome.client).await, 0);
        ncs.delete(&name, &DeleteParams::default()).await.unwrap();
        eventually(10, "the copy deleted", || async {
            match ncs.get_opt(&name).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("still there".into()),
            }
        })
        .await;
    }

    // Our own pod CIDR (overlapping ours, as every same-CIDR peer does) is normal: remapped.
    let obj: DynamicObject =
        serde_json::from_value(copy(&ns, &name, good_spec(&pod_cidr))).unwrap();
    ncs.create(&PostParams::default(), &obj).await.unwrap();
    eventually(20, "the good copy processed", || async {
        let o = Api::<NetworkConfig>::namespaced(rome.client.clone(), &ns)
            .get(&name)
            .await
            .map_err(|e| e.to_string())?;
        let s = o.status.unwrap_or_default();
        let pods = s.pod_cidr_nat.and_then(|n| n.0).ok_or("not processed")?;
        if s.processed && pods.to_string() != pod_cidr {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    let peers = ipam_peers(rome.ipam.as_ref().unwrap()).await;
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].pod_cidr, pod_cidr);
    // Milan never processed ours (it is stopped): no TunnelEndpoint.
    assert_eq!(count::<TunnelEndpoint>(&rome.client).await, 0);

    // The peer changing its announced ranges is refused by the IPAM, naming both fields; the
    // ranges held stay.
    ncs.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"podCIDR": "10.100.0.0/16"}})),
    )
    .await
    .unwrap();
    eventually(20, "the changed ranges refused", || async {
        let o = ncs.get(&name).await.map_err(|e| e.to_string())?;
        let a = o.metadata.annotations.unwrap_or_default();
        match a.get(REFUSED_ANNOTATION) {
            Some(r)
                if r.starts_with("spec.podCIDR, spec.externalCIDR: liqo-ipam refused them: ") =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let peers = ipam_peers(rome.ipam.as_ref().unwrap()).await;
    assert_eq!(peers[0].pod_cidr, pod_cidr);

    // A peer that never answers: our NetworkConfig cannot go (held here by a finalizer of the
    // test's, as the replicator's would be by an unreachable peer); after the grace the
    // ranges are released anyway, with a Warning Event on the ForeignCluster, and the
    // network manager's finalizer goes.
    let own = Api::<NetworkConfig>::namespaced(rome.client.clone(), &ns);
    own.patch(
        &rome_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["test.liqo.io/hold"]}})),
    )
    .await
    .unwrap();
    let fcs = Api::<ForeignCluster>::all(rome.client.clone());
    fcs.delete("milan", &DeleteParams::default()).await.unwrap();
    let t = Instant::now();
    eventually(30, "released after the grace", || async {
        let fc = fcs.get("milan").await.map_err(|e| e.to_string())?;
        let f = fc.metadata.finalizers.unwrap_or_default();
        let peers = ipam_peers(rome.ipam.as_ref().unwrap()).await.len();
        if peers == 0 && !f.contains(&net::NETWORK_MANAGER_FINALIZER.to_owned()) {
            Ok(())
        } else {
            Err(format!("{peers} IPAM peers, finalizers {f:?}"))
        }
    })
    .await;
    let waited = t.elapsed();
    assert!(
        waited >= GRACE,
        "released after {waited:?}, before the grace"
    );
    // Still there, deleting: the grace did not wait for it.
    let held = own.get(&rome_name).await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    eventually(10, "the ReleasedAfterGrace Event", || async {
        let events = Api::<Event>::all(rome.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        events
            .items
            .iter()
            .find(|e| {
                e.reason.as_deref() == Some("ReleasedAfterGrace")
                    && e.type_.as_deref() == Some("Warning")
                    && e.note
                        .as_deref()
                        .is_some_and(|n| n.contains("our NetworkConfig"))
            })
            .map(drop)
            .ok_or_else(|| "no Event".to_owned())
    })
    .await;
    own.patch(
        &rome_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    rome.stop().await;
}
