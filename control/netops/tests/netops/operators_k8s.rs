//! The gateway and route operators as processes, each with its own ServiceAccount bound to the
//! chart's ClusterRole, against a real API server of the harness: TunnelEndpoints made by
//! hand; first without a data plane (`--fake-dataplane`), then with config files and fake
//! daemons serving `/status` for the files' digests (`operators/files.rs`). The files must be
//! what the peering core's plan gives, a bad TunnelEndpoint must get an Error naming its field while the others are
//! rendered, and a deleted TunnelEndpoint must stay until the gateway and every node's agent
//! dropped it. Last, active/standby gateways (`operators/ha.rs`).

use crate::common;
#[path = "operators/files.rs"]
mod files;
#[path = "operators/ha.rs"]
mod ha;

use common::{
    Op, Setup, eventually, node, none_forbidden,
    objects::{NODES, create_tep, gateway_args, gone, held, key, route_args, tep, teps, want},
};
use control::{
    api::net::{ConnectionStatus, TunnelEndpoint},
    consts::net,
};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Secret, Service},
};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};

pub(crate) const GW: &str = env!("CARGO_BIN_EXE_liqo-gateway-operator");
pub(crate) const RT: &str = env!("CARGO_BIN_EXE_liqo-route-operator");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_render_the_cores_plan_report_connections_and_hold_their_finalizers() {
    let set = common::setup(2, &["milan", "turin", "naples"]).await;
    let Setup {
        admin,
        gw_kc,
        rt_kc,
        dir,
        gw_base,
        ov_base,
        ..
    } = &set;
    let admin = admin.clone();
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
        gw_kc,
        dir.path(),
        &gateway_args(gw_base, None, metrics),
    );
    let rts: Vec<Op> = NODES
        .iter()
        .map(|n| {
            Op::start(
                RT,
                &format!("rt-fake-{n}"),
                rt_kc,
                dir.path(),
                &route_args(n, ov_base, None),
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
    held(
        &admin,
        "milan",
        &[net::GATEWAY_FINALIZER, net::ROUTE_FINALIZER],
    )
    .await;
    // Every node's route operator holds the route finalizer under its own field manager (each
    // applies it as it reconciles: one may come a moment after another's made it present).
    for n in NODES {
        let m = liqo_netops::route_op::manager(n);
        eventually(30, &format!("{m} holds the route finalizer"), || async {
            let obj = teps(&admin, "liqo-tenant-milan")
                .get("milan")
                .await
                .map_err(|e| e.to_string())?;
            if liqo_netops::kube::owns_finalizer(&obj.metadata, &m, net::ROUTE_FINALIZER) {
                Ok(())
            } else {
                Err(format!("{:?}", obj.metadata.managed_fields))
            }
        })
        .await;
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
    let public = liqo_gateway_api::keys::PrivateKey::parse(&private)
        .unwrap()
        .public();
    assert_eq!(data(public_secret, net::PUBLIC_KEY), public.to_string());
    assert!(
        !gw.log().contains(&private),
        "the private key is never logged"
    );
    let m = testkit::liqo::probe(&format!("http://127.0.0.1:{metrics}/metrics")).await;
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
            rt_kc,
            dir.path(),
            &route_args(n, ov_base, None),
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
    none_forbidden(std::iter::once(&gw).chain(&rts));
    assert!(gw.stop().success());
    for r in rts {
        assert!(r.stop().success());
    }

    files::phase(&set, &secrets).await;
    ha::phase(&set).await;
}
