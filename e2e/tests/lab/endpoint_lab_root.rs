//! Endpoint mapping in the lab (needs root): milan exposes one of its NODE addresses to rome with
//! its IPAM (`MapIp`, direction `ENDPOINT`); a rome pod reaches it through milan's external CIDR
//! as rome sees it (ICMP and TCP, the node seeing the pod in milan's view of rome), an address
//! mapped for no one is refused, and unmapping removes every trace from milan's gateway.
//!
//! The first test reaches the node running milan's gateway; the second a node that does not run
//! it: the gateway node sends it the translated packets over the overlay (its agent routes every
//! other node's address, like its pod CIDR, via that node's overlay address in table 18952), so
//! they arrive where the node's strict reverse-path filter expects packets from remote ranges,
//! and its replies come back the same way.

use crate::common;

use std::{
    io::{Read, Write},
    net::{Ipv4Addr, TcpListener, TcpStream},
    time::Duration,
};

use common::LabGuard;
use dataplane::Netns;
use e2e::{
    lab::{self, gateway},
    topology::Topology,
};

/// Whether one ping from `ns` to `ip` is answered (the exit code says).
fn pings(ns: &Netns, ip: Ipv4Addr) -> bool {
    ns.command("ping")
        .args(["-c1", "-W2", "-q", &ip.to_string()])
        .output()
        .unwrap()
        .status
        .success()
}

/// Serves one TCP connection in `server` on `port`; dials `addr:port` from `client`; returns the
/// client address the server saw.
fn tcp_seen(client: &Netns, server: &Netns, addr: Ipv4Addr, port: u16) -> Result<String, String> {
    let listener = server
        .run(move || TcpListener::bind(("0.0.0.0", port)))
        .unwrap()
        .unwrap();
    let serve = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().unwrap();
        s.write_all(peer.ip().to_string().as_bytes()).unwrap();
    });
    let mut c = client
        .run(move || TcpStream::connect_timeout(&(addr, port).into(), Duration::from_secs(5)))
        .unwrap()
        .map_err(|e| format!("connecting to {addr}:{port}: {e}"))?;
    let mut seen = String::new();
    c.read_to_string(&mut seen).unwrap();
    serve.join().unwrap();
    Ok(seen)
}

/// Like [`tcp_seen`], the client bound to `source` (a node address).
fn tcp_seen_from_node(
    client: &Netns,
    source: Ipv4Addr,
    server: &Netns,
    addr: Ipv4Addr,
    port: u16,
) -> Result<String, String> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, socket};
    use std::os::fd::{AsRawFd, OwnedFd};
    let listener = server
        .run(move || TcpListener::bind(("0.0.0.0", port)))
        .unwrap()
        .unwrap();
    let serve = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().unwrap();
        s.write_all(peer.ip().to_string().as_bytes()).unwrap();
    });
    let (from, to) = (
        std::net::SocketAddrV4::new(source, 0),
        std::net::SocketAddrV4::new(addr, port),
    );
    let mut c = client
        .run(move || -> nix::Result<TcpStream> {
            let fd: OwnedFd = socket(
                AddressFamily::Inet,
                SockType::Stream,
                SockFlag::SOCK_CLOEXEC,
                None,
            )?;
            bind(fd.as_raw_fd(), &SockaddrIn::from(from))?;
            connect(fd.as_raw_fd(), &SockaddrIn::from(to))?;
            Ok(TcpStream::from(fd))
        })
        .unwrap()
        .map_err(|e| format!("connecting to {to} from {from}: {e}"))?;
    let mut seen = String::new();
    c.read_to_string(&mut seen).unwrap();
    serve.join().unwrap();
    Ok(seen)
}

/// `nft list <what>` in milan's gateway namespace.
fn milan_nft(prefix: &lab::Prefix, what: &[&str]) -> String {
    let ns = Netns::open(&format!("{prefix}-milan-gw").parse().unwrap()).unwrap();
    let out = ns.command("nft").arg("list").args(what).output().unwrap();
    assert!(out.status.success(), "nft list {what:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn a_rome_pod_reaches_a_milan_node_through_milans_external_cidr() {
    let g = LabGuard::new('d');
    let lab = lab::up(g.0.clone(), Topology::preset("two-clusters").unwrap())
        .await
        .unwrap();
    let (_, at_milan) = lab::peer(&lab, "rome", "milan").unwrap();
    let milan = lab.topology.cluster("milan").unwrap().clone();
    let gw_node = lab::gateway_node(&lab, &milan).unwrap();
    let node = milan
        .nodes
        .iter()
        .find(|n| n.name == gw_node.as_str())
        .unwrap();
    let node_ip = node.lan_addr.addr();
    let node_ns = lab
        .netns(&format!("milan/{gw_node}").parse().unwrap())
        .unwrap();
    // A pod on rome's second node: its packets cross rome's overlay to rome's gateway first.
    let pod = lab.netns(&"rome/n1-p0".parse().unwrap()).unwrap();

    let seen = gateway::map_endpoint(&lab, "milan", "rome", node_ip).unwrap();
    assert!(
        at_milan.local_external_at_peer.contains(&seen),
        "{seen} is in rome's view of milan's external CIDR {}",
        at_milan.local_external_at_peer
    );
    assert!(
        pings(&pod, seen),
        "rome pod -> milan node {node_ip} at {seen}"
    );
    let client = tcp_seen(&pod, &node_ns, seen, 7501).unwrap();
    let client: Ipv4Addr = client.parse().unwrap();
    assert!(
        at_milan.remote_pods.contains(&client),
        "the node sees the pod ({client}) in milan's view of rome's pods {}",
        at_milan.remote_pods
    );
    let map = milan_nft(&g.0, &["map", "ip", "liqo_gateway", "dnat_endpoint"]);
    assert!(map.contains(&format!(" : {node_ip}/32")), "{map}");

    // The other way: the node opens a connection to a rome pod (at milan's view of it). Mapped
    // for rome, it appears at its own address there; the node running the gateway sees rome's
    // pods through milan's host table.
    let rome = lab.topology.cluster("rome").unwrap();
    let rome_pod = rome.nodes[1].pods[0].addr.addr();
    let rome_pods = liqo_types::Cidr::new(rome.pod_cidr).unwrap();
    let at_view = rome_pods.translate(rome_pod, &at_milan.remote_pods);
    assert_eq!(
        tcp_seen_from_node(&node_ns, node_ip, &pod, at_view, 7504).unwrap(),
        seen.to_string(),
        "rome's pod sees milan's node at its mapped address"
    );

    // An address of milan's external CIDR mapped for no one is refused.
    let unmapped = Ipv4Addr::from(u32::from(seen) + 100);
    assert!(!pings(&pod, unmapped), "{unmapped} is mapped for no one");
    assert!(tcp_seen(&pod, &node_ns, unmapped, 7502).is_err());

    // Unmapped: refused, and nothing is left in milan's gateway.
    gateway::unmap_endpoint(&lab, "milan", "rome", node_ip).unwrap();
    assert!(!pings(&pod, seen), "no longer mapped");
    let map = milan_nft(&g.0, &["map", "ip", "liqo_gateway", "dnat_endpoint"]);
    assert!(!map.contains("elements"), "no element left:\n{map}");
    let set = milan_nft(&g.0, &["set", "ip", "liqo_gateway", "endpoint_ips"]);
    assert!(!set.contains(&node_ip.to_string()), "{set}");
    let gw_ns = Netns::open(&format!("{}-milan-gw", g.0).parse().unwrap()).unwrap();
    let routes = gw_ns
        .command("ip")
        .args(["route", "show", "table", "18952"])
        .output()
        .unwrap();
    assert!(routes.status.success());
    assert!(
        !String::from_utf8_lossy(&routes.stdout).contains(&node_ip.to_string()),
        "{routes:?}"
    );
    // Mapping an address of a pod is not an endpoint mapping: refused, naming it.
    let pod_ip = milan.nodes[0].pods[0].addr.addr();
    let e = format!(
        "{:#}",
        anyhow::Error::from(gateway::map_endpoint(&lab, "milan", "rome", pod_ip).unwrap_err())
    );
    assert!(
        e.contains(&pod_ip.to_string()) && e.contains("not an endpoint"),
        "{e}"
    );

    lab::unpeer(&lab, "rome", "milan").unwrap();
    lab::down(&g.0).unwrap();
}

#[tokio::test]
async fn a_rome_pod_reaches_a_milan_node_that_does_not_run_the_gateway() {
    let g = LabGuard::new('d');
    let lab = lab::up(g.0.clone(), Topology::preset("two-clusters").unwrap())
        .await
        .unwrap();
    let (_, at_milan) = lab::peer(&lab, "rome", "milan").unwrap();
    let milan = lab.topology.cluster("milan").unwrap().clone();
    let gw_node = lab::gateway_node(&lab, &milan).unwrap();
    let node = milan
        .nodes
        .iter()
        .find(|n| n.name != gw_node.as_str())
        .unwrap();
    let node_ip = node.lan_addr.addr();
    let node_ns = lab
        .netns(&format!("milan/{}", node.name).parse().unwrap())
        .unwrap();
    let pod = lab.netns(&"rome/n1-p0".parse().unwrap()).unwrap();
    let seen = gateway::map_endpoint(&lab, "milan", "rome", node_ip).unwrap();
    assert!(
        pings(&pod, seen),
        "rome pod -> milan node {node_ip} at {seen}"
    );
    let client: Ipv4Addr = tcp_seen(&pod, &node_ns, seen, 7503)
        .unwrap()
        .parse()
        .unwrap();
    assert!(at_milan.remote_pods.contains(&client), "{client}");
    gateway::unmap_endpoint(&lab, "milan", "rome", node_ip).unwrap();
    assert!(!pings(&pod, seen), "no longer mapped");
    lab::unpeer(&lab, "rome", "milan").unwrap();
    lab::down(&g.0).unwrap();
}
