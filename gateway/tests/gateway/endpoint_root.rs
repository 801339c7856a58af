//! Endpoint mapping on the real kernel (needs root): peers reach a non-pod address of a site (an
//! address on a link of its host namespace, as a node or a host-network pod has) through
//! the site's external CIDR as each peer sees it, only where the mapping lists them; an unmapped
//! address, a mapping that does not list the peer, a real address, the address the site's other
//! local sources appear at and the site's gateway namespace are refused (dropped and counted),
//! and removing mappings leaves no element, set entry or route behind. The other way, the site's node opens connections to
//! the peers' pods from our external CIDR as each peer sees it: a mapped endpoint from its own
//! address there (for the peers it is mapped for), anything else from the CIDR's first address;
//! to a peer without a view of our external CIDR, what is not a pod is dropped and counted.

use crate::common;

use std::{
    io::{Read, Write},
    net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream},
    os::fd::OwnedFd,
};

use common::{Site, Spaces, eventually, prefix, tcp_seen_raw};
use dataplane::Netns;
use liqo_daemon::digest;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, socket};

/// The site's non-pod addresses (on a veth of its host namespace).
const NODE_IP: &str = "192.168.50.1";
const OTHER_IP: &str = "192.168.50.2";

/// Peer entries of the hub `a` for spokes b, c and d: b sees a's external CIDR (10.70/16) as
/// 10.73/16, c as 10.83/16, d not at all (no `localExternalCIDRAtPeer`); their pods appear to a
/// as 10.71/16, 10.81/16 and 10.91/16.
fn hub_peers(b: &Site, c: &Site, d: &Site) -> String {
    b.as_peer(Some("198.18.0.2:51840"), "10.71.0.0/16", "10.72.0.0/16")
        + "    localExternalCIDRAtPeer: 10.73.0.0/16\n"
        + &c.as_peer(Some("198.18.0.3:51840"), "10.81.0.0/16", "10.82.0.0/16")
        + "    localExternalCIDRAtPeer: 10.83.0.0/16\n"
        + &d.as_peer(Some("198.18.0.4:51840"), "10.91.0.0/16", "10.92.0.0/16")
}

/// The packets counted by the (only) counting rule of `chain` in the hub's NAT table: the
/// final drop of `prerouting` and `postrouting`.
fn dropped(a: &Site, chain: &str) -> u64 {
    let text = listed(a, &format!("chain {chain}"));
    let counted: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            l.split_once("counter packets ")?
                .1
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(counted.len(), 1, "one counter in {chain}:\n{text}");
    counted[0]
}

/// Whether `ip` answers one ping sent from `ns`.
fn ping_from(ns: &Netns, ip: &str) -> bool {
    let out = ns
        .command("ping")
        .args(["-c1", "-W2", "-q", ip])
        .output()
        .unwrap();
    out.status.success()
}

/// The hub's settings with these endpoint mappings (YAML list items).
fn hub_extra(endpoints: &str) -> String {
    if endpoints.is_empty() {
        "localExternalCIDR: 10.70.0.0/16\n".into()
    } else {
        format!("localExternalCIDR: 10.70.0.0/16\nendpoints:\n{endpoints}")
    }
}

/// Serves one TCP connection in `server` on `port`; dials `addr:port` from `client` (from
/// `source` if given); returns the client address the server saw.
fn tcp_seen_from(
    client: &Netns,
    source: Option<&str>,
    server: &Netns,
    addr: &str,
    port: u16,
) -> String {
    let listener = server
        .run(move || TcpListener::bind(("0.0.0.0", port)))
        .unwrap()
        .unwrap();
    let serve = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().unwrap();
        s.write_all(peer.ip().to_string().as_bytes()).unwrap();
    });
    let to = SocketAddrV4::new(addr.parse().unwrap(), port);
    let from = source.map(|s| SocketAddrV4::new(s.parse::<Ipv4Addr>().unwrap(), 0));
    let mut c = client
        .run(move || -> nix::Result<TcpStream> {
            let fd: OwnedFd = socket(
                AddressFamily::Inet,
                SockType::Stream,
                SockFlag::SOCK_CLOEXEC,
                None,
            )?;
            if let Some(from) = from {
                bind(
                    std::os::fd::AsRawFd::as_raw_fd(&fd),
                    &SockaddrIn::from(from),
                )?;
            }
            connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &SockaddrIn::from(to))?;
            Ok(TcpStream::from(fd))
        })
        .unwrap()
        .unwrap_or_else(|e| panic!("connecting to {to} from {from:?}: {e}"));
    let mut seen = String::new();
    c.read_to_string(&mut seen).unwrap();
    serve.join().unwrap();
    seen
}

/// The handle of the hub's NAT table: a new one when the table is replaced whole.
fn table_handle(a: &Site) -> String {
    let ns = dataplane::Netns::open(&a.gw_ns.parse().unwrap()).unwrap();
    let out = ns
        .command("nft")
        .args(["-a", "list", "table", "ip", "liqo_gateway"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap_or_default();
    first
        .split_once("# handle ")
        .unwrap_or_else(|| panic!("no handle in {first:?}"))
        .1
        .trim()
        .to_owned()
}

/// Writes the hub's configuration and waits until the gateway runs it; the NAT changed by
/// elements only (the table was not replaced).
fn reconfigure(a: &Site, peers: &str, endpoints: &str) {
    let handle = table_handle(a);
    let text = a.configure(peers, &hub_extra(endpoints));
    let want = digest(&text);
    a.wait_status("the new mappings applied", |s| {
        s.reload.applied.as_ref().is_some_and(|x| x.digest == want)
    });
    assert_eq!(
        table_handle(a),
        handle,
        "an element change, not a new table"
    );
}

/// What `nft` lists in the hub's gateway namespace for `what` (`map dnat_endpoint`, ...).
fn listed(a: &Site, what: &str) -> String {
    let ns = dataplane::Netns::open(&a.gw_ns.parse().unwrap()).unwrap();
    let mut args = vec!["list"];
    args.extend(what.split(' '));
    args.insert(2, "ip");
    args.insert(3, "liqo_gateway");
    let out = ns.command("nft").args(&args).output().unwrap();
    assert!(out.status.success(), "nft {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The routes of the gateway table in the hub's gateway namespace.
fn gateway_routes(a: &Site) -> String {
    let ns = dataplane::Netns::open(&a.gw_ns.parse().unwrap()).unwrap();
    let out = ns
        .command("ip")
        .args(["route", "show", "table", "18952"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn peers_reach_a_mapped_node_address_only_where_listed() {
    let p = prefix("e");
    let mut spaces = Spaces::new();
    let wan = common::wan(&mut spaces, &p).await;
    let mut a = Site::new(&mut spaces, &p, "a", &wan, "198.18.0.1/24").await;
    let mut b = Site::new(&mut spaces, &p, "b", &wan, "198.18.0.2/24").await;
    let mut c = Site::new(&mut spaces, &p, "c", &wan, "198.18.0.3/24").await;
    let mut d = Site::new(&mut spaces, &p, "d", &wan, "198.18.0.4/24").await;

    // The hub's node addresses, with strict reverse-path filtering as many nodes have.
    let sh = |ns: &dataplane::Netns, args: &[&str]| {
        let out = ns.command("ip").args(args).output().unwrap();
        assert!(out.status.success(), "ip {args:?}: {out:?}");
    };
    sh(
        &a.host,
        &["link", "add", "ep0", "type", "veth", "peer", "name", "ep1"],
    );
    sh(&a.host, &["link", "set", "ep0", "up"]);
    sh(&a.host, &["link", "set", "ep1", "up"]);
    for ip in [NODE_IP, OTHER_IP] {
        sh(&a.host, &["addr", "add", &format!("{ip}/32"), "dev", "ep0"]);
    }
    a.host
        .run(|| dataplane::sysctl::set("net.ipv4.conf.all.rp_filter", "1"))
        .unwrap()
        .unwrap();

    // The spokes route the hub's external CIDR (as each sees it) into the tunnel.
    let spoke = |s: &Site, pods_at_hub: &str, hub_pods: &str, hub_external: &str| {
        let entry = a.as_peer(Some("198.18.0.1:51840"), hub_pods, pods_at_hub);
        s.configure(
            &format!("{entry}    remoteExternalCIDR: {hub_external}\n"),
            "",
        );
    };
    spoke(&b, "10.71.0.0/16", "10.72.0.0/16", "10.73.0.0/16");
    spoke(&c, "10.81.0.0/16", "10.82.0.0/16", "10.83.0.0/16");
    // d has no view of the hub's external CIDR (the hub gives it none); it routes the hub's
    // link range into the tunnel instead (its own link elsewhere), to probe the hub's gateway
    // namespace.
    d.configure(
        &(a.as_peer(Some("198.18.0.1:51840"), "10.92.0.0/16", "10.91.0.0/16")
            + "    remoteExternalCIDR: 169.254.100.0/30\n"),
        "linkCIDR: 169.254.200.0/30\n",
    );
    let peers = hub_peers(&b, &c, &d);
    // NODE_IP for both spokes, OTHER_IP for b only.
    let both = "  - {ip: 192.168.50.1, externalIP: 10.70.0.1, peers: [b, c]}\n";
    let b_only = "  - {ip: 192.168.50.2, externalIP: 10.70.0.2, peers: [b]}\n";
    a.configure(&peers, &hub_extra(&format!("{both}{b_only}")));
    a.start();
    b.start();
    c.start();
    d.start();

    // Pods to pods still work, and each spoke reaches NODE_IP at its view of 10.70.0.1.
    assert!(
        eventually(10, || b.ping("10.72.0.2")),
        "b -> a's pod\n{}",
        a.log()
    );
    assert!(
        eventually(10, || c.ping("10.82.0.2")),
        "c -> a's pod\n{}",
        a.log()
    );
    assert!(b.ping("10.73.0.1"), "b -> a's node\n{}", a.log());
    assert!(c.ping("10.83.0.1"), "c -> a's node\n{}", a.log());
    assert_eq!(
        tcp_seen_raw(&b.pod, &a.host, "10.73.0.1", 7401),
        "10.71.0.2",
        "a's node sees b's pod as a sees it"
    );
    assert_eq!(
        tcp_seen_raw(&c.pod, &a.host, "10.83.0.1", 7402),
        "10.81.0.2"
    );
    assert!(b.ping("10.73.0.2"), "b -> OTHER_IP, mapped for b");

    // Refused, each dropped and counted in the NAT chain: a mapping that does not list c, an
    // address mapped for no one, the address the hub's other local sources appear at (the first
    // of the spoke's view of the external CIDR: it is a source, never a destination).
    for (spoke, addr, why) in [
        (&c, "10.83.0.2", "OTHER_IP is not mapped for c"),
        (&b, "10.73.0.9", "nothing is mapped at 10.70.0.9"),
        (&c, "10.83.0.9", "nothing is mapped at 10.70.0.9"),
        (
            &b,
            "10.73.0.0",
            "the hub's other local sources as b sees them",
        ),
        (
            &c,
            "10.83.0.0",
            "the hub's other local sources as c sees them",
        ),
    ] {
        let before = dropped(&a, "prerouting");
        assert!(!spoke.ping(addr), "{} -> {addr}: {why}", spoke.name);
        assert!(
            dropped(&a, "prerouting") > before,
            "{} -> {addr} dropped in the NAT chain ({why})",
            spoke.name
        );
    }

    // The map holds an entry per range of each listed peer (b and c have one range each at the
    // hub: no external CIDR of theirs is configured here).
    let map = listed(&a, "map dnat_endpoint");
    for entry in [
        "0x0a470000 . 10.73.0.1 : 192.168.50.1/32",
        "0x0a470000 . 10.73.0.2 : 192.168.50.2/32",
        "0x0a510000 . 10.83.0.1 : 192.168.50.1/32",
    ] {
        assert!(map.contains(entry), "{entry} in\n{map}");
    }
    assert!(!map.contains("10.83.0.2"), "{map}");

    // The other way: the node opens connections to the spokes' pods. Unmapped, it appears at the
    // first address of each spoke's view of a's external CIDR; a mapped endpoint at its own
    // address there, for the spokes it is mapped for only.
    assert_eq!(
        tcp_seen_from(&a.host, None, &b.pod, "10.71.0.2", 7411),
        "10.73.0.0",
        "a's node, as b sees it\n{}",
        a.log()
    );
    assert_eq!(
        tcp_seen_from(&a.host, Some(NODE_IP), &b.pod, "10.71.0.2", 7412),
        "10.73.0.1"
    );
    assert_eq!(
        tcp_seen_from(&a.host, Some(NODE_IP), &c.pod, "10.81.0.2", 7413),
        "10.83.0.1"
    );
    assert_eq!(
        tcp_seen_from(&a.host, Some(OTHER_IP), &c.pod, "10.81.0.2", 7414),
        "10.83.0.0",
        "OTHER_IP is not mapped for c"
    );
    assert!(b.ping("10.72.0.2"), "pods still reach pods");

    // d has no view of the hub's external CIDR: pods reach pods both ways, but the hub's node
    // (not a pod, so no translation for d) must not leave with its real address: its new
    // connection is dropped and counted at the end of the NAT chain.
    assert!(
        eventually(10, || d.ping("10.92.0.2")),
        "d -> a's pod\n{}",
        a.log()
    );
    assert!(ping_from(&a.pod, "10.91.0.2"), "a's pod -> d's pod");
    assert_eq!(
        tcp_seen_raw(&a.pod, &d.pod, "10.91.0.2", 7415),
        "10.92.0.2",
        "a's pod as d sees it"
    );
    let before = dropped(&a, "postrouting");
    assert!(
        !ping_from(&a.host, "10.91.0.2"),
        "a's node -> d untranslated"
    );
    let after = dropped(&a, "postrouting");
    assert!(
        after > before,
        "a's node -> d dropped ({before} -> {after})"
    );
    // Mapped endpoints and pods still leave translated, with nothing more dropped.
    assert_eq!(
        tcp_seen_from(&a.host, Some(NODE_IP), &b.pod, "10.71.0.2", 7416),
        "10.73.0.1"
    );
    assert!(ping_from(&a.pod, "10.71.0.2"), "a's pod -> b's pod");
    assert_eq!(dropped(&a, "postrouting"), after, "nothing else dropped");

    // The hub's gateway namespace is not reachable from a peer.
    let before = dropped(&a, "prerouting");
    assert!(
        !ping_from(&d.pod, "169.254.100.2"),
        "d -> a's gateway namespace"
    );
    assert!(
        dropped(&a, "prerouting") > before,
        "d -> a's gateway namespace dropped"
    );

    // Dropping c from NODE_IP's mapping: c is refused now, b still reaches it.
    let b_first = "  - {ip: 192.168.50.1, externalIP: 10.70.0.1, peers: [b]}\n";
    reconfigure(&a, &peers, &format!("{b_first}{b_only}"));
    assert!(!c.ping("10.83.0.1"), "c was dropped from the mapping");
    assert!(b.ping("10.73.0.1"));
    assert!(!listed(&a, "map dnat_endpoint").contains("10.83.0.1"));

    // Removing OTHER_IP's mapping: its entry, set element and route go.
    reconfigure(&a, &peers, b_first);
    assert!(!b.ping("10.73.0.2"), "OTHER_IP is no longer mapped");
    assert!(!listed(&a, "set endpoint_ips").contains(OTHER_IP));

    // No mapping left: no element, no set entry, no route.
    reconfigure(&a, &peers, "");
    assert!(!b.ping("10.73.0.1"), "nothing is mapped any more");
    let map = listed(&a, "map dnat_endpoint");
    assert!(!map.contains("elements"), "no element left:\n{map}");
    let set = listed(&a, "set endpoint_ips");
    assert!(!set.contains("192.168."), "no address left:\n{set}");
    let hosts = listed(&a, "map snat_host");
    assert!(
        hosts.contains("10.73.0.0"),
        "b and c still see a's external CIDR:\n{hosts}"
    );
    let snat = listed(&a, "map snat_endpoint");
    assert!(!snat.contains("elements"), "no element left:\n{snat}");
    assert!(
        gateway_routes(&a).contains("default via 169.254.100.1"),
        "{}",
        gateway_routes(&a)
    );
    assert!(b.ping("10.72.0.2"), "pods unaffected\n{}", a.log());

    // A real endpoint address is refused, even mapped: b routes it into the tunnel (seeing the
    // hub's external CIDR as the endpoints' real range) and the hub drops it in the NAT chain.
    reconfigure(&a, &peers, b_first);
    assert!(b.ping("10.73.0.1"), "NODE_IP mapped for b again");
    let text = b.configure(
        &(a.as_peer(Some("198.18.0.1:51840"), "10.72.0.0/16", "10.71.0.0/16")
            + "    remoteExternalCIDR: 192.168.50.0/24\n"),
        "",
    );
    let want = digest(&text);
    b.wait_status("b routes the real range to a", |s| {
        s.reload.applied.as_ref().is_some_and(|x| x.digest == want)
    });
    let before = dropped(&a, "prerouting");
    assert!(!b.ping(NODE_IP), "b -> a's node at its real address");
    assert!(
        dropped(&a, "prerouting") > before,
        "b -> a's node at its real address dropped in the NAT chain"
    );
    assert!(b.ping("10.72.0.2"), "pods unaffected\n{}", a.log());
}
