//! Helpers for the privileged tests of this and other crates: namespaces removed on drop, and
//! wiring them together with veth pairs and routes. Not for production code: they panic on any error.

use crate::{
    Netlink, Netns, NetnsName,
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

/// Namespaces removed on drop (in reverse order), with every process inside, even when the
/// test panics.
#[derive(Debug, Default)]
pub struct Spaces {
    /// The namespaces, in creation order.
    pub names: Vec<NetnsName>,
}

impl Spaces {
    /// No namespaces yet.
    pub fn new() -> Spaces {
        Spaces::default()
    }

    /// Creates `name` with `lo` up.
    pub async fn create(&mut self, name: &str) -> Netns {
        let n: NetnsName = name.parse().expect("namespace name");
        let ns = Netns::create(&n).expect("namespace");
        self.names.push(n);
        Netlink::connect_in(&ns)
            .expect("netlink")
            .set_up(&"lo".parse().expect("literal"), true)
            .await
            .expect("lo up");
        ns
    }

    /// Also removes `name` on drop (a namespace created by someone else, e.g. a daemon).
    pub fn adopt(&mut self, name: &str) {
        self.names.push(name.parse().expect("namespace name"));
    }
}

impl Drop for Spaces {
    fn drop(&mut self) {
        for n in self.names.iter().rev() {
            if let Err(e) = Netns::purge(n) {
                eprintln!("testing: removing namespace {n}: {e}");
            }
        }
    }
}
