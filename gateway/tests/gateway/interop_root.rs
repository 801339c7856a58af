//! Interoperability (needs root, `wireguard-go` and `wg`): our gateway and an independent
//! WireGuard implementation, wireguard-go configured with `wg`, exchange traffic both ways.

use crate::common;

use std::{
    net::{Ipv4Addr, SocketAddrV4},
    os::fd::AsRawFd,
    time::Duration,
};

use common::{Site, Spaces, eventually, prefix, wggo::WgGo};
use dataplane::{Netlink, route::RouteSpec, supervisor::Spec};

/// Sends, from a raw socket in `ns` bound to `src`, a TCP segment to `dst` with SYN and FIN
/// set: no connection has one, so conntrack calls it invalid (and no NAT chain sees it).
fn send_syn_fin(ns: &dataplane::Netns, src: Ipv4Addr, dst: Ipv4Addr) {
    use nix::sys::socket::{
        AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType, SockaddrIn, bind, sendto, socket,
    };
    let mut seg = [0u8; 20];
    seg[0..2].copy_from_slice(&40_000u16.to_be_bytes());
    seg[2..4].copy_from_slice(&7u16.to_be_bytes());
    seg[4..8].copy_from_slice(&1u32.to_be_bytes());
    seg[12] = 5 << 4; // header length: five words
    seg[13] = 0x03; // SYN | FIN
    seg[14..16].copy_from_slice(&1024u16.to_be_bytes());
    // The checksum over the pseudo-header (addresses, protocol 6, length 20) and the segment.
    let mut words: Vec<u16> = Vec::new();
    for b in [src.octets(), dst.octets()] {
        words.push(u16::from_be_bytes([b[0], b[1]]));
        words.push(u16::from_be_bytes([b[2], b[3]]));
    }
    words.extend([6, 20]);
    words.extend(seg.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]])));
    let mut sum: u32 = words.iter().map(|&w| u32::from(w)).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    seg[16..18].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    ns.run(move || {
        let fd = socket(
            AddressFamily::Inet,
            SockType::Raw,
            SockFlag::empty(),
            SockProtocol::Tcp,
        )
        .expect("a raw TCP socket");
        bind(fd.as_raw_fd(), &SockaddrIn::from(SocketAddrV4::new(src, 0))).expect("bind");
        let to = SockaddrIn::from(SocketAddrV4::new(dst, 0));
        sendto(fd.as_raw_fd(), &seg, &to, MsgFlags::empty()).expect("sendto");
    })
    .expect("running in the namespace");
}

#[tokio::test]
async fn our_gateway_and_wireguard_go_exchange_traffic_both_ways() {
    let p = prefix("x");
    let mut spaces = Spaces::new();
    let wan = common::wan(&mut spaces, &p).await;
    let mut ours = Site::new(&mut spaces, &p, "ours", &wan, "198.18.0.1/24").await;

    // The other side: a host running wireguard-go, with a pod 10.90.0.2 behind it.
    let mut go = WgGo::start(&mut spaces, &p, &wan, &ours.dir).await;
    go.add_peer(&ours.key);
    let (host, pod, ifname, wggo_pub) = (&go.host, &go.pod, go.ifname.clone(), go.public.clone());
    let wg = |args: &[&str]| {
        go.wg(args);
    };
    let nl = Netlink::connect_in(host).unwrap();

    // Our side: wireguard-go's pods are not remapped, and it sees ours (10.200.0.0/16) at
    // 10.77.0.0/16: our NAT works against its packets.
    let peer = format!(
        "  - id: wggo\n    publicKey: {wggo_pub}\n    endpoint: 198.18.0.2:51840\n    remotePodCIDR: 10.90.0.0/24\n    localPodCIDRAtPeer: 10.77.0.0/16\n"
    );
    ours.configure(&peer, "");
    ours.start();

    assert!(
        eventually(10, || ours.ping("10.90.0.2")),
        "ours -> wireguard-go\n{}",
        ours.log()
    );
    let back = pod
        .command("ping")
        .args(["-c1", "-W2", "-q", "10.77.0.2"])
        .output()
        .unwrap();
    assert!(back.status.success(), "wireguard-go -> ours");
    // TCP both ways, and a bulk transfer that exercises our offloads against its batching.
    let seen = common::tcp_seen_raw(pod, &ours.pod, "10.77.0.2", 7201);
    assert_eq!(seen, "10.90.0.2");
    let seen = common::tcp_seen_raw(&ours.pod, pod, "10.90.0.2", 7202);
    assert_eq!(seen, "10.77.0.2");
    let mut server = Spec::new("iperf3", "iperf3", ours.dir.join("iperf3.log"))
        .args(["-s", "-1", "-B", "10.90.0.2"])
        .netns(pod)
        .kill_on_drop()
        .attached()
        .expect("starting iperf3 -s");
    std::thread::sleep(Duration::from_millis(300));
    let out = ours
        .pod
        .command("iperf3")
        .args(["-c", "10.90.0.2", "-t", "2", "-J"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        bps > 10e6,
        "bulk TCP through both implementations: {bps} bit/s"
    );
    eprintln!("ours -> wireguard-go: {:.0} Mbit/s", bps / 1e6);
    // The server exits after its one test; the client's figure above is what is checked.
    server
        .wait_exit(Duration::from_secs(10))
        .expect("waiting for iperf3 -s");
    let status = String::from_utf8(
        host.command("wg")
            .args(["show", &ifname, "latest-handshakes"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        status.contains(&ours.key),
        "wireguard-go has a handshake with us: {status}"
    );

    // A misbehaving peer sends into the tunnel towards our host side, and to our pods' real
    // addresses (it sees them at 10.77.0.0/16): the gateway drops both, and our pod still
    // answers at the address the peer sees.
    wg(&[
        "set",
        &ifname,
        "peer",
        &ours.key,
        "allowed-ips",
        "10.77.0.0/16,169.254.100.0/30,10.200.0.0/16",
    ]);
    for to in ["169.254.100.0/30", "10.200.0.0/16"] {
        nl.add_route(&RouteSpec {
            dev: Some(ifname.parse().unwrap()),
            ..RouteSpec::to(to.parse().unwrap())
        })
        .await
        .unwrap();
    }
    let ping_from_host = |to: &str| {
        host.command("ping")
            .args(["-c2", "-W1", "-q", "-I", "10.90.0.1", to])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(
        !ping_from_host("169.254.100.1"),
        "a peer reached our host through the tunnel"
    );
    assert!(
        !ping_from_host("10.200.0.2"),
        "a peer reached our pod at its real address, past the remap"
    );
    assert!(
        ping_from_host("10.77.0.2"),
        "our pod at the address the peer sees"
    );
    let gw_ns = dataplane::Netns::open(&ours.gw_ns.parse().unwrap()).unwrap();
    let chain = String::from_utf8(
        gw_ns
            .command("nft")
            .args(["list", "chain", "ip", "liqo_gateway", "prerouting"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    // Two echo requests to each refused address; each is a new connection (the first was
    // dropped before conntrack kept it).
    assert!(
        chain.contains("iifname \"liqo.tunnel\" counter packets 4 bytes"),
        "{chain}"
    );
    // Segments conntrack cannot place skip the NAT chains: sent to our pod's real address,
    // they would be routed to it, and the filter drops them.
    for _ in 0..2 {
        send_syn_fin(
            host,
            "10.90.0.1".parse().unwrap(),
            "10.200.0.2".parse().unwrap(),
        );
    }
    let from_peers = || {
        String::from_utf8(
            gw_ns
                .command("nft")
                .args(["list", "chain", "ip", "liqo_gateway", "from_peers"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
    };
    assert!(
        eventually(5, || from_peers().contains(
            "iifname \"liqo.tunnel\" ct state invalid counter packets 2 bytes"
        )),
        "{}",
        from_peers()
    );
    go.child.kill().expect("stopping wireguard-go");
}
