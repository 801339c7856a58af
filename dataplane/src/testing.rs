//! Helpers for the privileged tests of this and other crates: wiring namespaces together with
//! veth pairs and routes. Not for production code: they panic on any error.

use crate::{
    Netlink, Netns,
    addr::AddressSpec,
    link::{LinkKind, LinkSpec},
    route::RouteSpec,
};

/// A veth `a_if`@`a` <-> `b_if`@`b`, both up, with the given addresses (empty: none) and `a`'s
/// end optionally enslaved to `bridge`.
pub async fn wire(
    a: &Netns,
    a_if: &str,
    a_addr: &str,
    bridge: Option<&str>,
    b: &Netns,
    b_if: &str,
    b_addr: &str,
) {
    let (na, nb) = (
        Netlink::connect_in(a).expect("netlink"),
        Netlink::connect_in(b).expect("netlink"),
    );
    na.add_link(&LinkSpec {
        name: a_if.parse().expect("interface name"),
        kind: LinkKind::Veth {
            peer: b_if.parse().expect("interface name"),
            peer_netns: Some(b.name().clone()),
        },
        mtu: None,
        controller: bridge.map(|br| br.parse().expect("interface name")),
        up: true,
    })
    .await
    .expect("veth");
    nb.set_up(&b_if.parse().expect("interface name"), true)
        .await
        .expect("link up");
    for (nl, link, addr) in [(&na, a_if, a_addr), (&nb, b_if, b_addr)] {
        if !addr.is_empty() {
            let spec = AddressSpec {
                link: link.parse().expect("interface name"),
                addr: addr.parse().expect("address"),
            };
            nl.add_address(&spec).await.expect("address");
        }
    }
}

/// `ip route add <dst> via <via>` in `ns`.
pub async fn route(ns: &Netns, dst: &str, via: &str) {
    let r = RouteSpec {
        via: Some(via.parse().expect("gateway")),
        ..RouteSpec::to(dst.parse().expect("destination"))
    };
    Netlink::connect_in(ns)
        .expect("netlink")
        .add_route(&r)
        .await
        .expect("route");
}
