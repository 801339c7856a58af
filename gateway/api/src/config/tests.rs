//! Validation of the gateway's configuration file: defaults, and every bad value named.

use super::*;

const KEY_A: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
const KEY_B: &str = "TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=";

fn good() -> String {
    format!(
        "localPodCIDR: 10.200.0.0/16\npeers:\n  - id: milan\n    publicKey: {KEY_A}\n    endpoint: 198.18.0.2:51840\n    remotePodCIDR: 10.71.0.0/16\n    remoteExternalCIDR: 10.72.0.0/16\n    localPodCIDRAtPeer: 10.50.0.0/16\n  - id: turin\n    publicKey: {KEY_B}\n    remotePodCIDR: 10.73.0.0/16\n    localPodCIDRAtPeer: 10.200.0.0/16\n"
    )
}

fn err(text: &str) -> ConfigError {
    File::parse(text)
        .and_then(|f| f.validate(None))
        .unwrap_err()
}

#[test]
fn a_good_file_resolves_defaults() {
    let c = File::parse(&good()).unwrap().validate(None).unwrap();
    assert_eq!(
        (c.listen_port, c.mtu, c.namespace.as_str()),
        (51840, 1420, "liqo-gateway")
    );
    assert_eq!(c.peers["milan"].keepalive, 10);
    assert_eq!(c.peers["milan"].allowed().len(), 2);
    assert_eq!(c.peers["turin"].endpoint, None);
    assert!(c.pin_when_idle, "on by default");
    let off = File::parse(&format!("pinWhenIdle: false\n{}", good()))
        .unwrap()
        .validate(None)
        .unwrap();
    assert!(!off.pin_when_idle);
    assert!(c.idle_class, "on by default");
    let normal = File::parse(&format!("idleClass: false\n{}", good()))
        .unwrap()
        .validate(None)
        .unwrap();
    assert!(!normal.idle_class);
    assert_eq!(
        (c.host_addr().to_string(), c.gateway_addr().to_string()),
        ("169.254.100.1/30".into(), "169.254.100.2/30".into())
    );
}

#[test]
fn every_bad_value_names_its_field() {
    let g = good();
    let cases = [
        (
            format!("busyPollMicros: 20000\n{g}"),
            "busyPollMicros",
            "more than 10 ms",
        ),
        (format!("pinWhenIdle: sometimes\n{g}"), "pinWhenIdle", ""),
        (format!("idleClass: 3\n{g}"), "idleClass", ""),
        (
            g.replace("10.71.0.0/16", "10.71.0.1/16"),
            "peers[0].remotePodCIDR",
            "host bits",
        ),
        (
            g.replace("10.73.0.0/16", "10.71.128.0/17"),
            "peers[1].remotePodCIDR",
            "overlaps peers[0].remotePodCIDR",
        ),
        (
            g.replace("10.73.0.0/16", "10.200.5.0/24"),
            "peers[1].remotePodCIDR",
            "overlaps localPodCIDR",
        ),
        (
            g.replace(KEY_B, KEY_A),
            "peers[1].publicKey",
            "same key as peer \"milan\"",
        ),
        (
            g.replace(KEY_B, "nope"),
            "peers[1].publicKey",
            "is not a WireGuard key",
        ),
        (
            g.replace("id: turin", "id: milan"),
            "peers[1].id",
            "duplicate peer",
        ),
        (
            g.replace("id: turin", "id: Turin_1"),
            "peers[1].id",
            "contains 'T'",
        ),
        (
            g.replace("198.18.0.2:51840", "198.18.0.2"),
            "peers[0].endpoint",
            "invalid socket address",
        ),
        (
            g.replace("10.50.0.0/16", "10.50.0.0/24"),
            "peers[0].localPodCIDRAtPeer",
            "must have the length",
        ),
        (format!("mtu: 100\n{g}"), "mtu", "outside"),
        (
            g.replace("10.71.0.0/16", "0.0.0.0/0"),
            "peers[0].remotePodCIDR",
            "/1 to /30",
        ),
        (
            g.replace("10.72.0.0/16", "10.72.0.1/32"),
            "peers[0].remoteExternalCIDR",
            "/1 to /30",
        ),
        (
            g.replace("10.72.0.0/16", "fd00::/64"),
            "peers[0].remoteExternalCIDR",
            "IPv6",
        ),
        (
            g.replace("localPodCIDR: 10.200.0.0/16", "localPodCIDR: 10.200.0.0/31"),
            "localPodCIDR",
            "/1 to /30",
        ),
        (format!("listenPort: 0\n{g}"), "listenPort", "1 to 65535"),
        (format!("linkCIDR: 169.254.0.0/29\n{g}"), "linkCIDR", "/30"),
        (format!("namespace: a/b\n{g}"), "namespace", "contains '/'"),
        (format!("bogus: 1\n{g}"), "bogus", "unknown field `bogus`"),
        // Bad input, not a listen: a peer's endpoint must be an address we can send to.
        (
            g.replace("198.18.0.2:51840", "0.0.0.0:51840"),
            "peers[0].endpoint",
            "not a unicast address",
        ),
        (
            g.replace("198.18.0.2:51840", "198.18.0.2:0"),
            "peers[0].endpoint",
            "port 0",
        ),
        (
            g.replace("localPodCIDR: 10.200.0.0/16\n", ""),
            "localPodCIDR",
            "is required",
        ),
    ];
    for (text, field, problem) in cases {
        let e = err(&text);
        assert_eq!(e.field, field, "{e}");
        assert!(e.problem.contains(problem), "{e}");
    }
}

#[test]
fn own_key_is_refused_as_a_peer() {
    let f = File::parse(&good()).unwrap();
    let own: PublicKey = KEY_A.parse().unwrap();
    assert_eq!(
        f.validate(Some(own)).unwrap_err().field,
        "peers[0].publicKey"
    );
}

#[test]
fn public_key_is_carried_and_round_trips() {
    let own = "2Ha1FSmcTkyj5uvrDjgyylsr6zGNfUcL0CEdrMyXBV4=";
    let f = File::parse(&format!("publicKey: {own}\n{}", good())).unwrap();
    let want: PublicKey = own.parse().unwrap();
    assert_eq!(f.public_key, Some(want));
    assert_eq!(f.validate(None).unwrap().public_key, Some(want));
    let text = serde_saphyr::to_string(&f).unwrap();
    assert!(text.contains(&format!("publicKey: {own}")), "{text}");
    assert_eq!(File::parse(&text).unwrap(), f);
    // Absent: None, and not written.
    let plain = File::parse(&good()).unwrap();
    assert_eq!(plain.public_key, None);
    assert_eq!(plain.validate(None).unwrap().public_key, None);
    let text = serde_saphyr::to_string(&plain).unwrap();
    assert!(
        !text.starts_with("publicKey") && !text.contains("\npublicKey"),
        "{text}"
    );
    assert_eq!(File::default().public_key, None);
}

#[test]
fn a_bad_public_key_is_named_by_its_field() {
    for bad in [
        "nope",
        "AAAA",
        "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8D==",
    ] {
        let e = err(&format!("publicKey: {bad}\n{}", good()));
        assert_eq!(e.field, "publicKey", "{bad}: {e}");
        assert!(e.problem.contains("not a WireGuard key"), "{e}");
    }
    // The key publicKey names is ours: a peer with it is refused (whatever key runs now).
    let e = err(&format!("publicKey: {KEY_B}\n{}", good()));
    assert_eq!(e.field, "peers[1].publicKey", "{e}");
    assert!(e.problem.contains("own public key"), "{e}");
}

/// `good()` with our external CIDR, milan's view of it, and three endpoint mappings.
fn mapped() -> String {
    good()
        .replace(
            "localPodCIDR: 10.200.0.0/16\n",
            "localPodCIDR: 10.200.0.0/16\nlocalExternalCIDR: 10.70.0.0/16\n",
        )
        .replace(
            "    localPodCIDRAtPeer: 10.50.0.0/16\n",
            "    localPodCIDRAtPeer: 10.50.0.0/16\n    localExternalCIDRAtPeer: 10.51.0.0/16\n",
        )
        + "endpoints:\n  - ip: 192.168.1.10\n    externalIP: 10.70.0.1\n    peers: [milan, turin]\n  - ip: 192.168.1.11\n    externalIP: 10.70.0.2\n    peers: [milan, zurich]\n  - ip: 10.96.0.1\n    externalIP: 10.70.0.3\n    peers: []\n"
}

#[test]
fn endpoint_mappings_are_read_and_may_name_peers_not_configured() {
    let c = File::parse(&mapped()).unwrap().validate(None).unwrap();
    assert_eq!(c.local_external_cidr.unwrap().to_string(), "10.70.0.0/16");
    assert_eq!(
        c.peers["milan"]
            .local_external_cidr_at_peer
            .unwrap()
            .to_string(),
        "10.51.0.0/16"
    );
    assert_eq!(c.peers["turin"].local_external_cidr_at_peer, None);
    assert_eq!(c.endpoints.len(), 3);
    assert_eq!(c.endpoints[1].ip.to_string(), "192.168.1.11");
    assert_eq!(c.endpoints[1].external_ip.to_string(), "10.70.0.2");
    let peers: Vec<&str> = c.endpoints[1].peers.iter().map(String::as_str).collect();
    assert_eq!(peers, ["milan", "zurich"], "zurich is not configured: kept");
    // The file reads back as written.
    let f = File::parse(&mapped()).unwrap();
    assert_eq!(
        File::parse(&serde_saphyr::to_string(&f).unwrap()).unwrap(),
        f
    );
}

#[test]
fn every_bad_endpoint_value_names_its_field() {
    let m = mapped();
    let cases = [
        (
            m.replace("externalIP: 10.70.0.3", "externalIP: 10.80.0.3"),
            "endpoints[2].externalIP",
            "10.80.0.3 not in localExternalCIDR 10.70.0.0/16",
        ),
        (
            m.replace("externalIP: 10.70.0.3", "externalIP: 10.70.0.1"),
            "endpoints[2].externalIP",
            "taken already by endpoints[0]",
        ),
        (
            m.replace("ip: 10.96.0.1", "ip: 192.168.1.10"),
            "endpoints[2].ip",
            "mapped already by endpoints[0]",
        ),
        (
            m.replace("ip: 10.96.0.1", "ip: 10.71.3.4"),
            "endpoints[2].ip",
            "is in peers[0].remotePodCIDR 10.71.0.0/16",
        ),
        (
            m.replace("ip: 10.96.0.1", "ip: 10.200.3.4"),
            "endpoints[2].ip",
            "is in localPodCIDR",
        ),
        (
            m.replace("ip: 10.96.0.1", "ip: 10.70.9.9"),
            "endpoints[2].ip",
            "is in localExternalCIDR",
        ),
        (
            m.replace("ip: 10.96.0.1", "ip: 127.0.0.1"),
            "endpoints[2].ip",
            "a loopback address",
        ),
        (
            m.replace("ip: 10.96.0.1", "ip: 169.254.3.4"),
            "endpoints[2].ip",
            "a link-local address",
        ),
        (
            m.replace("ip: 10.96.0.1", "ip: 240.1.2.3"),
            "endpoints[2].ip",
            "reserved",
        ),
        (
            m.replace("externalIP: 10.70.0.3", "externalIP: 10.70.0.0"),
            "endpoints[2].externalIP",
            "first or last address",
        ),
        (
            m.replace("externalIP: 10.70.0.3", "externalIP: 10.70.255.255"),
            "endpoints[2].externalIP",
            "first or last address",
        ),
        (
            m.replace("ip: 10.96.0.1", "ip: 10.96.0.1/32"),
            "endpoints[2].ip",
            "",
        ),
        (
            m.replace("[milan, zurich]", "[milan, Zurich]"),
            "endpoints[1].peers[1]",
            "",
        ),
        (
            m.replace("[milan, zurich]", "[milan, zurich, milan]"),
            "endpoints[1].peers[2]",
            "duplicate peer \"milan\"",
        ),
        (
            m.replace("localExternalCIDR: 10.70.0.0/16\n", ""),
            "peers[0].localExternalCIDRAtPeer",
            "localExternalCIDR is not",
        ),
        (
            m.replace(
                "localExternalCIDRAtPeer: 10.51.0.0/16",
                "localExternalCIDRAtPeer: 10.51.0.0/24",
            ),
            "peers[0].localExternalCIDRAtPeer",
            "must have the length of localExternalCIDR",
        ),
        (
            m.replace(
                "localExternalCIDRAtPeer: 10.51.0.0/16",
                "localExternalCIDRAtPeer: 10.50.0.0/16",
            ),
            "peers[0].localExternalCIDRAtPeer",
            "overlaps peers[0].localPodCIDRAtPeer",
        ),
        (
            m.replace(
                "localExternalCIDR: 10.70.0.0/16",
                "localExternalCIDR: 10.200.0.0/17",
            ),
            "localExternalCIDR",
            "overlaps localPodCIDR",
        ),
        (
            m.replace(
                "remoteExternalCIDR: 10.72.0.0/16",
                "remoteExternalCIDR: 10.70.0.0/16",
            ),
            "peers[0].remoteExternalCIDR",
            "overlaps localExternalCIDR",
        ),
    ];
    for (text, field, problem) in cases {
        let e = err(&text);
        assert_eq!(e.field, field, "{e}");
        assert!(e.problem.contains(problem), "{e}");
    }
    // Endpoints without our external CIDR (and no peer view of it) are inert, not refused: a
    // writer may learn them before the CIDR (say while its last peer goes).
    let text = m
        .replace("localExternalCIDR: 10.70.0.0/16\n", "")
        .replace("    localExternalCIDRAtPeer: 10.51.0.0/16\n", "");
    let c = File::parse(&text).unwrap().validate(None).unwrap();
    assert_eq!((c.endpoints.len(), c.local_external_cidr), (3, None));
    let e = err(&text.replace("ip: 10.96.0.1", "ip: 127.0.0.1"));
    assert_eq!(e.field, "endpoints[2].ip", "the rest is still checked: {e}");
}
