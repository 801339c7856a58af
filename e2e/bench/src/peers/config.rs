//! gwA's configuration with N peers: the real one (gwB, as [`super::super::keys`] wrote it) and
//! N-1 stand-ins, each with its own /24 from [`STAND_IN_RANGE`], its own public key and no
//! endpoint (a hub's peers that have not called yet). Pure and deterministic: the same N gives
//! the same text, so a rewritten file differs only by the peers added or removed.

use std::net::Ipv4Addr;

use base64::{Engine as _, engine::general_purpose::STANDARD};
use gateway::{
    config::{File as GatewayFile, PeerFile},
    keys::PrivateKey,
};
use ipnet::Ipv4Net;
use liqo_types::{Cidr, PublicKey};

/// Where the stand-ins' ranges come from: nothing in the bed (10.201.0.0/16, the gateway's
/// 169.254.100.0/30) is in it.
pub const STAND_IN_RANGE: &str = "172.16.0.0/12";
/// The most peers a run may ask for: the /24s of [`STAND_IN_RANGE`] (4,096) less the one
/// peer added on top of the largest count.
pub const MAX_PEERS: u32 = 4000;

/// The `i`-th stand-in's range: the `i`-th /24 of [`STAND_IN_RANGE`].
pub(crate) fn stand_in_range(i: u32) -> Cidr {
    let base: Ipv4Net = STAND_IN_RANGE.parse().expect("a valid constant");
    let addr = u32::from(base.network()) + (i << 8);
    let net = Ipv4Net::new(Ipv4Addr::from(addr), 24).expect("24 is a valid length");
    assert!(
        base.contains(&net),
        "stand-in {i} is outside {STAND_IN_RANGE}"
    );
    Cidr::new(net).expect("a /24 at a multiple of 256 has no host bits")
}

/// The `i`-th stand-in's public key: that of a private key made from `i`, so every stand-in
/// has its own (and a real curve point, as a peer's key is).
pub(crate) fn stand_in_key(i: u32) -> PublicKey {
    let mut seed = [0x5a_u8; 32];
    seed[..16].copy_from_slice(b"liqo-bench-peers");
    seed[16..20].copy_from_slice(&i.to_le_bytes());
    PrivateKey::parse(&STANDARD.encode(seed))
        .expect("32 bytes in base64 are a private key")
        .public()
}

/// The `i`-th stand-in (from 0): `bench-peer-0000`, its range, its key, no endpoint; our pods
/// appear to it as they are (`local`).
pub(crate) fn stand_in(i: u32, local: Cidr) -> PeerFile {
    PeerFile {
        id: format!("bench-peer-{i:04}")
            .parse()
            .expect("a valid cluster ID"),
        public_key: stand_in_key(i),
        endpoint: None,
        keepalive: None,
        remote_pod_cidr: stand_in_range(i),
        remote_external_cidr: None,
        local_pod_cidr_at_peer: local,
        local_external_cidr_at_peer: None,
    }
}

/// `base` (gwA's configuration with its one real peer) with `n` peers in all: the real one
/// first, then stand-ins 0 to n-2. `n` is at least 1.
pub(crate) fn with_peers(base: &GatewayFile, n: u32) -> GatewayFile {
    let real = base
        .peers
        .first()
        .expect("the bench's gateway configuration has its real peer");
    let local = base
        .local_pod_cidr
        .expect("the bench's gateway configuration has its pod CIDR");
    let mut f = base.clone();
    f.peers = std::iter::once(real.clone())
        .chain((0..n.saturating_sub(1)).map(|i| stand_in(i, local)))
        .collect();
    f
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// gwA's file as the bench's keys write it (the real peer is gwB).
    fn base() -> GatewayFile {
        let cidr = |s: &str| s.parse::<Cidr>().unwrap();
        GatewayFile {
            namespace: Some("lq-bench-gwA-ns".into()),
            listen_port: Some(51840),
            private_key_file: Some("/run/liqo-lab/bench-lq/keyA".into()),
            mtu: Some(1420),
            local_pod_cidr: Some(cidr("10.201.1.0/24")),
            peers: vec![PeerFile {
                id: "side-b".parse().unwrap(),
                public_key: PrivateKey::generate().unwrap().public(),
                endpoint: Some("10.201.0.2:51840".parse().unwrap()),
                keepalive: None,
                remote_pod_cidr: cidr("10.201.2.0/24"),
                remote_external_cidr: None,
                local_pod_cidr_at_peer: cidr("10.201.1.0/24"),
                local_external_cidr_at_peer: None,
            }],
            ..GatewayFile::default()
        }
    }

    #[test]
    fn ranges_are_consecutive_24s_inside_the_stand_in_range() {
        assert_eq!(stand_in_range(0).to_string(), "172.16.0.0/24");
        assert_eq!(stand_in_range(1).to_string(), "172.16.1.0/24");
        assert_eq!(stand_in_range(256).to_string(), "172.17.0.0/24");
        assert_eq!(stand_in_range(MAX_PEERS).to_string(), "172.31.160.0/24");
        assert_eq!(stand_in_range(4095).to_string(), "172.31.255.0/24");
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn a_range_beyond_the_stand_in_range_is_a_bug() {
        stand_in_range(4096);
    }

    #[test]
    fn n_peers_the_real_one_first_then_distinct_endpointless_stand_ins() {
        let b = base();
        let f = with_peers(&b, 1001);
        assert_eq!(f.peers.len(), 1001);
        assert_eq!(
            f.peers[0], b.peers[0],
            "the real peer stays first, untouched"
        );
        let stand_ins = &f.peers[1..];
        assert!(stand_ins.iter().all(|p| p.endpoint.is_none()));
        let ids: BTreeSet<String> = f.peers.iter().map(|p| p.id.to_string()).collect();
        let keys: BTreeSet<PublicKey> = f.peers.iter().map(|p| p.public_key).collect();
        let ranges: BTreeSet<Cidr> = f.peers.iter().map(|p| p.remote_pod_cidr).collect();
        assert_eq!((ids.len(), keys.len(), ranges.len()), (1001, 1001, 1001));
        assert_eq!(stand_ins[999].id.to_string(), "bench-peer-0999");
        // Everything else is gwA's own.
        assert_eq!(
            GatewayFile {
                peers: b.peers.clone(),
                ..f.clone()
            },
            b
        );
        assert_eq!(with_peers(&b, 1).peers, b.peers);
    }

    #[test]
    fn the_same_count_gives_the_same_text_and_one_more_adds_one_peer() {
        let b = base();
        let text = |n| serde_saphyr::to_string(&with_peers(&b, n)).unwrap();
        assert_eq!(text(100), text(100));
        let (at, plus) = (with_peers(&b, 100), with_peers(&b, 101));
        assert_eq!(plus.peers[..100], at.peers[..]);
        assert_eq!(stand_in_key(7), stand_in_key(7));
        assert_ne!(stand_in_key(7), stand_in_key(8));
    }

    #[test]
    fn the_gateway_accepts_the_largest_configuration() {
        let b = base();
        let f = with_peers(&b, MAX_PEERS + 1);
        // Through the text, as the gateway reads it.
        let text = serde_saphyr::to_string(&f).unwrap();
        let cfg = GatewayFile::parse(&text)
            .and_then(|f| f.validate(Some(PrivateKey::generate().unwrap().public())))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.peers.len(), (MAX_PEERS + 1) as usize);
        assert_eq!(
            cfg.peers["bench-peer-0000"].remote_pod_cidr.to_string(),
            "172.16.0.0/24"
        );
    }
}
