//! The second half of `operators_k8s`: the operators with config files and fake daemons
//! serving `/status` for the files' digests. The files must be what the peering core's plan
//! gives (the IPAM's external CIDR and endpoint mappings in the gateway's), a bad
//! TunnelEndpoint stays an Error, a deleted one waits for the gateway and then every node's
//! agent, a bad `--node-name` is named, and a gateway operator whose Lease another took stops.

use std::{os::unix::fs::PermissionsExt, time::Duration};

use control::{
    api::net::ConnectionStatus,
    consts::{keys, net, objects},
};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Secret},
};
use kube::{Api, api::DeleteParams};
use liqo_peering::plan;
use liqo_types::ClusterId;

use super::{GW, RT};
use crate::common::{
    Op, Setup,
    daemons::Fake,
    eventually, none_forbidden,
    objects::{
        NODES, create_tep, finalizers, gateway_args, gone, key, milan_peering, route_args, tep,
        teps, want,
    },
};

/// Runs the phase on the cluster of `set`; `secrets`: the liqo namespace's Secrets.
pub(crate) async fn phase(set: &Setup, secrets: &Api<Secret>) {
    let Setup {
        admin,
        gw_kc,
        rt_kc,
        dir,
        gw_base,
        ov_base,
        ..
    } = set;
    let admin = admin.clone();
    // With config files and daemons; the key the gateway used so far (its key file) is adopted
    // when no Secret holds one.
    let gw_cfg = dir.path().join("gateway.yaml");
    let key_file = dir.path().join("keys/private.key");
    for name in [net::PRIVATE_KEY_SECRET, net::PUBLIC_KEY_SECRET] {
        secrets
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    let adopted = liqo_gateway_api::keys::PrivateKey::load_or_create(&key_file).unwrap();
    let public = adopted.public();
    let fake_gw = Fake::gateway(gw_cfg.clone());
    let ov: Vec<(std::path::PathBuf, Fake)> = NODES
        .iter()
        .map(|n| {
            let p = dir.path().join(format!("overlay-{n}.yaml"));
            (p.clone(), Fake::overlay(p))
        })
        .collect();
    // The IPAM knows milan and exposes a node address to it (an endpoint mapping).
    let (ipam_addr, mut ipam) = crate::common::ipam::serve("10.244.0.0/16").await;
    use ipam::service::proto;
    ipam.remap(proto::RemapRequest {
        cluster_id: "milan".into(),
        pod_cidr: "10.244.0.0/16".into(),
        external_cidr: "10.201.0.0/16".into(),
    })
    .await
    .unwrap();
    ipam.set_peer_view(proto::SetPeerViewRequest {
        cluster_id: "milan".into(),
        our_pod_view: "10.50.0.0/16".into(),
        our_external_view: "10.201.0.0/16".into(),
    })
    .await
    .unwrap();
    let mapped = ipam
        .map_ip(proto::MapIpRequest {
            cluster_id: "milan".into(),
            ip: "172.30.0.2".into(),
            direction: proto::Direction::Endpoint.into(),
            holder: "netops-test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let listed = ipam.list(proto::Empty {}).await.unwrap().into_inner();
    let files = Some((
        gw_cfg.as_path(),
        fake_gw.url.as_str(),
        key_file.as_path(),
        ipam_addr.as_str(),
    ));
    let gw = Op::start(
        GW,
        "gw",
        gw_kc,
        dir.path(),
        &gateway_args(gw_base, files, crate::common::free_port()),
    );
    let rts: Vec<Op> = NODES
        .iter()
        .zip(&ov)
        .map(|(n, (p, f))| {
            let args = route_args(n, ov_base, Some((p.as_path(), f.url.as_str())));
            Op::start(RT, &format!("rt-{n}"), rt_kc, dir.path(), &args)
        })
        .collect();
    create_tep(&admin, &tep("milan", 71, &key(71).to_string())).await;
    want(
        &admin,
        "milan",
        ConnectionStatus::Connected,
        "handshake seen recently",
    )
    .await;
    want(
        &admin,
        "turin",
        ConnectionStatus::Error,
        "spec.backend_config.publicKey",
    )
    .await;
    // The gateway's file: the base, the core's peer list for milan only, our external CIDR.
    let file =
        liqo_gateway_api::config::File::parse(&std::fs::read_to_string(&gw_cfg).unwrap()).unwrap();
    assert_eq!(file.peers, plan::gateway_peers(&milan_peering()));
    // Our external CIDR and the endpoint mappings: the IPAM's.
    assert_eq!(
        file.local_external_cidr.unwrap().to_string(),
        listed.external_cidr
    );
    assert_eq!(file.endpoints.len(), 1, "{:?}", file.endpoints);
    assert_eq!(file.endpoints[0].ip.to_string(), "172.30.0.2");
    assert_eq!(
        file.endpoints[0].external_ip.to_string(),
        mapped.external_ip
    );
    assert_eq!(
        file.endpoints[0].peers,
        ["milan".parse::<ClusterId>().unwrap()]
    );
    assert_eq!(file.listen_port, Some(51840));
    assert_eq!(
        file.private_key_file.as_deref(),
        Some(key_file.to_str().unwrap())
    );
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let on_disk = std::fs::read_to_string(&key_file).unwrap();
    assert_eq!(
        liqo_gateway_api::keys::PrivateKey::parse(on_disk.trim())
            .unwrap()
            .public(),
        public
    );
    // Announced once the gateway reports it runs it (the fake reports its config's key).
    let announced = || async {
        let s = secrets
            .get(net::PUBLIC_KEY_SECRET)
            .await
            .map_err(|e| e.to_string())?;
        let v = s.data.unwrap_or_default()[net::PUBLIC_KEY].0.clone();
        Ok::<_, String>(String::from_utf8(v).unwrap())
    };
    eventually(30, "the adopted key announced", || async {
        let k = announced().await?;
        (k == public.to_string()).then_some(()).ok_or(k)
    })
    .await;
    // Rotations: one asked for on the Secret (as `liqoctl rotate-key` asks), then the Secret
    // deleted: each makes a new key, in the key file (0600) first, then in the config, and
    // announced only once the gateway runs it.
    let mut last = public;
    for how in ["asked", "deleted"] {
        if how == "asked" {
            let ask = serde_json::json!({"metadata": {"annotations": {net::ROTATE_KEY_ANNOTATION: "r1"}}});
            secrets
                .patch(
                    net::PRIVATE_KEY_SECRET,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&ask),
                )
                .await
                .unwrap();
        } else {
            secrets
                .delete(net::PRIVATE_KEY_SECRET, &DeleteParams::default())
                .await
                .unwrap();
        }
        eventually(30, &format!("a new key ({how})"), || async {
            let on_disk = std::fs::read_to_string(&key_file).map_err(|e| e.to_string())?;
            let k = liqo_gateway_api::keys::PrivateKey::parse(on_disk.trim())
                .map_err(|e| e.to_string())?
                .public();
            if k == last {
                return Err("the old key in the key file".into());
            }
            let cfg =
                liqo_gateway_api::config::File::parse(&std::fs::read_to_string(&gw_cfg).unwrap())
                    .map_err(|e| e.to_string())?;
            if cfg.public_key != Some(k) {
                return Err(format!("config names {:?}, key file {k}", cfg.public_key));
            }
            let stored = secrets
                .get(net::PRIVATE_KEY_SECRET)
                .await
                .map_err(|e| e.to_string())?;
            let served = stored
                .metadata
                .annotations
                .unwrap_or_default()
                .get(net::KEY_ROTATED_ANNOTATION)
                .cloned();
            if how == "asked" && served.as_deref() != Some("r1") {
                return Err(format!("rotation not recorded as served: {served:?}"));
            }
            let a = announced().await?;
            if a != k.to_string() {
                return Err(format!("announced {a}, runs {k}"));
            }
            Ok(())
        })
        .await;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{how}");
        let on_disk = std::fs::read_to_string(&key_file).unwrap();
        last = liqo_gateway_api::keys::PrivateKey::parse(on_disk.trim())
            .unwrap()
            .public();
    }
    // Each agent's file: the core's overlay plan for its node.
    let cm = Api::<ConfigMap>::namespaced(admin.clone(), "liqo")
        .get(objects::CLUSTER_ID_CONFIGMAP)
        .await
        .unwrap();
    let cluster: ClusterId = cm.data.unwrap()[keys::CLUSTER_ID].parse().unwrap();
    let all_nodes = Api::<k8s_openapi::api::core::v1::Node>::all(admin.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    let (nodes, _) = control::network::routes::overlay_nodes(&all_nodes);
    let plan = plan::overlay(&cluster, &nodes, NODES[0], &milan_peering()).unwrap();
    for (p, _) in &ov {
        eventually(30, "the overlay files", || async {
            let f = liqo_overlay_api::config::File::parse(
                &std::fs::read_to_string(p).unwrap_or_default(),
            )
            .map_err(|e| e.to_string())?;
            let want = plan
                .per_node()
                .into_iter()
                .find(|n| n.node == f.node)
                .ok_or("node")?;
            let ok = f.gateway == want.gateway_node
                && f.nodes == want.nodes
                && f.remote_cidrs == want.remote_cidrs
                && f.underlay_interface.as_deref() == Some("eth0");
            if ok {
                Ok(())
            } else {
                Err(format!("{f:?} vs {want:?}"))
            }
        })
        .await;
    }
    // Deletion waits for the gateway, then for every agent.
    fake_gw.freeze();
    ov[1].1.freeze();
    teps(&admin, "liqo-tenant-milan")
        .delete("milan", &DeleteParams::default())
        .await
        .unwrap();
    eventually(30, "milan out of every file", || async {
        let g = std::fs::read_to_string(&gw_cfg).unwrap();
        let o: Vec<String> = ov
            .iter()
            .map(|(p, _)| std::fs::read_to_string(p).unwrap())
            .collect();
        // (The IPAM's endpoint mapping for milan stays until the network manager releases it.)
        let peers = liqo_gateway_api::config::File::parse(&g)
            .map_err(|e| e.to_string())?
            .peers;
        if !peers.is_empty() || o.iter().any(|t| t.contains("10.71.0.0")) {
            Err("still rendered".into())
        } else {
            Ok(())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let f = finalizers(&admin, "milan")
        .await
        .expect("held while the gateway lists milan");
    assert!(f.contains(&net::GATEWAY_FINALIZER.to_owned()), "{f:?}");
    fake_gw.thaw();
    eventually(30, "the gateway's hold released", || async {
        let f = finalizers(&admin, "milan").await.ok_or("gone too early")?;
        if f == [net::ROUTE_FINALIZER] {
            Ok(())
        } else {
            Err(format!("{f:?}"))
        }
    })
    .await;
    ov[1].1.thaw();
    gone(&admin, "milan").await;
    want(
        &admin,
        "turin",
        ConnectionStatus::Error,
        "spec.backend_config.publicKey",
    )
    .await;

    // A bad flag: a node that does not exist.
    let args: Vec<String> = route_args("nope", ov_base, None);
    let out = std::process::Command::new(RT)
        .args(&args)
        .env("KUBECONFIG", rt_kc)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--node-name nope"), "{err}");
    none_forbidden(std::iter::once(&gw).chain(&rts));
    for op in std::iter::once(&gw).chain(&rts) {
        assert!(op.log().contains("starting"), "{}:\n{}", op.name, op.log());
    }
    // Another gateway operator took the Lease: this one stops (within a renewal).
    let mut gw = gw;
    let taken = serde_json::json!({"spec": {"holderIdentity": NODES[1]}});
    Api::<Lease>::namespaced(admin.clone(), "liqo")
        .patch(
            net::GATEWAY_LEASE,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&taken),
        )
        .await
        .unwrap();
    let status = gw.exited(25);
    assert!(!status.success());
    assert!(
        gw.log()
            .contains("another gateway operator replaced this one"),
        "{}",
        gw.log()
    );
    for r in rts {
        assert!(r.stop().success());
    }
}
