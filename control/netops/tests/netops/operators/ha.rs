//! The last phase of `operators_k8s`: active/standby gateways (`--leader-elect`), two gateway
//! operators with their fake gateways on the two nodes. The first elected renders the peer; the
//! standby's gateway runs the key without peers and the Lease names the active node. When the
//! active gateway stops answering, its operator gives the Lease back and stays, a standby; the
//! standby takes over within 5 s (the Lease names its node, its gateway gets the peer, the
//! TunnelEndpoint is Connected through it, its pod is the one labelled active for the
//! Service). The old one, its gateway answering again, stays standby (its file without peers),
//! never having exited; a clean stop of the active one hands the Lease over at once.

use std::time::{Duration, Instant};

use control::{api::net::ConnectionStatus, consts::net};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Namespace, Pod},
};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};

use super::GW;
use crate::common::{
    Op, Setup,
    daemons::Fake,
    eventually, none_forbidden,
    objects::{NODES, create_tep, gateway_args, key, tep, want},
};

/// The holder of the gateway Lease, if any.
async fn holder(admin: &kube::Client) -> Option<String> {
    Api::<Lease>::namespaced(admin.clone(), "liqo")
        .get_opt(net::GATEWAY_LEASE)
        .await
        .unwrap()
        .as_ref()
        .and_then(control::network::routes::lease_holder)
}

/// Which of the two pods are labelled active.
async fn active_pods(admin: &kube::Client) -> Vec<bool> {
    let pods = Api::<Pod>::namespaced(admin.clone(), "liqo");
    let mut out = Vec::new();
    for n in NODES {
        let p = pods.get(&format!("gw-ha-{n}")).await.unwrap();
        let label = p
            .metadata
            .labels
            .unwrap_or_default()
            .get(net::GATEWAY_ACTIVE_LABEL)
            .cloned();
        out.push(label.as_deref() == Some("true"));
    }
    out
}

/// The peers in a gateway config file.
fn peers(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| liqo_gateway_api::config::File::parse(&t).ok())
        .map_or(0, |f| f.peers.len())
}

pub(crate) async fn phase(set: &Setup) {
    let Setup {
        admin,
        gw_kc,
        dir,
        gw_base,
        ..
    } = set;
    // A clean start: the last phase left another holder's Lease.
    match Api::<Lease>::namespaced(admin.clone(), "liqo")
        .delete(net::GATEWAY_LEASE, &DeleteParams::default())
        .await
    {
        // Absent already: nothing to clean.
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("deleting the Lease: {e}"),
    }
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "liqo-tenant-genoa"}}))
            .unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    create_tep(admin, &tep("genoa", 75, &key(75).to_string())).await;
    let (ipam, _client) = crate::common::ipam::serve("10.244.0.0/16").await;
    // Each replica's pod (never run: these nodes have no kubelet), labelled by its operator.
    for n in NODES {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("gw-ha-{n}"), "namespace": "liqo",
                "labels": {net::GATEWAY_ACTIVE_LABEL: "true"}},
            "spec": {"nodeName": n, "containers": [{"name": "gw", "image": "liqo-gateway-operator"}]},
        }))
        .unwrap();
        Api::<Pod>::namespaced(admin.clone(), "liqo")
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }
    // One fake gateway, config and key file per node.
    let sides: Vec<(std::path::PathBuf, std::path::PathBuf, Fake)> = NODES
        .iter()
        .map(|n| {
            let cfg = dir.path().join(format!("ha-gateway-{n}.yaml"));
            let key = dir.path().join(format!("ha-{n}/private.key"));
            (cfg.clone(), key, Fake::gateway(cfg))
        })
        .collect();
    let start = |i: usize| {
        let (cfg, key, fake) = &sides[i];
        let mut args = gateway_args(
            gw_base,
            Some((cfg, fake.url.as_str(), key, ipam.as_str())),
            crate::common::free_port(),
        );
        let at = args.iter().position(|a| a == "--node-name").unwrap();
        args[at + 1] = NODES[i].to_owned();
        args.extend([
            "--leader-elect".into(),
            "--pod-name".into(),
            format!("gw-ha-{}", NODES[i]),
        ]);
        Op::start(GW, &format!("gw-ha-{}", NODES[i]), gw_kc, dir.path(), &args)
    };
    let a = start(0);
    eventually(20, "node 0 elected", || async {
        match holder(admin).await {
            Some(h) if h == NODES[0] => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let b = start(1);
    want(admin, "genoa", ConnectionStatus::Connected, "handshake").await;
    eventually(
        20,
        "the standby's gateway runs the key without peers",
        || async {
            let (p0, p1) = (peers(&sides[0].0), peers(&sides[1].0));
            let standby = b.log().contains(&format!("following {}", NODES[0]));
            if p0 == 1 && p1 == 0 && sides[1].0.exists() && standby {
                Ok(())
            } else {
                Err(format!(
                    "active {p0} peer(s), standby {p1}, said standby: {standby}"
                ))
            }
        },
    )
    .await;
    // The Service selects the active pod only (the standby's label, stale here, removed).
    assert_eq!(active_pods(admin).await, vec![true, false]);

    // The active gateway dies: its operator gives the Lease back, the standby takes over.
    let t = Instant::now();
    sides[0].2.set_dead(true);
    eventually(10, "node 1 active with the peer", || async {
        match (holder(admin).await, peers(&sides[1].0)) {
            (Some(h), 1) if h == NODES[1] => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let took = t.elapsed();
    eprintln!(
        "TIMING gateway failover: the standby active with the peer {:.2} s after the active gateway died",
        took.as_secs_f64()
    );
    assert!(took < Duration::from_secs(5), "failover took {took:?}");
    assert!(a.log().contains("stopped answering"), "{}", a.log());
    assert!(
        a.log().contains("standing again as a standby"),
        "{}",
        a.log()
    );
    want(admin, "genoa", ConnectionStatus::Connected, "handshake").await;
    assert_eq!(active_pods(admin).await, vec![false, true]);

    // The old one, its gateway back, is the standby: the same process, never restarted.
    sides[0].2.set_dead(false);
    eventually(20, "the old active back as the standby", || async {
        let standby = a.log().contains(&format!("following {}", NODES[1]));
        match (peers(&sides[0].0), standby) {
            (0, true) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // Longer than the Lease (5 s): the active one renews it, the old one keeps following.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        holder(admin).await.as_deref(),
        Some(NODES[1]),
        "stays with node 1"
    );

    none_forbidden([&a, &b]);
    // A clean stop hands over at once.
    let t = Instant::now();
    assert!(b.stop().success());
    eventually(10, "node 0 active again", || async {
        match (holder(admin).await, peers(&sides[0].0)) {
            (Some(h), 1) if h == NODES[0] => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    eprintln!(
        "TIMING gateway handover on a clean stop: {:.2} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(active_pods(admin).await, vec![true, false]);
    assert!(a.stop().success());
}
