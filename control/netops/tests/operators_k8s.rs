//! The gateway and route operators as processes, each with its own ServiceAccount bound to the
//! chart's ClusterRole, against a real API server of the harness: TunnelEndpoints made by
//! hand; first without a data plane (`--fake-dataplane`), then with config files and fake
//! daemons serving `/status` for the files' digests. The files must be what the peering core's
//! plan gives, a bad TunnelEndpoint must get an Error naming its field while the others are
//! rendered, and a deleted TunnelEndpoint must stay until the gateway and every node's agent
//! dropped it.

mod common;

use std::{os::unix::fs::PermissionsExt, time::Duration};

use common::{
    Op,
    daemons::Fake,
    eventually, node,
    objects::{
        NODES, create_tep, finalizers, gateway_args, gone, key, milan_peering, route_args, tep,
        teps, want,
    },
    service_account,
};
use control::{
    api::net::{ConnectionStatus, TunnelEndpoint},
    consts::{keys, net, objects},
};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Namespace, Secret, Service},
};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use liqo_peering::plan;
use liqo_types::ClusterId;

const GW: &str = env!("CARGO_BIN_EXE_liqo-gateway-operator");
const RT: &str = env!("CARGO_BIN_EXE_liqo-route-operator");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_render_the_cores_plan_report_connections_and_hold_their_finalizers() {
    let (c, admin, _down) = common::cluster().await;
    let gw_kc = service_account(&c, &admin, "liqo-gateway-operator").await;
    let rt_kc = service_account(&c, &admin, "liqo-route-operator").await;
    node(&admin, NODES[0], "172.30.0.1", "10.244.0.0/24").await;
    node(&admin, NODES[1], "172.30.0.2", "10.244.1.0/24").await;
    for peer in ["milan", "turin", "naples"] {
        let ns: Namespace = serde_json::from_value(
            serde_json::json!({"metadata": {"name": format!("liqo-tenant-{peer}")}}),
        )
        .unwrap();
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let gw_base = dir.path().join("gateway-base.yaml");
    std::fs::write(&gw_base, "localPodCIDR: 10.244.0.0/16\nlistenPort: 51840\n").unwrap();
    let ov_base = dir.path().join("overlay-base.yaml");
    std::fs::write(&ov_base, "underlayInterface: eth0\n").unwrap();
    // The gateway's NodePort Service: the operator writes its node's address on it.
    let svc: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "liqo-gateway", "namespace": "liqo",
            "labels": {net::GATEWAY_SERVICE_LABEL: "true"}},
        "spec": {"type": "NodePort", "selector": {"app": "liqo-gateway"},
            "ports": [{"name": "wireguard", "protocol": "UDP", "port": 5871}]},
    }))
    .unwrap();
    Api::<Service>::namespaced(admin.clone(), "liqo")
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
    create_tep(&admin, &tep("milan", 71, &key(71).to_string())).await;
    create_tep(&admin, &tep("turin", 73, "not-a-key")).await;
    // A CIDR with host bits passes the CRD's pattern but is no network.
    let mut naples = tep("naples", 74, &key(74).to_string());
    naples.data["spec"]["remotePodCIDR"] = "10.244.0.1/16".into();
    create_tep(&admin, &naples).await;

    // Without a data plane.
    let metrics = common::free_port();
    let gw = Op::start(
        GW,
        "gw-fake",
        &gw_kc,
        dir.path(),
        &gateway_args(&gw_base, None, metrics),
    );
    let rts: Vec<Op> = NODES
        .iter()
        .map(|n| {
            Op::start(
                RT,
                &format!("rt-fake-{n}"),
                &rt_kc,
                dir.path(),
                &route_args(n, &ov_base, None),
            )
        })
        .collect();
    want(
        &admin,
        "milan",
        ConnectionStatus::Connected,
        "fake-dataplane",
    )
    .await;
    want(
        &admin,
        "turin",
        ConnectionStatus::Error,
        "spec.backend_config.publicKey",
    )
    .await;
    want(
        &admin,
        "naples",
        ConnectionStatus::Error,
        "spec.remotePodCIDR: 10.244.0.1/16",
    )
    .await;
    eventually(
        30,
        "the gateway Service annotated with its node's address",
        || async {
            let s = Api::<Service>::namespaced(admin.clone(), "liqo")
                .get("liqo-gateway")
                .await
                .map_err(|e| e.to_string())?;
            let a = s.metadata.annotations.unwrap_or_default();
            match a.get(net::GATEWAY_NODE_IP_ANNOTATION).map(String::as_str) {
                Some("172.30.0.1") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let milan = Api::<TunnelEndpoint>::namespaced(admin.clone(), "liqo-tenant-milan")
        .get("milan")
        .await
        .unwrap();
    assert_eq!(
        milan.status.unwrap().gateway_ip.as_deref(),
        Some("172.30.0.1")
    );
    eventually(30, "both finalizers on milan", || async {
        let f = finalizers(&admin, "milan").await.unwrap_or_default();
        let all = [net::GATEWAY_FINALIZER, net::ROUTE_FINALIZER];
        if all.iter().all(|x| f.iter().any(|y| y == x)) {
            Ok(())
        } else {
            Err(format!("{f:?}"))
        }
    })
    .await;
    // Every node's route operator holds the route finalizer under its own field manager.
    let obj = teps(&admin, "liqo-tenant-milan")
        .get("milan")
        .await
        .unwrap();
    for n in NODES {
        let m = liqo_netops::route_op::manager(n);
        assert!(
            liqo_netops::kube::owns_finalizer(&obj.metadata, &m, net::ROUTE_FINALIZER),
            "{m} holds it: {:?}",
            obj.metadata.managed_fields
        );
    }
    let lease = Api::<Lease>::namespaced(admin.clone(), "liqo")
        .get(net::GATEWAY_LEASE)
        .await
        .unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some(NODES[0])
    );
    let secrets = Api::<Secret>::namespaced(admin.clone(), "liqo");
    let data = |s: Secret, k: &str| String::from_utf8(s.data.unwrap()[k].0.clone()).unwrap();
    let private = data(
        secrets.get(net::PRIVATE_KEY_SECRET).await.unwrap(),
        net::PRIVATE_KEY,
    );
    let public_secret = secrets.get(net::PUBLIC_KEY_SECRET).await.unwrap();
    assert_eq!(
        public_secret.metadata.labels.as_ref().unwrap()[net::KEY_LABEL],
        net::WIREGUARD
    );
    let public = gateway::keys::PrivateKey::parse(&private).unwrap().public();
    assert_eq!(data(public_secret, net::PUBLIC_KEY), public.to_string());
    assert!(
        !gw.log().contains(&private),
        "the private key is never logged"
    );
    let m = e2e::liqo::probe(&format!("http://127.0.0.1:{metrics}/metrics")).await;
    assert!(m.is_ok(), "{m:?}");
    // A third and a fourth node's route operators hold milan too, then the third node goes for
    // good and the fourth is NotReady for longer than the grace (their operators with them):
    // the gateway node's operator forgets both holds, so milan still goes.
    node(&admin, "ops-n2", "172.30.0.3", "10.244.2.0/24").await;
    node(&admin, "ops-n3", "172.30.0.4", "10.244.3.0/24").await;
    let mut dead = Vec::new();
    for n in ["ops-n2", "ops-n3"] {
        let op = Op::start(
            RT,
            &format!("rt-fake-{n}"),
            &rt_kc,
            dir.path(),
            &route_args(n, &ov_base, None),
        );
        let m = liqo_netops::route_op::manager(n);
        eventually(30, &format!("{n}'s hold on milan"), || async {
            let o = teps(&admin, "liqo-tenant-milan")
                .get("milan")
                .await
                .map_err(|e| e.to_string())?;
            liqo_netops::kube::owns_finalizer(&o.metadata, &m, net::ROUTE_FINALIZER)
                .then_some(())
                .ok_or_else(|| "not yet".to_owned())
        })
        .await;
        dead.push(op);
    }
    drop(dead); // SIGKILL: they never release their holds.
    let not_ready = serde_json::json!({"status": {"conditions": [{"type": "Ready",
        "status": "Unknown", "reason": "NodeStatusUnknown", "message": "test",
        "lastHeartbeatTime": "2020-01-01T00:00:00Z",
        "lastTransitionTime": "2020-01-01T00:00:00Z"}]}});
    Api::<k8s_openapi::api::core::v1::Node>::all(admin.clone())
        .patch_status(
            "ops-n3",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&not_ready),
        )
        .await
        .unwrap();
    Api::<k8s_openapi::api::core::v1::Node>::all(admin.clone())
        .delete("ops-n2", &DeleteParams::default())
        .await
        .unwrap();
    teps(&admin, "liqo-tenant-milan")
        .delete("milan", &DeleteParams::default())
        .await
        .unwrap();
    gone(&admin, "milan").await;
    assert!(
        rts[0]
            .log()
            .contains("forgetting the route holds of nodes that are gone"),
        "{}",
        rts[0].log()
    );
    for op in std::iter::once(&gw).chain(&rts) {
        let log = op.log();
        assert!(
            !log.to_lowercase().contains("forbidden"),
            "{}:\n{log}",
            op.name
        );
    }
    assert!(gw.stop().success());
    for r in rts {
        assert!(r.stop().success());
    }

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
    let adopted = gateway::keys::PrivateKey::load_or_create(&key_file).unwrap();
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
    let (ipam_addr, mut ipam) = common::ipam::serve("10.244.0.0/16").await;
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
        &gw_kc,
        dir.path(),
        &gateway_args(&gw_base, files, common::free_port()),
    );
    let rts: Vec<Op> = NODES
        .iter()
        .zip(&ov)
        .map(|(n, (p, f))| {
            let args = route_args(n, &ov_base, Some((p.as_path(), f.url.as_str())));
            Op::start(RT, &format!("rt-{n}"), &rt_kc, dir.path(), &args)
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
    let file = gateway::config::File::parse(&std::fs::read_to_string(&gw_cfg).unwrap()).unwrap();
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
        gateway::keys::PrivateKey::parse(on_disk.trim())
            .unwrap()
            .public(),
        public
    );
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
    let (nodes, _) = liqo_netops::route_plan::overlay_nodes(&all_nodes);
    let plan = plan::overlay(&cluster, &nodes, NODES[0], &milan_peering()).unwrap();
    for (p, _) in &ov {
        eventually(30, "the overlay files", || async {
            let f = overlay::config::File::parse(&std::fs::read_to_string(p).unwrap_or_default())
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
        let peers = gateway::config::File::parse(&g)
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
    let args: Vec<String> = route_args("nope", &ov_base, None);
    let out = std::process::Command::new(RT)
        .args(&args)
        .env("KUBECONFIG", &rt_kc)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--node-name nope"), "{err}");
    // Least privilege is enough: no call (or watch) was forbidden.
    for op in std::iter::once(&gw).chain(&rts) {
        let log = op.log();
        assert!(
            !log.to_lowercase().contains("forbidden"),
            "{}:\n{log}",
            op.name
        );
        assert!(log.contains("starting"), "{}:\n{log}", op.name);
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
