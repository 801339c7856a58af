//! The NAT table, routes and rules planned for a configuration.

use super::*;
use crate::config::File;

fn config() -> Config {
    let text = "localPodCIDR: 10.200.0.0/16\npeers:\n  - id: milan\n    publicKey: xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=\n    remotePodCIDR: 10.71.0.0/16\n    remoteExternalCIDR: 10.72.0.0/16\n    localPodCIDRAtPeer: 10.50.0.0/16\n  - id: turin\n    publicKey: TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=\n    remotePodCIDR: 10.73.0.0/16\n    localPodCIDRAtPeer: 10.200.0.0/16\n";
    File::parse(text).unwrap().validate(None).unwrap()
}

#[test]
fn nat_without_endpoints_snapshot() {
    insta::assert_snapshot!(dataplane::nft::build::batch(&nat(&config())).unwrap());
}

#[test]
fn nat_entries_are_in_address_order_whatever_the_peer_ids() {
    let text = "localPodCIDR: 10.200.0.0/16\npeers:\n  - id: aosta\n    publicKey: xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=\n    remotePodCIDR: 10.90.0.0/16\n    localPodCIDRAtPeer: 10.50.0.0/16\n  - id: zurich\n    publicKey: TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=\n    remotePodCIDR: 10.60.0.0/16\n    localPodCIDRAtPeer: 10.200.0.0/16\n";
    let rs = nat(&File::parse(text).unwrap().validate(None).unwrap());
    let ranges: Vec<String> = (rs.mark_maps[0].entries.iter())
        .map(|(n, m)| format!("{n} {m:#x}"))
        .collect();
    assert_eq!(ranges, ["10.60.0.0/16 0xa3c0000", "10.90.0.0/16 0xa5a0000"]);
    let dnat: Vec<String> = (rs.mark_prefix_maps[1].entries.iter())
        .map(|((m, n), to)| format!("{m:#x} {n} {to}"))
        .collect();
    assert_eq!(
        dnat,
        [
            "0xa3c0000 10.200.0.0/16 10.200.0.0/16",
            "0xa5a0000 10.50.0.0/16 10.200.0.0/16"
        ]
    );
}

#[test]
fn routes_and_rules() {
    let c = config();
    let gw: Vec<String> = gateway_routes(&c).iter().map(ToString::to_string).collect();
    assert_eq!(
        gw,
        [
            "10.71.0.0/16 dev liqo.tunnel table 18952",
            "10.72.0.0/16 dev liqo.tunnel table 18952",
            "10.73.0.0/16 dev liqo.tunnel table 18952",
            "10.200.0.0/16 via 169.254.100.1 dev liqo.gateway table 18952"
        ]
    );
    let host: Vec<String> = host_routes(&c).iter().map(ToString::to_string).collect();
    assert_eq!(
        host,
        [
            "10.71.0.0/16 via 169.254.100.2 dev liqo.host mtu 1420 table 18951",
            "10.72.0.0/16 via 169.254.100.2 dev liqo.host mtu 1420 table 18951",
            "10.73.0.0/16 via 169.254.100.2 dev liqo.host mtu 1420 table 18951"
        ]
    );
    let mut c = c;
    c.mtu = 1380;
    assert!(host_routes(&c).iter().all(|r| r.mtu == Some(1380)));
    let rules: Vec<String> = host_rules(&c).iter().map(ToString::to_string).collect();
    assert_eq!(
        rules,
        ["18953: lookup 18951"],
        "one rule whatever the peers"
    );
    c.peers.clear();
    assert!(host_rules(&c).is_empty(), "no peer, no rule");
    c.host_routes = false;
    assert!(host_rules(&c).is_empty() && host_routes(&c).is_empty());
}

/// `config()` with our external CIDR 10.70.0.0/16, milan seeing it at 10.51.0.0/16 (turin has
/// no view of it), and three mappings: one for milan and turin, one for milan and a peer not
/// configured, one for turin only.
fn mapped() -> Config {
    let text = "localPodCIDR: 10.200.0.0/16\nlocalExternalCIDR: 10.70.0.0/16\npeers:\n  - id: milan\n    publicKey: xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=\n    remotePodCIDR: 10.71.0.0/16\n    remoteExternalCIDR: 10.72.0.0/16\n    localPodCIDRAtPeer: 10.50.0.0/16\n    localExternalCIDRAtPeer: 10.51.0.0/16\n  - id: turin\n    publicKey: TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=\n    remotePodCIDR: 10.73.0.0/16\n    localPodCIDRAtPeer: 10.200.0.0/16\nendpoints:\n  - {ip: 192.168.1.10, externalIP: 10.70.0.1, peers: [milan, turin]}\n  - {ip: 192.168.1.11, externalIP: 10.70.3.2, peers: [zurich, milan]}\n  - {ip: 192.168.1.12, externalIP: 10.70.0.3, peers: [turin]}\n";
    File::parse(text).unwrap().validate(None).unwrap()
}

fn endpoint_map(rs: &Ruleset) -> Vec<String> {
    let m = (rs.mark_prefix_maps.iter())
        .find(|m| m.name.as_str() == "dnat_endpoint")
        .unwrap();
    assert_eq!(m.prefix_len, 32, "exact keys");
    m.entries
        .iter()
        .map(|((mark, n), to)| format!("{mark:#x} . {n} : {to}"))
        .collect()
}

fn endpoint_set(rs: &Ruleset) -> Vec<String> {
    let s = (rs.sets.iter())
        .find(|s| s.name.as_str() == "endpoint_ips")
        .unwrap();
    s.prefixes.iter().map(ToString::to_string).collect()
}

#[test]
fn nat_with_endpoints_snapshot() {
    insta::assert_snapshot!(dataplane::nft::build::batch(&nat(&mapped())).unwrap());
}

#[test]
fn each_listed_peer_range_reaches_the_endpoint_at_its_view_of_our_external_cidr() {
    let rs = nat(&mapped());
    // milan's two ranges (marks 0xa470000, 0xa480000) each reach .10 and .11 at their
    // addresses in 10.51.0.0/16; turin has no view of our external CIDR, zurich is not
    // configured, so .12 (turin's only) has no entry at all.
    assert_eq!(
        endpoint_map(&rs),
        [
            "0xa470000 . 10.51.0.1/32 : 192.168.1.10/32",
            "0xa470000 . 10.51.3.2/32 : 192.168.1.11/32",
            "0xa480000 . 10.51.0.1/32 : 192.168.1.10/32",
            "0xa480000 . 10.51.3.2/32 : 192.168.1.11/32",
        ]
    );
    assert_eq!(endpoint_set(&rs), ["192.168.1.10/32", "192.168.1.11/32"]);
    // The same entries reversed for the endpoints' own connections.
    let snat = (rs.mark_prefix_maps.iter())
        .find(|m| m.name.as_str() == "snat_endpoint")
        .unwrap();
    let snat: Vec<String> = (snat.entries.iter())
        .map(|((mark, n), to)| format!("{mark:#x} . {n} : {to}"))
        .collect();
    assert_eq!(
        snat,
        [
            "0xa470000 . 192.168.1.10/32 : 10.51.0.1/32",
            "0xa470000 . 192.168.1.11/32 : 10.51.3.2/32",
            "0xa480000 . 192.168.1.10/32 : 10.51.0.1/32",
            "0xa480000 . 192.168.1.11/32 : 10.51.3.2/32",
        ]
    );
    // Other local sources: the first address of milan's view, for each of milan's ranges.
    let hosts: Vec<String> = (rs.mark_addr_maps[0].entries.iter())
        .map(|(mark, a)| format!("{mark:#x} : {a}"))
        .collect();
    assert_eq!(hosts, ["0xa470000 : 10.51.0.0", "0xa480000 : 10.51.0.0"]);
    let gw: Vec<String> = gateway_routes(&mapped())
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        gw[gw.len() - 2..],
        [
            "10.200.0.0/16 via 169.254.100.1 dev liqo.gateway table 18952",
            "0.0.0.0/0 via 169.254.100.1 dev liqo.gateway table 18952",
        ],
        "with an external CIDR, what is not a peer's goes back to the host"
    );
    assert!(
        !(gateway_routes(&config()).iter()).any(|r| r.to_string().starts_with("0.0.0.0/0")),
        "without one, only our pods do"
    );
}

#[test]
fn a_mapping_added_or_removed_is_an_element_change() {
    let with = mapped();
    let mut without = with.clone();
    without.endpoints.remove(1);
    let (a, b) = (nat(&with), nat(&without));
    assert_eq!(a.chains, b.chains, "the same rules");
    assert_eq!(
        a.mark_prefix_maps.len() + a.sets.len(),
        b.mark_prefix_maps.len() + b.sets.len()
    );
    assert_eq!(endpoint_map(&b).len(), 2);
    assert_eq!(endpoint_set(&b), ["192.168.1.10/32"]);
    // No mapping, no external CIDR: the map and set are there, empty.
    let plain = nat(&config());
    assert_eq!(plain.chains, a.chains);
    assert!(endpoint_map(&plain).is_empty() && endpoint_set(&plain).is_empty());
    assert!(plain.mark_addr_maps[0].entries.is_empty());
    assert_eq!(plain.mark_prefix_maps.len(), a.mark_prefix_maps.len());
    assert_eq!(plain.mark_addr_maps.len(), a.mark_addr_maps.len());
    // A peer dropped from a mapping loses its entries only.
    let mut fewer = with.clone();
    fewer.endpoints[0].peers.remove("milan");
    assert_eq!(
        endpoint_map(&nat(&fewer)),
        [
            "0xa470000 . 10.51.3.2/32 : 192.168.1.11/32",
            "0xa480000 . 10.51.3.2/32 : 192.168.1.11/32",
        ]
    );
}

#[test]
fn endpoints_without_our_external_cidr_translate_nothing() {
    let mut c = mapped();
    c.local_external_cidr = None;
    for p in c.peers.values_mut() {
        p.local_external_cidr_at_peer = None;
    }
    let rs = nat(&c);
    assert!(endpoint_map(&rs).is_empty() && endpoint_set(&rs).is_empty());
    assert!(rs.mark_addr_maps[0].entries.is_empty());
    assert_eq!(rs.chains, nat(&mapped()).chains, "the same rules");
}
