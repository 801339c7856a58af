//! The lab and the network manager decide the same views and plans. For the same two clusters
//! (the same IPAM settings, gateway keys and endpoints, identical pod CIDRs so that both sides
//! remap), [`crate::peer`] and [`crate::unpeer`] (what the plain lab runs) and the network
//! manager's decisions (`control::network::decide`, carried out here against in-memory IPAMs
//! of the same settings, with the NetworkConfigs and TunnelEndpoints as plain values and the
//! replicator's copies made at once) must end with the same IPAM state, the same view of the
//! peer on each side (the CIDRs written out), the same peering records (the TunnelEndpoints read
//! back as the operators read them, `control::network::tunnel`), the same gateway file peers
//! (`control::network::gateway::render`) and the same overlay files
//! (`control::network::routes::render`); and a teardown releases the ranges on both paths, only
//! once the TunnelEndpoint is gone. It fails if one of them changes alone.

use std::time::Duration;

use control::{
    api::{
        discovery::{ClusterIdentity, NetworkingEnabled},
        net::NetworkConfigStatus,
    },
    network::{
        decide::{self, Action, Copy, Local, Observed, Own, Tunnel},
        endpoint::Endpoint,
        gateway::{self, Endpoints},
        routes, tunnel,
    },
    phase::PeeringPhase,
};
use liqo_types::{ClusterId, PeerView};
use serde_json::Value;

use liqo_gateway_api::config::File;
use liqo_overlay_api::config::File as OverlayFile;

use crate::{
    Peerings,
    fakes::{FakeSide, side},
    ipam::{self, Ipam},
    peer,
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

async fn observe(me: &mut Cluster, peer: &Cluster, phase: PeeringPhase) -> Observed {
    Observed {
        now: "2026-11-28T08:00:00Z".parse().unwrap(),
        grace: Duration::from_secs(300),
        local_id: me.id.clone(),
        peer: identity(&peer.id),
        processable: true,
        fc_deleting: false,
        networking: NetworkingEnabled::Yes,
        phase,
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
async fn act(me: &mut Cluster, peer: &mut Cluster, phase: PeeringPhase) -> bool {
    let actions = decide::decide(&observe(me, peer, phase).await);
    let acted = !actions.is_empty();
    let write_status = |me: &mut Cluster, peer: &mut Cluster, s: NetworkConfigStatus| {
        me.copy_status = Some(json(&s));
        peer.own.as_mut().expect("a copy of its NetworkConfig").1 = Some(json(&s));
    };
    for action in actions {
        match action {
            Action::AddFinalizer => me.finalizer = true,
            // An apply leaves the status the peer wrote.
            Action::ApplyOwn(spec) => {
                let status = me.own.take().and_then(|(_, status)| status);
                me.own = Some((json(&spec), status));
            }
            Action::DeleteOwn => me.own = None,
            Action::DeleteTunnel => me.tunnel = None,
            Action::DeleteCopy => me.copy_status = None,
            Action::Release { forced } => {
                assert_eq!(forced, None, "{}: nothing is left to force", me.id);
                assert!(
                    me.tunnel.is_none(),
                    "{}: released before the TunnelEndpoint went",
                    me.id
                );
                crate::ipam::Ipam::release(&mut me.side.ipam, &peer.id)
                    .await
                    .unwrap();
            }
            Action::RemoveFinalizer => me.finalizer = false,
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

/// Runs the network manager on both sides until neither has anything left to do.
async fn settle(rome: &mut Cluster, milan: &mut Cluster, phase: PeeringPhase) {
    for _ in 0..10 {
        let a = act(rome, milan, phase).await;
        let b = act(milan, rome, phase).await;
        if !a && !b {
            return;
        }
    }
    panic!("the network manager does not settle ({phase:?})");
}

fn held(s: &FakeSide) -> Vec<::ipam::Peer> {
    s.ipam.inner.peers().cloned().collect()
}

fn c(s: &str) -> liqo_types::Cidr {
    s.parse().unwrap()
}

#[tokio::test]
async fn the_lab_and_the_network_manager_make_the_same_views_records_and_files() {
    // The lab.
    let (mut lab_rome, mut lab_milan) = pair();
    let (rome_view, milan_view) = peer(&mut lab_rome, &mut lab_milan).await.unwrap();
    // Both remap the other's identical ranges (rome also reserves 10.201.0.0/16).
    let expected = PeerView {
        remote_pods: c("10.71.0.0/16"),
        remote_external: c("10.68.0.0/16"),
        local_pods_at_peer: c("10.71.0.0/16"),
        local_external_at_peer: c("10.201.0.0/16"),
    };
    assert_eq!(rome_view, expected, "rome's view");
    assert_eq!(milan_view, rome_view.mirrored());

    // The network manager, on both sides.
    let (rome, milan) = pair();
    let (mut rome, mut milan) = (cluster(rome).await, cluster(milan).await);
    settle(&mut rome, &mut milan, PeeringPhase::Bidirectional).await;

    let gateway_base =
        File::parse("localPodCIDR: 10.200.0.0/16\nlistenPort: 51840\nnamespace: liqo-gateway\n")
            .unwrap();
    let overlay_base =
        OverlayFile::parse("node: \"\"\ngateway: \"\"\nunderlayInterface: eth0\n").unwrap();
    for (name, lab, manager, lab_view) in [
        ("rome", &lab_rome, &rome, rome_view),
        ("milan", &lab_milan, &milan, milan_view),
    ] {
        let records = from_tunnel(manager);
        let views: Vec<PeerView> = records.values().map(|p| p.view).collect();
        assert_eq!(views, [lab_view], "{name}: the view");
        assert_eq!(records, lab.records.peerings, "{name}: the peering records");
        // What the gateway operator writes (our external CIDR from the IPAM's list), against
        // what the lab wrote.
        let endpoints = Endpoints {
            local_external_cidr: Some(manager.local.ranges.external),
            endpoints: Vec::new(),
        };
        let rendered = gateway::render(&gateway_base, None, None, &records, &endpoints).unwrap();
        assert!(
            rendered.refused.is_empty(),
            "{name}: {:?}",
            rendered.refused
        );
        assert_eq!(
            rendered.file.peers, lab.gateway.peers,
            "{name}: the gateway's peers"
        );
        // What each route operator writes, against the lab's overlay plan.
        let plan = lab
            .overlay
            .applied
            .clone()
            .expect("the lab applied an overlay plan");
        for node in plan.per_node() {
            let file = routes::render(
                &overlay_base,
                &manager.id,
                &node.node,
                &plan.nodes,
                &plan.gateway_node,
                &records,
            )
            .unwrap()
            .file;
            assert_eq!(
                file,
                routes::overlay_file(&overlay_base, &node),
                "{name}/{}: the overlay file",
                node.node
            );
        }
        assert_eq!(
            held(&manager.side),
            held(lab),
            "{name}: what the IPAM holds"
        );
    }

    // Teardown: no direction left. The ranges go on both paths, after the TunnelEndpoint.
    crate::unpeer(&mut lab_rome, &mut lab_milan).await.unwrap();
    settle(&mut rome, &mut milan, PeeringPhase::None).await;
    for (name, lab, manager) in [("rome", &lab_rome, &rome), ("milan", &lab_milan, &milan)] {
        assert!(
            manager.tunnel.is_none() && manager.own.is_none(),
            "{name}: objects left"
        );
        assert!(!manager.finalizer, "{name}: the finalizer stays");
        assert!(lab.records.peerings.is_empty(), "{name}: the lab's records");
        assert_eq!(
            held(&manager.side),
            held(lab),
            "{name}: what the IPAM holds"
        );
        assert!(held(lab).is_empty(), "{name}: ranges still held");
    }
}
