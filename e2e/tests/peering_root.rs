//! Peering in the lab (needs root): IPAM services and gateways per cluster, real WireGuard
//! between the gateway nodes, NAT between identical pod CIDRs.

mod common;

use common::LabGuard;
use dataplane::Netns;
use e2e::{
    lab::{self, check, peering},
    topology::Topology,
};

fn cross_cluster(m: &check::Matrix) -> Vec<&check::Probe> {
    m.probes
        .iter()
        .filter(|p| m.endpoints[p.src].cluster != m.endpoints[p.dst].cluster)
        .collect()
}

#[tokio::test]
async fn three_clusters_with_one_pod_cidr_peered_pairwise() {
    let g = LabGuard::new('p');
    let lab = lab::up(g.0.clone(), Topology::preset("three-clusters").unwrap())
        .await
        .unwrap();
    for (a, b) in [("rome", "milan"), ("rome", "turin"), ("milan", "turin")] {
        let (va, vb) = lab::peer(&lab, a, b).unwrap();
        // Each cluster never maps a peer into one of its own reserved subnets.
        for (cluster, view) in [(a, &va), (b, &vb)] {
            for r in &lab.topology.cluster(cluster).unwrap().reserved_subnets {
                assert!(
                    !r.contains(&view.remote_pods) && !view.remote_pods.contains(r),
                    "{cluster}: {view:?} in reserved {r}"
                );
            }
        }
    }
    let m = check::with_peerings(&lab).unwrap();
    let cross = cross_cluster(&m);
    // 3 ordered pairs of clusters x 2 directions x 2 x 2 gateway-node pods.
    assert_eq!(cross.len(), 6 * 4, "{}", m.render());
    assert!(m.failures().is_empty(), "{}", m.render());
    for p in &cross {
        // Reached at a remapped address, and seen by the server in its view of the client.
        assert_ne!(p.addr, m.endpoints[p.dst].addr, "{}", m.render());
        assert_eq!(p.tcp.as_ref().unwrap(), &p.expect_seen);
        assert_ne!(p.expect_seen, m.endpoints[p.src].addr);
    }
    assert_eq!(peering::peerings(&lab).unwrap().len(), 6);

    lab::unpeer(&lab, "rome", "milan").unwrap();
    let m = check::with_peerings(&lab).unwrap();
    assert!(m.failures().is_empty(), "{}", m.render());
    assert_eq!(
        cross_cluster(&m).len(),
        4 * 4,
        "rome-milan gone, the rest untouched"
    );
    let e = lab::unpeer(&lab, "rome", "milan").unwrap_err().to_string();
    assert!(e.contains("unpeering rome and milan"), "{e}");
}

#[tokio::test]
async fn a_cluster_behind_nat_peers_with_a_public_one() {
    let g = LabGuard::new('p');
    let topo = Topology::from_yaml(
        "clusters:\n  - name: home\n    podCIDR: 10.200.0.0/16\n    behindNat: true\n    nodes: 1\n  - name: cloud\n    podCIDR: 10.200.0.0/16\n    nodes: 1\n  - name: office\n    podCIDR: 10.200.0.0/16\n    behindNat: true\n    nodes: 1\n",
    )
    .unwrap();
    let lab = lab::up(g.0.clone(), topo).await.unwrap();
    assert!(
        Netns::open(&format!("{}-home-nat", g.0).parse().unwrap()).is_ok(),
        "the NAT router exists"
    );
    lab::peer(&lab, "home", "cloud").unwrap();
    let m = check::with_peerings(&lab).unwrap();
    assert_eq!(cross_cluster(&m).len(), 2 * 4);
    assert!(m.failures().is_empty(), "{}", m.render());
    // Two NATed clusters cannot reach each other directly: refused, naming why.
    let e = format!(
        "{:#}",
        anyhow::Error::from(lab::peer(&lab, "home", "office").unwrap_err())
    );
    assert!(e.contains("both clusters are behind NAT"), "{e}");
    let e = format!(
        "{:#}",
        anyhow::Error::from(lab::peer(&lab, "home", "mars").unwrap_err())
    );
    assert!(
        e.contains("mars") && e.contains("home, cloud, office"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        anyhow::Error::from(lab::peer(&lab, "home", "home").unwrap_err())
    );
    assert!(e.contains("cannot peer with itself"), "{e}");
}
