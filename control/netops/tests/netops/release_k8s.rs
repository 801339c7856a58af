//! A deleted TunnelEndpoint never hangs on the data plane (harness, operators as processes with
//! the chart's ClusterRoles): a gateway and an agent whose `/status` cannot be read let it go
//! once `--release-grace` has passed since the deletion, each with a Warning Event; with no
//! gateway (the Lease has no holder) the route operator releases its hold at once.

use crate::common;

use common::{
    Op, Setup, eventually, none_forbidden,
    objects::{NODES, create_tep, gone, held, key, route_args, s, tep, teps},
};
use control::consts::net;
use k8s_openapi::api::{coordination::v1::Lease, events::v1::Event};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};

const GW: &str = env!("CARGO_BIN_EXE_liqo-gateway-operator");
const RT: &str = env!("CARGO_BIN_EXE_liqo-route-operator");
/// Nothing listens there.
const DEAD_STATUS: &str = "http://127.0.0.1:1/status";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_tunnelendpoint_goes_without_an_unreachable_daemon_or_a_gateway() {
    let set = common::setup(1, &["milan"]).await;
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

    // Daemons that cannot be read, a short grace.
    let gw_args = vec![
        s("--node-name"),
        s(NODES[0]),
        s("--base-config"),
        s(gw_base.display()),
        s("--config"),
        s(dir.path().join("gateway.yaml").display()),
        s("--gateway-status-url"),
        s(DEAD_STATUS),
        s("--private-key-file"),
        s(dir.path().join("private.key").display()),
        s("--release-grace"),
        s("2s"),
    ];
    let gw = Op::start(GW, "gw-dead", gw_kc, dir.path(), &gw_args);
    let ov_cfg = dir.path().join("overlay.yaml");
    let mut rt_args = route_args(NODES[0], ov_base, Some((&ov_cfg, DEAD_STATUS)));
    rt_args.extend([s("--release-grace"), s("2s")]);
    let rt = Op::start(RT, "rt-dead", rt_kc, dir.path(), &rt_args);
    create_tep(&admin, &tep("milan", 71, &key(71).to_string())).await;
    held(
        &admin,
        "milan",
        &[net::GATEWAY_FINALIZER, net::ROUTE_FINALIZER],
    )
    .await;
    teps(&admin, "liqo-tenant-milan")
        .delete("milan", &DeleteParams::default())
        .await
        .unwrap();
    gone(&admin, "milan").await;
    assert!(
        gw.log().contains("finalizer released without the gateway"),
        "{}",
        gw.log()
    );
    assert!(
        rt.log()
            .contains("finalizer hold released without the agent"),
        "{}",
        rt.log()
    );
    eventually(30, "the Warning Events", || async {
        let events = Api::<Event>::namespaced(admin.clone(), "liqo-tenant-milan")
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?
            .items;
        let by = |c: &str| {
            events.iter().any(|e| {
                e.reason.as_deref() == Some("ReleasedUnconfirmed")
                    && e.type_.as_deref() == Some("Warning")
                    && e.reporting_controller.as_deref() == Some(c)
            })
        };
        if by("liqo-gateway-operator") && by("liqo-route-operator") {
            Ok(())
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await;
    // Least privilege is enough for Events too.
    none_forbidden([&gw, &rt]);
    assert!(gw.stop().success());
    assert!(rt.stop().success());

    // No gateway: the Lease loses its holder after the route hold was taken; the deletion
    // does not wait on the route operator.
    let rt = Op::start(
        RT,
        "rt-fake",
        rt_kc,
        dir.path(),
        &route_args(NODES[0], ov_base, None),
    );
    create_tep(&admin, &tep("milan", 71, &key(71).to_string())).await;
    held(&admin, "milan", &[net::ROUTE_FINALIZER]).await;
    let no_holder = serde_json::json!({"spec": {"holderIdentity": null}});
    Api::<Lease>::namespaced(admin.clone(), "liqo")
        .patch(
            net::GATEWAY_LEASE,
            &PatchParams::default(),
            &Patch::Merge(&no_holder),
        )
        .await
        .unwrap();
    teps(&admin, "liqo-tenant-milan")
        .delete("milan", &DeleteParams::default())
        .await
        .unwrap();
    gone(&admin, "milan").await;
    assert!(
        rt.log()
            .contains("no gateway runs; finalizer hold released"),
        "{}",
        rt.log()
    );
    none_forbidden([&rt]);
    assert!(rt.stop().success());
}
