//! Links, addresses, routes, rules, neighbours and TUN on the real kernel (needs root).

use crate::common;

use common::{TestNs, wire};
use dataplane::{
    IfName,
    addr::AddressSpec,
    link::{LinkKind, LinkSpec, VxlanSpec},
    neigh::FdbSpec,
    route::{MAIN_TABLE, RouteSpec},
    rule::RuleSpec,
    tun::{self, TunOptions},
};

fn n(s: &str) -> IfName {
    s.parse().unwrap()
}

fn route(dst: &str, via: Option<&str>, table: u32) -> RouteSpec {
    RouteSpec {
        via: via.map(|v| v.parse().unwrap()),
        table,
        ..RouteSpec::to(dst.parse().unwrap())
    }
}

#[tokio::test]
async fn veth_bridge_and_routed_ping() {
    // h1 -- sw(br0) -- r1 ... r1 routes 10.2.0.0/24 to h2 over a second wire.
    let (h1, sw, r1, h2) = (
        TestNs::new("h1").await,
        TestNs::new("sw").await,
        TestNs::new("r1").await,
        TestNs::new("h2").await,
    );
    let nsw = sw.nl();
    nsw.add_link(&LinkSpec {
        name: n("br0"),
        kind: LinkKind::Bridge,
        mtu: None,
        controller: None,
        up: true,
    })
    .await
    .unwrap();
    for (host, port, addr) in [(&h1, "p1", "10.1.0.1/24"), (&r1, "p2", "10.1.0.254/24")] {
        nsw.add_link(&LinkSpec {
            name: n(port),
            kind: LinkKind::Veth {
                peer: n("eth0"),
                peer_netns: Some(host.name().clone()),
            },
            mtu: Some(1450),
            controller: Some(n("br0")),
            up: true,
        })
        .await
        .unwrap();
        host.nl().set_up(&n("eth0"), true).await.unwrap();
        host.nl()
            .add_address(&AddressSpec {
                link: n("eth0"),
                addr: addr.parse().unwrap(),
            })
            .await
            .unwrap();
    }
    let links = nsw.links().await.unwrap();
    let br = links.iter().find(|l| l.name == "br0").unwrap();
    assert_eq!(br.kind, "bridge");
    let p1 = links.iter().find(|l| l.name == "p1").unwrap();
    assert_eq!(
        (p1.kind.as_str(), p1.controller, p1.mtu, p1.up),
        ("veth", Some(br.index), 1450, true)
    );

    wire(&r1, "eth1", "10.2.0.254/24", &h2, "eth0", "10.2.0.1/24").await;
    r1.ns
        .run(|| dataplane::sysctl::set("net.ipv4.ip_forward", "1"))
        .unwrap()
        .unwrap();
    h1.nl()
        .add_route(&route("10.2.0.0/24", Some("10.1.0.254"), MAIN_TABLE))
        .await
        .unwrap();
    assert!(!h1.ping("10.2.0.1"), "no return route yet");
    h2.nl()
        .add_route(&route("0.0.0.0/0", Some("10.2.0.254"), MAIN_TABLE))
        .await
        .unwrap();
    assert!(h1.ping("10.2.0.1"));

    let addrs = h1.nl().addresses().await.unwrap();
    assert!(addrs.contains(&AddressSpec {
        link: n("eth0"),
        addr: "10.1.0.1/24".parse().unwrap()
    }));
    let routes = h1.nl().routes(MAIN_TABLE).await.unwrap();
    assert!(
        routes
            .iter()
            .any(|r| r.dst == "10.2.0.0/24".parse().unwrap()
                && r.via == Some("10.1.0.254".parse().unwrap())),
        "{routes:?}"
    );
}

#[tokio::test]
async fn bad_input_leaves_state_untouched() {
    let t = TestNs::new("bad").await;
    let nl = t.nl();
    let before = nl.routes(MAIN_TABLE).await.unwrap();
    let mut r = route("10.5.0.0/16", None, MAIN_TABLE);
    r.dev = Some(n("nosuchdev"));
    let e = nl.add_route(&r).await.unwrap_err();
    assert_eq!(e.to_string(), "no link named nosuchdev");
    // The kernel refuses an unreachable next hop; the error names the request.
    let e = nl
        .add_route(&route("10.6.0.0/16", Some("192.0.2.1"), MAIN_TABLE))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("add route 10.6.0.0/16 via 192.0.2.1"),
        "{e}"
    );
    assert!(e.errno().is_some());
    assert_eq!(nl.routes(MAIN_TABLE).await.unwrap(), before);
    // Creating a link twice fails with EEXIST and leaves the first one.
    let br = LinkSpec {
        name: n("br9"),
        kind: LinkKind::Bridge,
        mtu: None,
        controller: None,
        up: false,
    };
    nl.add_link(&br).await.unwrap();
    let e = nl.add_link(&br).await.unwrap_err();
    assert_eq!(e.errno(), Some(libc::EEXIST), "{e}");
    assert_eq!(
        nl.links()
            .await
            .unwrap()
            .iter()
            .filter(|l| l.name == "br9")
            .count(),
        1
    );
}

#[tokio::test]
async fn rules_and_table_reconcile_minimally() {
    let t = TestNs::new("rules").await;
    let nl = t.nl();
    nl.add_link(&LinkSpec {
        name: n("br0"),
        kind: LinkKind::Bridge,
        mtu: None,
        controller: None,
        up: true,
    })
    .await
    .unwrap();
    nl.add_address(&AddressSpec {
        link: n("br0"),
        addr: "10.8.0.1/24".parse().unwrap(),
    })
    .await
    .unwrap();
    let rule = RuleSpec {
        priority: 1900,
        from: None,
        to: Some("10.71.0.0/16".parse().unwrap()),
        iif: None,
        fwmark: None,
        table: 1000,
        v6: false,
    };
    nl.add_rule(&rule).await.unwrap();
    assert!(nl.rules().await.unwrap().contains(&rule));

    let a = route("10.71.0.0/16", Some("10.8.0.2"), 1000);
    let b = route("10.72.0.0/16", Some("10.8.0.2"), 1000);
    let c = route("10.73.0.0/16", Some("10.8.0.3"), 1000);
    let d = nl
        .reconcile_table(1000, &[a.clone(), b.clone()])
        .await
        .unwrap();
    assert_eq!(d.add.len(), 2);
    let d = nl
        .reconcile_table(1000, &[a.clone(), c.clone()])
        .await
        .unwrap();
    assert_eq!(
        d.remove.iter().map(|r| r.dst).collect::<Vec<_>>(),
        vec![b.dst],
        "only the changed route moves"
    );
    assert_eq!(d.add, vec![c.clone()]);
    let now = nl.routes(1000).await.unwrap();
    assert_eq!(now.len(), 2);
    assert!(
        now.iter().any(|r| a.is_satisfied_by(r)) && now.iter().any(|r| c.is_satisfied_by(r)),
        "{now:?}"
    );
    assert!(
        nl.reconcile_table(
            1000,
            &[a.clone(), route("10.73.0.0/16", Some("10.8.0.3"), 1000)]
        )
        .await
        .unwrap()
        .is_empty()
    );
    assert!(
        nl.routes(MAIN_TABLE)
            .await
            .unwrap()
            .iter()
            .all(|r| r.dst != a.dst),
        "other tables untouched"
    );

    nl.delete_rule(&rule).await.unwrap();
    assert!(!nl.rules().await.unwrap().contains(&rule));
}

#[tokio::test]
async fn vxlan_with_two_flood_entries_carries_traffic() {
    let (a, b) = (TestNs::new("vxa").await, TestNs::new("vxb").await);
    wire(&a, "eth0", "172.30.0.1/24", &b, "eth0", "172.30.0.2/24").await;
    for (t, local, remote, inner) in [
        (&a, "172.30.0.1", "172.30.0.2", "10.50.0.1/24"),
        (&b, "172.30.0.2", "172.30.0.1", "10.50.0.2/24"),
    ] {
        let nl = t.nl();
        nl.add_link(&LinkSpec {
            name: n("vx0"),
            kind: LinkKind::Vxlan(VxlanSpec {
                vni: 18952,
                port: 4789,
                local: Some(local.parse().unwrap()),
                dev: Some(n("eth0")),
                learning: false,
            }),
            mtu: Some(1450),
            controller: None,
            up: true,
        })
        .await
        .unwrap();
        // Two all-zero entries: the second needs NLM_F_APPEND.
        for dst in [remote, "172.30.0.99"] {
            nl.append_fdb(&FdbSpec {
                link: n("vx0"),
                mac: [0; 6],
                dst: dst.parse().unwrap(),
            })
            .await
            .unwrap();
        }
        assert_eq!(
            nl.fdb(&n("vx0"))
                .await
                .unwrap()
                .iter()
                .filter(|f| f.mac == [0; 6])
                .count(),
            2
        );
        nl.add_address(&AddressSpec {
            link: n("vx0"),
            addr: inner.parse().unwrap(),
        })
        .await
        .unwrap();
        assert_eq!(nl.link(&n("vx0")).await.unwrap().unwrap().kind, "vxlan");
    }
    assert!(a.ping("10.50.0.2"), "ping over VXLAN");
    let nl = a.nl();
    nl.delete_fdb(&FdbSpec {
        link: n("vx0"),
        mac: [0; 6],
        dst: "172.30.0.99".parse().unwrap(),
    })
    .await
    .unwrap();
    assert_eq!(nl.fdb(&n("vx0")).await.unwrap().len(), 1);
}

#[tokio::test]
async fn tun_lives_as_long_as_its_fd() {
    let t = TestNs::new("tun").await;
    let fd =
        t.ns.run(|| {
            tun::create(
                &n("tun0"),
                TunOptions {
                    multi_queue: true,
                    vnet_hdr: false,
                    exclusive: false,
                },
            )
        })
        .unwrap()
        .unwrap();
    let nl = t.nl();
    let link = nl.link(&n("tun0")).await.unwrap().expect("tun0 exists");
    assert_eq!(link.kind, "tun");
    nl.set_mtu(&n("tun0"), 1420).await.unwrap();
    assert_eq!(nl.link(&n("tun0")).await.unwrap().unwrap().mtu, 1420);
    drop(fd);
    assert!(nl.link(&n("tun0")).await.unwrap().is_none());
    assert!(nl.link(&n("tun0")).await.is_ok());
}
