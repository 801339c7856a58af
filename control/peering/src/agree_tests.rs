//! The lab and the network manager decide the same views and plans. For the same two clusters
//! (the same IPAM settings, gateway keys and endpoints, identical pod CIDRs so that both sides
//! remap), [`crate::peer`] (what the plain lab runs) and the network manager's decisions
//! (`control::network::decide`, carried out here against in-memory IPAMs of the same settings,
//! with the NetworkConfigs and TunnelEndpoints as plain values and the replicator's copies
//! made at once) must end with the same IPAM state, the same view of the peer on each side,
//! the same peering records and the same gateway peer lists (the TunnelEndpoints read back
//! as the operators read them, `control::network::tunnel`). It fails if one of them changes
//! alone.

use std::time::Duration;

use control::{
    api::{
        discovery::{ClusterIdentity, NetworkingEnabled},
        net::NetworkConfigStatus,
    },
    network::{
        decide::{self, Action, Copy, Local, Observed, Own, Tunnel},
        endpoint::Endpoint,
        tunnel,
    },
    phase::PeeringPhase,
};
use liqo_types::{ClusterId, PeerView};
use serde_json::Value;

use crate::{
    Peerings,
    fakes::{FakeSide, side},
    ipam::{self, Ipam},
    peer, plan,
};

fn ep(last: u8) -> Option<std::net::SocketAddr> {
    Some(format!("198.18.0.{last}:51840").parse().unwrap())
}

/// rome (reserving 10.201.0.0/16) and milan, both with pod CIDR 10.200.0.0/16.
fn pair() -> (FakeSide, FakeSide) {
    (
        side("rome", 1, ep(1), &["10.201.0.0/16"]).0,
        side("milan", 2, ep(2), &[]).0,
    )
}

/// One cluster as the network manager sees its own objects.
struct Cluster {
    side: FakeSide,
    id: ClusterId,
    local: Local,
    finalizer: bool,
    /// Our NetworkConfig for the peer: its spec and the status the peer wrote on its copy.
    own: Option<(Value, Option<Value>)>,
    /// The status we wrote on the peer's NetworkConfig (its copy here).
    copy_status: Option<Value>,
    tunnel: Option<Value>,
}

async fn cluster(mut side: FakeSide) -> Cluster {
    let info = crate::sinks::Inventory::cluster(&mut side.inventory)
        .await
        .unwrap();
    let endpoint = info.endpoint.expect("both clusters are reachable");
    let ranges = ipam::announce(&mut side.ipam, info.pod_cidr).await.unwrap();
    let public_key = crate::sinks::Gateway::public_key(&mut side.gateway)
        .await
        .unwrap();
    Cluster {
        id: info.id,
        local: Local {
            ranges,
            public_key,
            endpoint: Endpoint {
                host: endpoint.ip().to_string(),
                port: endpoint.port(),
            },
        },
        side,
        finalizer: false,
        own: None,
        copy_status: None,
        tunnel: None,
    }
}

fn identity(id: &ClusterId) -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: id.clone(),
        cluster_name: id.as_str().parse().unwrap(),
    }
}

async fn observe(me: &mut Cluster, peer: &Cluster) -> Observed {
    Observed {
        now: "2026-11-28T08:00:00Z".parse().unwrap(),
        grace: Duration::from_secs(300),
        local_id: me.id.clone(),
        peer: identity(&peer.id),
        processable: true,
        fc_deleting: false,
        networking: NetworkingEnabled::Yes,
        phase: PeeringPhase::Bidirectional,
        in_band: false,
        tenant_known: true,
        has_finalizer: me.finalizer,
        local: Ok(me.local.clone()),
        own: me.own.clone().map(|(spec, status)| Own {
            spec,
            deleting_since: None,
            status,
        }),
        copy: peer.own.as_ref().map(|(spec, _)| Copy {
            spec: spec.clone(),
            status: me.copy_status.clone(),
            refused: None,
            refused_spec: None,
            deleting: false,
        }),
        ipam: me.side.ipam.peer(&peer.id).await.unwrap(),
        tunnel: me.tunnel.clone().map(|spec| Tunnel {
            spec,
            deleting_since: None,
        }),
    }
}

fn json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap()
}

/// Carries out one side's actions as the network manager's executor does; the replicator's
/// copy of a status we write on the peer's NetworkConfig reaches the peer at once. Whether
/// anything was done.
async fn act(me: &mut Cluster, peer: &mut Cluster) -> bool {
    let actions = decide::decide(&observe(me, peer).await);
    let acted = !actions.is_empty();
    let write_status = |me: &mut Cluster, peer: &mut Cluster, s: NetworkConfigStatus| {
        me.copy_status = Some(json(&s));
        peer.own.as_mut().expect("a copy of its NetworkConfig").1 = Some(json(&s));
    };
    for action in actions {
        match action {
            Action::AddFinalizer => me.finalizer = true,
            Action::ApplyOwn(spec) => me.own = Some((json(&spec), None)),
            Action::Remap(announced) => {
                let seen = ipam::decide(&mut me.side.ipam, &peer.id, announced)
                    .await
                    .unwrap();
                write_status(me, peer, decide::copy_status(announced, seen));
            }
            Action::WriteCopyStatus(s) => write_status(me, peer, s),
            Action::SetPeerView { here, there } => {
                ipam::record(&mut me.side.ipam, &peer.id, here, there)
                    .await
                    .unwrap();
            }
            Action::ApplyTunnel(spec) => me.tunnel = Some(json(&spec)),
            other => panic!("{}: unexpected while peering: {other:?}", me.id),
        }
    }
    acted
}

/// The peering records the gateway and route operators make of a side's TunnelEndpoint (read
/// as an object, as they watch it).
fn from_tunnel(c: &Cluster) -> Peerings {
    let obj: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "net.liqo.io/v1alpha1", "kind": "TunnelEndpoint",
        "metadata": {"name": "tep", "namespace": "liqo-tenant"},
        "spec": c.tunnel.clone().expect("a TunnelEndpoint"),
    }))
    .unwrap();
    let (peerings, refused) = tunnel::peerings(&[tunnel::read(&obj)], |_, _| None);
    assert!(refused.is_empty(), "{}: {refused:?}", c.id);
    peerings
}

#[tokio::test]
async fn the_lab_and_the_network_manager_make_the_same_views_records_and_gateway_plans() {
    // The lab.
    let (mut lab_rome, mut lab_milan) = pair();
    let (rome_view, milan_view) = peer(&mut lab_rome, &mut lab_milan).await.unwrap();
    let pod: liqo_types::Cidr = "10.200.0.0/16".parse().unwrap();
    assert_ne!(
        rome_view.remote_pods, pod,
        "identical pod CIDRs are remapped"
    );

    // The network manager, on both sides, until neither has anything left to do.
    let (rome, milan) = pair();
    let (mut rome, mut milan) = (cluster(rome).await, cluster(milan).await);
    let mut rounds = 0;
    loop {
        let a = act(&mut rome, &mut milan).await;
        let b = act(&mut milan, &mut rome).await;
        if !a && !b {
            break;
        }
        rounds += 1;
        assert!(rounds < 10, "the network manager does not settle");
    }

    for (name, lab, manager, lab_view) in [
        ("rome", &lab_rome, &rome, rome_view),
        ("milan", &lab_milan, &milan, milan_view),
    ] {
        let records = from_tunnel(manager);
        let views: Vec<PeerView> = records.values().map(|p| p.view).collect();
        assert_eq!(views, [lab_view], "{name}: the view");
        assert_eq!(records, lab.records.peerings, "{name}: the peering records");
        assert_eq!(
            plan::gateway_peers(&records),
            lab.gateway.peers,
            "{name}: the gateway's peer list"
        );
        let held = |s: &FakeSide| s.ipam.inner.peers().cloned().collect::<Vec<_>>();
        assert_eq!(
            held(&manager.side),
            held(lab),
            "{name}: what the IPAM holds"
        );
    }
    assert_eq!(milan_view, rome_view.mirrored());
    assert_eq!(
        PeerView::of(
            rome.side
                .ipam
                .peer(&milan.id)
                .await
                .unwrap()
                .unwrap()
                .seen_here,
            milan
                .side
                .ipam
                .peer(&rome.id)
                .await
                .unwrap()
                .unwrap()
                .seen_here,
        ),
        rome_view
    );
}
