//! Scenario tests of the allocator, translation and persistence.

use ipnet::Ipv4Net;

use crate::{
    ClusterId, Config, Error, Ipam,
    store::{FileStore, Store},
};

fn n(s: &str) -> Ipv4Net {
    s.parse().unwrap()
}

fn id(s: &str) -> ClusterId {
    s.parse().unwrap()
}

fn ipam_with_reserved(reserved: &[&str]) -> Ipam {
    let mut c = Config::new(n("10.200.0.0/16"), n("10.96.0.0/12"));
    c.reserved = reserved.iter().map(|r| n(r)).collect();
    Ipam::new(c).unwrap()
}

#[test]
fn three_peers_with_our_pod_cidr_get_six_distinct_ranges() {
    // 10.201/16 is the buddy best fit would pick first: reserving it proves reserved subnets hold.
    let mut ipam = ipam_with_reserved(&["10.201.0.0/16", "10.71.0.0/16"]);
    assert_eq!(ipam.external_cidr(), n("10.70.0.0/16"));
    let mut got = Vec::new();
    for p in ["milan", "turin", "paris"] {
        let (pod, ext) = ipam
            .acquire(&id(p), n("10.200.0.0/16"), n("10.70.0.0/16"))
            .unwrap();
        assert_eq!((pod.prefix_len(), ext.prefix_len()), (16, 16));
        got.extend([pod, ext]);
    }
    let mut all = got.clone();
    all.extend([
        n("10.200.0.0/16"),
        n("10.70.0.0/16"),
        n("10.96.0.0/12"),
        n("10.201.0.0/16"),
        n("10.71.0.0/16"),
    ]);
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert!(
                !a.contains(b) && !b.contains(a),
                "{a} overlaps {b} in {got:?}"
            );
        }
    }
    let turin = ipam.peer(&id("turin")).unwrap().clone();
    ipam.release(&id("turin")).unwrap();
    let again = ipam
        .acquire(&id("turin"), n("10.200.0.0/16"), n("10.70.0.0/16"))
        .unwrap();
    assert_eq!(
        again,
        (turin.pod_view, turin.external_view),
        "release then acquire gives the same ranges"
    );
}

#[test]
fn free_prefixes_are_kept_and_acquire_is_idempotent() {
    let mut ipam = ipam_with_reserved(&[]);
    let r = ipam
        .acquire(&id("milan"), n("10.210.0.0/16"), n("10.80.0.0/16"))
        .unwrap();
    assert_eq!(r, (n("10.210.0.0/16"), n("10.80.0.0/16")));
    assert_eq!(
        ipam.acquire(&id("milan"), n("10.210.0.0/16"), n("10.80.0.0/16"))
            .unwrap(),
        r
    );
    // Outside every pool and free: kept as announced.
    let r = ipam
        .acquire(&id("cgnat"), n("100.64.0.0/16"), n("100.65.0.0/16"))
        .unwrap();
    assert_eq!(r, (n("100.64.0.0/16"), n("100.65.0.0/16")));
    // The same outside range again is taken: remapped into a pool.
    let (pod, _) = ipam
        .acquire(&id("cgnat2"), n("100.64.0.0/16"), n("100.66.0.0/16"))
        .unwrap();
    assert!(n("10.0.0.0/8").contains(&pod), "{pod}");
}

#[test]
fn bad_input_names_the_value_and_changes_nothing() {
    let mut ipam = ipam_with_reserved(&[]);
    ipam.acquire(&id("milan"), n("10.200.0.0/16"), n("10.70.0.0/16"))
        .unwrap();
    let before = ipam.state();
    let cases: Vec<(Result<(), Error>, &str)> = vec![
        (
            crate::parse_cidr("10.200.0.0").map(drop),
            "\"10.200.0.0\" is not an IPv4 CIDR",
        ),
        (
            ipam.acquire(&id("a"), n("10.5.0.1/16"), n("10.6.0.0/16"))
                .map(drop),
            "10.5.0.1/16 has host bits set",
        ),
        (
            ipam.acquire(&id("a"), n("10.5.0.0/31"), n("10.6.0.0/16"))
                .map(drop),
            "10.5.0.0/31: a range must be /1 to /30 long",
        ),
        (ipam.release(&id("nobody")).map(drop), "unknown peer nobody"),
        (
            ipam.remote_to_local(&id("milan"), "192.168.1.1".parse().unwrap())
                .map(drop),
            "192.168.1.1 is outside peer milan",
        ),
        (
            ipam.acquire(&id("milan"), n("10.9.0.0/16"), n("10.70.0.0/16"))
                .map(drop),
            "peer milan already announced pod CIDR 10.200.0.0/16",
        ),
        (
            ipam.acquire(&id("b"), n("10.5.0.0/16"), n("10.5.0.0/24"))
                .map(drop),
            "overlaps external CIDR 10.5.0.0/24",
        ),
        (
            ipam.add_reserved(n("10.201.0.0/16")).map(drop),
            "reserved subnet 10.201.0.0/16 overlaps peer milan",
        ),
        (
            ipam.remove_reserved(n("10.9.0.0/16")),
            "reserved subnet 10.9.0.0/16 is not configured",
        ),
        (
            ipam.remove_pool(n("10.0.0.0/8")),
            "pool 10.0.0.0/8 overlaps peer milan",
        ),
        (
            ipam.add_pool(n("10.1.0.0/16")),
            "pool 10.1.0.0/16 overlaps pool 10.0.0.0/8",
        ),
        (
            ipam.set_peer_view(&id("milan"), n("10.0.0.0/24"), n("10.1.0.0/16")),
            "must have the same prefix length",
        ),
        (
            ipam.map_endpoint(&id("milan"), "172.18.0.1".parse().unwrap(), &h(""))
                .map(drop),
            "has not announced its view",
        ),
    ];
    for (r, want) in cases {
        let e = r.unwrap_err().to_string();
        assert!(e.contains(want), "{e:?} should contain {want:?}");
    }
    assert_eq!(ipam.state(), before, "refused requests changed nothing");
}

#[test]
fn pool_exhaustion_is_reported_and_rolls_back() {
    let mut c = Config::new(n("192.168.0.0/18"), n("192.168.64.0/18"));
    c.pools = vec![n("192.168.0.0/16")];
    c.external_cidr = n("192.168.128.0/18");
    let mut ipam = Ipam::new(c).unwrap();
    ipam.acquire(&id("a"), n("10.0.0.0/24"), n("10.1.0.0/24"))
        .unwrap(); // outside the pool: kept
    // One /18 left in the pool: the pod CIDR fits, the external CIDR does not.
    let before = ipam.state();
    let e = ipam
        .acquire(&id("b"), n("192.168.0.0/18"), n("192.168.64.0/18"))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "pools exhausted: no free /18 left for peer b external CIDR 192.168.64.0/18"
    );
    assert_eq!(
        ipam.state(),
        before,
        "the pod range taken first was given back"
    );
    assert!(
        ipam.acquire(&id("c"), n("192.168.0.0/18"), n("10.2.0.0/24"))
            .is_ok(),
        "and is still available"
    );
}

#[test]
fn translation_keeps_host_bits_and_endpoints_are_shared() {
    let mut ipam = ipam_with_reserved(&[]);
    let (milan, turin) = (id("milan"), id("turin"));
    ipam.acquire(&milan, n("10.200.0.0/16"), n("10.70.0.0/16"))
        .unwrap();
    ipam.acquire(&turin, n("10.200.0.0/16"), n("10.70.0.0/16"))
        .unwrap();
    let view = ipam.peer(&milan).unwrap().pod_view;
    let local = ipam
        .remote_to_local(&milan, "10.200.1.3".parse().unwrap())
        .unwrap();
    assert_eq!(
        local,
        crate::translate("10.200.1.3".parse().unwrap(), &n("10.200.0.0/16"), &view)
    );
    assert_eq!(
        ipam.local_to_peer(&milan, "10.200.1.3".parse().unwrap())
            .unwrap_err(),
        Error::NoPeerView(milan.clone())
    );
    ipam.set_peer_view(&milan, n("10.99.0.0/16"), n("10.98.0.0/16"))
        .unwrap();
    ipam.set_peer_view(&turin, n("10.97.0.0/16"), n("10.96.0.0/16"))
        .unwrap();
    assert_eq!(
        ipam.local_to_peer(&milan, "10.200.1.3".parse().unwrap())
            .unwrap()
            .to_string(),
        "10.99.1.3"
    );

    let node = "172.18.0.2".parse().unwrap();
    let a = ipam.map_endpoint(&milan, node, &h("")).unwrap();
    let b = ipam.map_endpoint(&turin, node, &h("")).unwrap();
    assert_eq!(a.external_ip, Some("10.70.0.1".parse().unwrap()));
    assert_eq!(
        a.external_ip, b.external_ip,
        "one external address per IP, shared"
    );
    assert_eq!(
        (a.seen_by_peer.to_string(), b.seen_by_peer.to_string()),
        ("10.98.0.1".into(), "10.96.0.1".into())
    );
    let other = ipam
        .map_endpoint(&milan, "172.18.0.3".parse().unwrap(), &h(""))
        .unwrap();
    assert_eq!(other.external_ip, Some("10.70.0.2".parse().unwrap()));
    ipam.unmap_endpoint(&milan, node, &h("")).unwrap();
    assert_eq!(ipam.endpoints().count(), 2, "turin still uses it");
    ipam.release(&turin).unwrap();
    assert_eq!(ipam.endpoints().count(), 1, "released with its last user");
    let again = ipam
        .map_endpoint(&milan, "172.18.0.9".parse().unwrap(), &h(""))
        .unwrap();
    assert_eq!(
        again.external_ip,
        Some("10.70.0.1".parse().unwrap()),
        "the freed address is reused"
    );
}

#[test]
fn external_cidr_is_remapped_when_it_collides() {
    let ipam = Ipam::new(Config::new(n("10.70.0.0/16"), n("10.96.0.0/12"))).unwrap();
    assert_ne!(ipam.external_cidr(), n("10.70.0.0/16"));
    assert_eq!(ipam.external_cidr().prefix_len(), 16);
    assert!(!ipam.external_cidr().contains(&n("10.70.0.0/16")));
}

#[test]
fn reserved_subnets_change_at_runtime() {
    let mut ipam = ipam_with_reserved(&[]);
    ipam.add_reserved(n("10.201.0.0/16")).unwrap();
    let (pod, _) = ipam
        .acquire(&id("milan"), n("10.201.0.0/16"), n("10.202.0.0/16"))
        .unwrap();
    assert_ne!(pod, n("10.201.0.0/16"), "reserved is never handed out");
    ipam.remove_reserved(n("10.201.0.0/16")).unwrap();
    let (pod, _) = ipam
        .acquire(&id("turin"), n("10.201.0.0/16"), n("10.203.0.0/16"))
        .unwrap();
    assert_eq!(pod, n("10.201.0.0/16"), "removing frees it");
}

#[test]
fn local_cidrs_cannot_change_under_peers() {
    let mut ipam = ipam_with_reserved(&[]);
    let mut wanted = ipam.config().clone();
    wanted.pod_cidr = n("10.210.0.0/16");
    ipam.acquire(&id("milan"), n("10.200.0.0/16"), n("10.70.0.0/16"))
        .unwrap();
    let e = ipam.clone().reconfigure(wanted.clone()).unwrap_err();
    assert!(
        e.to_string().starts_with(
            "refusing to change the local pod CIDR from 10.200.0.0/16 to 10.210.0.0/16"
        ),
        "{e}"
    );
    ipam.release(&id("milan")).unwrap();
    ipam.reconfigure(wanted).unwrap();
    assert_eq!(ipam.config().pod_cidr, n("10.210.0.0/16"));
}

#[test]
fn file_store_restores_every_allocation_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::new(dir.path().join("ipam.json"));
    assert!(store.load().unwrap().is_none());
    let mut ipam = ipam_with_reserved(&["10.201.0.0/16"]);
    for p in ["a", "b", "c"] {
        ipam.acquire(&id(p), n("10.200.0.0/16"), n("10.70.0.0/16"))
            .unwrap();
        ipam.set_peer_view(&id(p), n("10.50.0.0/16"), n("10.51.0.0/16"))
            .unwrap();
    }
    ipam.map_endpoint(
        &id("a"),
        "172.18.0.1".parse().unwrap(),
        &h("virtual-kubelet"),
    )
    .unwrap();
    store.save(&ipam.state()).unwrap();
    let bytes = std::fs::read(store.path()).unwrap();
    let restored = Ipam::restore(store.load().unwrap().unwrap()).unwrap();
    assert_eq!(restored.state(), ipam.state());
    store.save(&restored.state()).unwrap();
    assert_eq!(std::fs::read(store.path()).unwrap(), bytes);
    // The restored allocator continues exactly as the original would.
    let mut a = ipam.clone();
    let mut b = restored;
    assert_eq!(
        a.acquire(&id("d"), n("10.200.0.0/16"), n("10.70.0.0/16"))
            .unwrap(),
        b.acquire(&id("d"), n("10.200.0.0/16"), n("10.70.0.0/16"))
            .unwrap()
    );
    std::fs::write(store.path(), b"{not json").unwrap();
    assert!(
        store
            .load()
            .unwrap_err()
            .to_string()
            .ends_with("is not a valid IPAM state")
    );
}

#[test]
fn reconfigure_keeps_the_pool_order_given() {
    let mut c = Config::new(n("10.200.0.0/16"), n("10.96.0.0/12"));
    c.pools = vec![n("10.0.0.0/8"), n("192.168.0.0/16")];
    let mut ipam = Ipam::new(c.clone()).unwrap();
    c.pools = vec![n("192.168.0.0/16"), n("10.0.0.0/8")];
    ipam.reconfigure(c).unwrap();
    assert_eq!(
        ipam.config().pools,
        vec![n("192.168.0.0/16"), n("10.0.0.0/8")]
    );
    let (pod, _) = ipam
        .acquire(&id("milan"), n("10.200.0.0/16"), n("10.70.0.0/16"))
        .unwrap();
    assert!(
        n("192.168.0.0/16").contains(&pod),
        "remaps come from the first pool: {pod}"
    );
}

fn h(s: &str) -> crate::Holder {
    s.parse().unwrap()
}

/// An IPAM with peer milan and milan's view of us.
fn milan_with_views() -> (Ipam, ClusterId) {
    let mut ipam = Ipam::new(Config::new(n("10.200.0.0/16"), n("10.96.0.0/12"))).unwrap();
    let milan = id("milan");
    ipam.acquire(&milan, n("10.200.0.0/16"), n("10.70.0.0/16"))
        .unwrap();
    ipam.set_peer_view(&milan, n("10.99.0.0/16"), n("10.98.0.0/16"))
        .unwrap();
    (ipam, milan)
}

#[test]
fn each_holder_drops_only_its_own_hold_of_an_endpoint() {
    let (mut ipam, milan) = milan_with_views();
    let api = "172.18.0.2".parse().unwrap();
    let vk = h("virtual-kubelet");
    let liqoctl = h("liqoctl-in-band");
    let a = ipam.map_endpoint(&milan, api, &vk).unwrap();
    let b = ipam.map_endpoint(&milan, api, &liqoctl).unwrap();
    assert_eq!(a, b, "one mapping, two holds");
    ipam.unmap_endpoint(&milan, api, &vk).unwrap();
    assert_eq!(ipam.endpoints().count(), 1, "liqoctl still holds it");
    let e = ipam.unmap_endpoint(&milan, api, &vk).unwrap_err();
    assert!(
        e.to_string().contains("virtual-kubelet holds for peer"),
        "{e}"
    );
    ipam.unmap_endpoint(&milan, api, &liqoctl).unwrap();
    assert_eq!(ipam.endpoints().count(), 0, "freed with its last hold");
}

#[test]
fn a_hold_from_before_holders_is_dropped_by_the_first_holder_that_releases() {
    let (mut ipam, milan) = milan_with_views();
    let ip = "172.18.0.7".parse().unwrap();
    ipam.map_endpoint(&milan, ip, &h("")).unwrap();
    ipam.map_endpoint(&milan, ip, &h("virtual-kubelet"))
        .unwrap();
    ipam.unmap_endpoint(&milan, ip, &h("virtual-kubelet"))
        .unwrap();
    assert_eq!(ipam.endpoints().count(), 1, "the unnamed hold remains");
    ipam.unmap_endpoint(&milan, ip, &h("virtual-kubelet"))
        .unwrap();
    assert_eq!(ipam.endpoints().count(), 0, "then it is dropped too");
}

#[test]
fn holder_names_are_checked() {
    for bad in ["Virtual", "a b", &"x".repeat(64), "é"] {
        let e = bad.parse::<crate::Holder>().unwrap_err();
        assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
    }
    for good in ["", "virtual-kubelet", "liqo.io/reflection", &"x".repeat(63)] {
        assert_eq!(good.parse::<crate::Holder>().unwrap().as_str(), good);
    }
}

#[test]
fn endpoints_stored_before_holders_are_held_by_the_unnamed_holder() {
    let old = r#"{"ip":"172.18.0.2","externalIp":"10.70.0.1","peers":["milan"]}"#;
    let e: crate::state::Endpoint = serde_json::from_str(old).unwrap();
    assert_eq!(
        e.peers,
        std::collections::BTreeMap::from([(
            id("milan"),
            std::collections::BTreeSet::from([h("")])
        )])
    );
    let again: crate::state::Endpoint =
        serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
    assert_eq!(again, e, "the new form reads back");
}
