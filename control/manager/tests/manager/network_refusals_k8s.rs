//! The network manager refusing bad input, on two real clusters (the test kit's harness): rome runs
//! liqo-auth, an in-process liqo-ipam and the controllers; milan peers without a network
//! manager, then its controllers stop, and the test writes milan's NetworkConfig copies in
//! rome (rome's own NetworkConfig waits for the gateway's key Secret). Each bad one (a host-bits CIDR, overlapping pod and external CIDRs, a bad key, a bad
//! endpoint, a bad port, another cluster's ID) is refused naming the field (Warning Event,
//! `status.refused` and annotation), status unprocessed, no IPAM peer, no TunnelEndpoint; an IPv6 CIDR is refused
//! by the apiserver; a good one with rome's own pod CIDR is remapped; a change of its announced
//! ranges is refused by the IPAM, once (the copy left unwritten, one Event), and its earlier
//! decision withdrawn (unprocessed, no NAT); going back clears the refusal. Milan, without a network manager, lets a deleted
//! ForeignCluster holding the network finalizer go (Event). Then a peer that never answers: after the grace the ranges
//! are released anyway (Warning Event) and the finalizer goes.

use crate::common;

use common::{net::*, *};

/// The teardown grace of rome (its peer never answers).
const GRACE: std::time::Duration = std::time::Duration::from_secs(4);

use std::time::Instant;

use control::{
    api::{
        discovery::{ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T},
        net::{NetworkConfig, TunnelEndpoint},
    },
    consts::{labels, net},
    names,
};
use k8s_openapi::api::events::v1::Event;
use kube::{
    Api,
    api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams},
    core::ApiResource,
};
use liqo_controller_manager::network::{self, REFUSED_ANNOTATION, tunnel_name};
use serde_json::{Value, json};
use testkit::k8s;

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

/// The refusal of a copy, from its status (what the peer sees) and its annotation, which must
/// agree (an error while they differ: one is being written); `None` when neither holds one.
fn refusal(o: &DynamicObject) -> Result<Option<String>, String> {
    let status = o.data.get("status").and_then(|s| s.get("refused"));
    let status = status.map(|v| v.as_str().expect("status.refused is a string").to_owned());
    let annotated = o
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REFUSED_ANNOTATION).cloned());
    if status == annotated {
        Ok(status)
    } else {
        Err(format!(
            "status.refused {status:?}, annotation {annotated:?}"
        ))
    }
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
    init_log();
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, TWO_SAME).await.unwrap();
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
    // The gateway operator has not made its key yet: no NetworkConfig until it does.
    let secrets =
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(rome.client.clone(), "liqo");
    let key = secrets.get(net::PUBLIC_KEY_SECRET).await.unwrap();
    secrets
        .delete(net::PUBLIC_KEY_SECRET, &DeleteParams::default())
        .await
        .unwrap();
    peer(&rome, &milan).await;
    eventually(30, "rome's outgoing peering", || {
        fc_conditions(
            &rome.client,
            "milan",
            &[(T::OutgoingPeering, S::Established)],
        )
    })
    .await;
    // Milan runs without a network manager: a ForeignCluster still holding the network
    // finalizer (from a run with an IPAM) is let go when deleted, with an Event saying the
    // ranges were not released.
    let milan_fcs = Api::<ForeignCluster>::all(milan.client.clone());
    let naples: ForeignCluster = serde_json::from_value(json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": "naples", "labels": {labels::CLUSTER_ID: NAPLES_ID},
            "finalizers": [net::NETWORK_MANAGER_FINALIZER]},
        "spec": {
            "clusterIdentity": {"clusterID": NAPLES_ID, "clusterName": "naples"},
            "foreignAuthUrl": "https://127.0.0.1:1",
            "outgoingPeeringEnabled": "No",
            "incomingPeeringEnabled": "No",
            "networkingEnabled": "Yes",
        },
    }))
    .unwrap();
    milan_fcs
        .create(&PostParams::default(), &naples)
        .await
        .unwrap();
    milan_fcs
        .delete("naples", &DeleteParams::default())
        .await
        .unwrap();
    eventually(20, "naples let go without a network manager", || async {
        match milan_fcs
            .get_opt("naples")
            .await
            .map_err(|e| e.to_string())?
        {
            None => Ok(()),
            Some(fc) => Err(format!("finalizers {:?}", fc.metadata.finalizers)),
        }
    })
    .await;
    eventually(10, "the NetworkNotReleased Event", || {
        warning_event(
            &milan.client,
            None,
            network::abandon::REASON_NOT_RELEASED,
            "naples",
            |n| n.contains("not released"),
        )
    })
    .await;
    // Milan's controllers stop (its replicator would delete copies it has no source for).
    milan.stop().await;
    let ns = names::tenant_namespace(&milan_id).to_string();
    let rome_name = tunnel_name(&milan_id);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(count::<NetworkConfig>(&rome.client).await, 0);
    let mut key = key;
    key.metadata = kube::api::ObjectMeta {
        name: key.metadata.name,
        namespace: key.metadata.namespace,
        labels: key.metadata.labels,
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &key).await.unwrap();
    eventually(
        20,
        "rome's own NetworkConfig once the key exists",
        || async {
            Api::<NetworkConfig>::namespaced(rome.client.clone(), &ns)
                .get_opt(&rome_name)
                .await
                .map_err(|e| e.to_string())?
                .map(drop)
                .ok_or_else(|| "none".to_owned())
        },
    )
    .await;
    // The peer refusing OUR NetworkConfig (its status.refused, as milan's replicator would
    // reflect it back): NETWORKING says so.
    let own = Api::<NetworkConfig>::namespaced(rome.client.clone(), &ns);
    own.patch_status(
        &rome_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"processed": false, "refused": "spec.podCIDR: test"}})),
    )
    .await
    .unwrap();
    eventually(20, "NETWORKING names the peer's refusal", || async {
        let c = network_condition(&rome.client, "milan").await?;
        (c.message.as_deref() == Some("milan refused our NetworkConfig: spec.podCIDR: test"))
            .then_some(())
            .ok_or_else(|| format!("{:?}", c.message))
    })
    .await;
    own.patch_status(
        &rome_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"refused": null}})),
    )
    .await
    .unwrap();
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
            refusal(&ncs.get(&name).await.map_err(|e| e.to_string())?)?
                .map(drop)
                .ok_or_else(|| "not refused yet".to_owned())
        })
        .await;
        // The status (reflected to the peer) and the annotation name the field.
        let o = ncs.get(&name).await.unwrap();
        let msg = refusal(&o).unwrap().unwrap();
        assert!(
            msg.starts_with(want),
            "{msg:?} does not start with {want:?}"
        );
        // The Warning Event names the field too.
        eventually(20, "the Warning Event", || {
            warning_event(
                &rome.client,
                Some(&ns),
                network::REASON_REFUSED,
                &name,
                |n| n == msg,
            )
        })
        .await;
        // Nothing else changed: unprocessed, no IPAM peer, no TunnelEndpoint.
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
        if s.processed && pods.to_string() != pod_cidr && s.refused.is_none() {
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
        match refusal(&o)? {
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
    // The decision taken for the earlier spec is withdrawn: unprocessed, no NAT fields (the
    // peer must not record them for its new spec).
    let o = ncs.get(&name).await.unwrap();
    let status = o.data.get("status").cloned().unwrap_or_default();
    assert_eq!(status.get("processed"), Some(&json!(false)), "{status}");
    assert!(status.get("podCIDRNAT").is_none(), "{status}");
    assert!(status.get("externalCIDRNAT").is_none(), "{status}");
    // The refusal holds while the spec stays: no retry, no new Event, no write for 5 s.
    let refused = refusal(&o).unwrap().unwrap();
    let version = o.metadata.resource_version.clone();
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let o = ncs.get(&name).await.unwrap();
    assert_eq!(
        o.metadata.resource_version, version,
        "the refused copy was written again: {:?}",
        o.metadata.annotations
    );
    let events = Api::<Event>::namespaced(rome.client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let matching: Vec<&Event> = events
        .items
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some(network::REASON_REFUSED)
                && e.note.as_deref() == Some(refused.as_str())
        })
        .collect();
    assert_eq!(matching.len(), 1, "{matching:?}");
    assert!(
        matching[0].series.as_ref().is_none_or(|s| s.count <= 1),
        "refused again and again: {:?}",
        matching[0].series
    );
    // The peer going back to the ranges held: accepted again, the refusal cleared from the
    // status and the annotations.
    ncs.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"podCIDR": pod_cidr}})),
    )
    .await
    .unwrap();
    eventually(20, "the refusal cleared", || async {
        let o = ncs.get(&name).await.map_err(|e| e.to_string())?;
        let a = o.metadata.annotations.clone().unwrap_or_default();
        let status = o.data.get("status").cloned().unwrap_or_default();
        if refusal(&o)?.is_none()
            && !a.contains_key(REFUSED_ANNOTATION)
            && status.get("refused").is_none()
            && status.get("processed") == Some(&json!(true))
        {
            Ok(())
        } else {
            Err(format!("{a:?} {status}"))
        }
    })
    .await;

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
    eventually(10, "the ReleasedAfterGrace Event", || {
        warning_event(
            &rome.client,
            None,
            network::REASON_RELEASED_AFTER_GRACE,
            "milan",
            |n| n.contains("our NetworkConfig"),
        )
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
    set.release().await.unwrap();
}
