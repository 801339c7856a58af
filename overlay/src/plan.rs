//! What the kernel should hold on this node, as plain values.
//!
//! - Every node: a VXLAN device with its overlay address (240.b.c.d/8), a static forwarding entry
//!   and neighbour for every other node (deterministic MACs: no ARP, no flooding).
//! - An ordinary node: `lookup 18952` (one rule, see [`rules`]), and in table 18952 each remote range via
//!   the gateway node's overlay address, with the path MTU to it (the smaller of the overlay's and
//!   the tunnel's) on the route: a larger DF packet from a pod is refused right here with
//!   "fragmentation needed" from this node's own address on the pod's bridge, which the pod
//!   accepts. Without it the packet fits the overlay, crosses to the gateway node and is refused
//!   by the gateway's namespace from its link address (169.254.100.2), which this node's
//!   reverse-path filter drops (no route back to it here): the packet would vanish.
//! - The gateway node: `iif liqo.host lookup 18952` (one rule), and in table 18952 each other node's
//!   pod CIDR and the node's own address (a `/32`, a peer reaching a node or a host-network pod
//!   through our external CIDR) via that node's overlay address, so traffic from remote clusters
//!   reaches pods and nodes on other nodes over the overlay, the way their replies come back
//!   (symmetric routing; strict reverse-path filters stay happy). Only while there are remote
//!   ranges. Traffic *to* remote ranges on the gateway node is the gateway's business (its own
//!   table into its namespace).

use std::net::IpAddr;

use dataplane::{
    link::{LinkKind, LinkSpec, VxlanSpec},
    neigh::{FdbSpec, NeighbourSpec},
    route::RouteSpec,
    rule::RuleSpec,
};
use ipnet::{IpNet, Ipv4Net};

use crate::config::Config;

/// The VXLAN device.
pub fn device(c: &Config) -> LinkSpec {
    LinkSpec {
        name: c.device.clone(),
        kind: LinkKind::Vxlan(VxlanSpec {
            vni: c.vni,
            port: c.port,
            local: Some(c.me().address),
            dev: c.underlay.clone(),
            learning: false,
        }),
        mtu: Some(c.mtu),
        controller: None,
        up: true,
    }
}

/// This node's overlay address.
pub fn address(c: &Config) -> IpNet {
    IpNet::V4(Ipv4Net::new(c.me().overlay_ip(), 8).expect("/8"))
}

/// Forwarding entries: each other node's MAC lives at its underlay address.
pub fn fdb(c: &Config) -> Vec<FdbSpec> {
    c.others()
        .map(|n| FdbSpec {
            link: c.device.clone(),
            mac: n.mac(),
            dst: IpAddr::V4(n.address),
        })
        .collect()
}

/// Neighbours: each other node's overlay address has its MAC.
pub fn neighbours(c: &Config) -> Vec<NeighbourSpec> {
    c.others()
        .map(|n| NeighbourSpec {
            link: c.device.clone(),
            ip: IpAddr::V4(n.overlay_ip()),
            mac: n.mac(),
        })
        .collect()
}

/// Routes of the overlay table.
pub fn routes(c: &Config, table: u32) -> Vec<RouteSpec> {
    let via = |n: std::net::Ipv4Addr, dst: Ipv4Net, mtu: Option<u32>| RouteSpec {
        via: Some(IpAddr::V4(n)),
        dev: Some(c.device.clone()),
        table,
        mtu,
        onlink: true,
        ..RouteSpec::to(IpNet::V4(dst))
    };
    if c.is_gateway() {
        // Only needed (and only reachable through the rules) while there are remote ranges.
        // What comes from the tunnel fits it, and so the overlay: no MTU of its own.
        // Each other node's pods and the node itself (a peer reaching a node or a host-network
        // pod through our external CIDR): over the overlay, so the node sees the remote source
        // arrive on the device it routes remote ranges through (its reverse-path check).
        c.others()
            .filter(|_| !c.remote_cidrs.is_empty())
            .flat_map(|n| {
                let node = Ipv4Net::new(n.address, 32).expect("a /32 is always valid");
                [
                    via(n.overlay_ip(), n.pod_cidr, None),
                    via(n.overlay_ip(), node, None),
                ]
            })
            .collect()
    } else {
        c.remote_cidrs
            .iter()
            .map(|r| via(c.gateway().overlay_ip(), *r, Some(c.remote_mtu())))
            .collect()
    }
}

/// The one rule sending the right traffic to the overlay table, whatever the number of remote
/// ranges (the kernel walks the rules for every packet it routes, so a rule per range would
/// make every packet pay for every peer):
/// - an ordinary node: `lookup <table>` for everything; the table holds only the remote ranges,
///   and a destination it does not hold falls through to the next rule;
/// - the gateway node: `iif <gateway link> lookup <table>`: what arrives from the gateway (from
///   remote clusters) goes to pods on other nodes over the overlay; the node's own traffic keeps
///   its usual routes.
pub fn rules(c: &Config, table: u32) -> Vec<RuleSpec> {
    if c.remote_cidrs.is_empty() {
        return Vec::new();
    }
    vec![RuleSpec {
        priority: table,
        from: None,
        to: None,
        iif: c.is_gateway().then(|| c.gateway_interface.clone()),
        fwmark: None,
        table,
        v6: false,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::File;

    fn config(me: &str) -> Config {
        let text = format!(
            "node: {me}\ngateway: n0\nremoteCIDRs: [10.71.0.0/16, 10.72.0.0/16]\nnodes:\n  - {{name: n0, address: 172.18.0.1, podCIDR: 10.200.0.0/24}}\n  - {{name: n1, address: 172.18.0.2, podCIDR: 10.200.1.0/24}}\n  - {{name: n2, address: 172.18.0.3, podCIDR: 10.200.2.0/24}}\n"
        );
        File::parse(&text).unwrap().validate().unwrap()
    }

    fn show<T: ToString>(v: &[T]) -> Vec<String> {
        v.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn without_remote_ranges_nothing_is_routed() {
        for me in ["n0", "n1"] {
            let mut c = config(me);
            c.remote_cidrs.clear();
            assert!(routes(&c, 18952).is_empty(), "{me}");
            assert!(rules(&c, 18952).is_empty(), "{me}");
            assert_eq!(fdb(&c).len(), 2, "the overlay itself stays");
        }
    }

    #[test]
    fn ordinary_nodes_send_remote_ranges_to_the_gateway() {
        let c = config("n1");
        assert_eq!(address(&c).to_string(), "240.18.0.2/8");
        assert_eq!(
            show(&routes(&c, 18952)),
            [
                "10.71.0.0/16 via 240.18.0.1 dev liqo.vxlan mtu 1420 onlink table 18952",
                "10.72.0.0/16 via 240.18.0.1 dev liqo.vxlan mtu 1420 onlink table 18952"
            ]
        );
        assert_eq!(
            show(&rules(&c, 18952)),
            ["18952: lookup 18952"],
            "one rule whatever the remote ranges"
        );
        let f = fdb(&c);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].mac, [0x02, 0x4c, 0x51, 18, 0, 1]);
    }

    #[test]
    fn remote_routes_carry_the_path_mtu() {
        let mut c = config("n1");
        c.tunnel_mtu = 1380;
        assert!(routes(&c, 18952).iter().all(|r| r.mtu == Some(1380)));
        c.tunnel_mtu = 1500;
        assert!(
            routes(&c, 18952).iter().all(|r| r.mtu == Some(1450)),
            "never above the overlay's own MTU"
        );
        let mut c = config("n0");
        c.tunnel_mtu = 1380;
        assert!(routes(&c, 18952).iter().all(|r| r.mtu.is_none()));
    }

    #[test]
    fn the_gateway_node_returns_traffic_over_the_overlay() {
        let c = config("n0");
        assert_eq!(
            show(&routes(&c, 18952)),
            [
                "10.200.1.0/24 via 240.18.0.2 dev liqo.vxlan onlink table 18952",
                "172.18.0.2/32 via 240.18.0.2 dev liqo.vxlan onlink table 18952",
                "10.200.2.0/24 via 240.18.0.3 dev liqo.vxlan onlink table 18952",
                "172.18.0.3/32 via 240.18.0.3 dev liqo.vxlan onlink table 18952"
            ]
        );
        assert_eq!(
            show(&rules(&c, 18952)),
            ["18952: iif liqo.host lookup 18952"],
            "one rule: what comes from the gateway"
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        let good = "node: n1\ngateway: n0\nremoteCIDRs: [10.71.0.0/16]\nnodes:\n  - {name: n0, address: 172.18.0.1, podCIDR: 10.200.0.0/24}\n  - {name: n1, address: 172.18.0.2, podCIDR: 10.200.1.0/24}\n";
        let cases = [
            (good.replace("gateway: n0", "gateway: n9"), "gateway"),
            (good.replace("node: n1", "node: x"), "node"),
            (
                good.replace("10.200.1.0/24", "10.200.0.128/25"),
                "nodes[1].podCIDR",
            ),
            (good.replace("172.18.0.2", "173.18.0.1"), "nodes[1].address"),
            (
                good.replace("10.71.0.0/16", "10.200.0.0/16"),
                "remoteCIDRs[0]",
            ),
            (
                good.replace("10.71.0.0/16", "10.71.0.1/16"),
                "remoteCIDRs[0]",
            ),
            (format!("vni: 0\n{good}"), "vni"),
            (format!("mtu: 100\n{good}"), "mtu"),
            (format!("tunnelMTU: 100\n{good}"), "tunnelMTU"),
            (
                format!("gatewayInterface: \"no such/name\"\n{good}"),
                "gatewayInterface",
            ),
            (format!("bogus: 1\n{good}"), "bogus"),
        ];
        for (text, field) in cases {
            let e = File::parse(&text).and_then(|f| f.validate()).unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
    }
}
