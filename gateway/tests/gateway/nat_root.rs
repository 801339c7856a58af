//! A cluster behind NAT (needs root): its gateway dials a public one that has no endpoint for it;
//! the public side learns the endpoint, and follows it when the NAT's mapping changes.

use crate::common;

use std::time::Instant;

use common::{Site, Spaces, eventually, prefix, route, tcp_seen, wire};
use dataplane::{
    Netlink,
    nft::{self, BaseChain, Chain, ChainKind, Expr, Family, Hook, Policy, Rule, Ruleset},
};

const KEEPALIVE: u64 = 2;

/// The NAT router: WAN `wan_addr` on the bridge, LAN 192.168.77.0/24 to the NATed host, masquerading.
async fn router_up(name: &str, wan: &dataplane::Netns, natted: &Site, wan_addr: &str) {
    let ns = dataplane::Netns::create(&name.parse().unwrap()).unwrap();
    Netlink::connect_in(&ns)
        .unwrap()
        .set_up(&"lo".parse().unwrap(), true)
        .await
        .unwrap();
    wire(wan, "router", "", Some("br0"), &ns, "wan0", wan_addr).await;
    wire(
        &ns,
        "lan0",
        "192.168.77.1/24",
        None,
        &natted.host,
        "wan0",
        "192.168.77.2/24",
    )
    .await;
    route(&natted.host, "0.0.0.0/0", "192.168.77.1").await;
    ns.run(|| dataplane::sysctl::set("net.ipv4.ip_forward", "1"))
        .unwrap()
        .unwrap();
    let mut rs = Ruleset::new(Family::Ip, "router_nat".parse().unwrap());
    rs.chains.push(Chain {
        name: "post".parse().unwrap(),
        base: Some(BaseChain {
            kind: ChainKind::Nat,
            hook: Hook::Postrouting,
            priority: 100,
            policy: Policy::Accept,
        }),
        rules: vec![Rule::new(vec![
            Expr::Oif("wan0".parse().unwrap()),
            Expr::Masquerade,
        ])],
    });
    nft::apply(Some(&ns), &rs).unwrap();
}

#[tokio::test]
async fn natted_cluster_reaches_a_public_one_and_survives_a_new_mapping() {
    let p = prefix("n");
    let mut spaces = Spaces::new();
    let wan = common::wan(&mut spaces, &p).await;
    let mut public = Site::new(&mut spaces, &p, "pub", &wan, "198.18.0.1/24").await;
    let mut natted = Site::new(&mut spaces, &p, "nat", &wan, "").await;

    let router_name = format!("{p}-router");
    spaces.adopt(&router_name);
    router_up(&router_name, &wan, &natted, "198.18.0.10/24").await;

    // The public side has no endpoint for the NATed one; the NATed one keeps the path open.
    public.configure(&natted.as_peer(None, "10.91.0.0/16", "10.92.0.0/16"), "");
    natted.configure(
        &public.as_peer(Some("198.18.0.1:51840"), "10.92.0.0/16", "10.91.0.0/16"),
        &format!("keepalive: {KEEPALIVE}\n"),
    );
    public.start();
    natted.start();

    assert!(
        eventually(10, || natted.ping("10.92.0.2")),
        "NATed -> public\n{}",
        natted.log()
    );
    assert!(
        public.ping("10.91.0.2"),
        "public -> NATed over the learned endpoint\n{}",
        public.log()
    );
    assert_eq!(tcp_seen(&public, &natted, "10.91.0.2", 7101), "10.92.0.2");
    let learned = public.status_json().unwrap()["peers"][0]["endpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        learned.starts_with("198.18.0.10:"),
        "endpoint learned through the NAT: {learned}"
    );

    // The router restarts (its conntrack state is gone) and comes back with a new public
    // address: every mapping changes.
    dataplane::Netns::delete(&router_name.parse().unwrap()).unwrap();
    router_up(&router_name, &wan, &natted, "198.18.0.11/24").await;
    let changed = Instant::now();
    assert!(
        eventually(2 * KEEPALIVE + 2, || public.ping("10.91.0.2")),
        "recovered\n{}",
        public.log()
    );
    let took = changed.elapsed();
    let now = public.status_json().unwrap()["peers"][0]["endpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        now.starts_with("198.18.0.11:"),
        "endpoint followed the new mapping: {now}"
    );
    assert!(
        took.as_secs_f64() <= (2 * KEEPALIVE) as f64 + 1.0,
        "recovered in {took:?}, more than two keepalives"
    );
    eprintln!("recovered {took:?} after the NAT mapping changed (keepalive {KEEPALIVE} s)");
}
