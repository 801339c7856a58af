//! The peer table: receiver indices, and sessions kept or made anew as peers and our key change.

use std::net::SocketAddr;

use super::*;
use crate::keys::PrivateKey;

#[test]
fn new_indices_are_random_24_bit_unique_and_avoid_those_in_use() {
    let taken: Vec<u32> = (1..=3000).collect();
    let mut ix = Indices::new(taken.iter().copied());
    let got: Vec<u32> = (0..5000).map(|_| ix.next(5000)).collect();
    let unique: HashSet<u32> = got.iter().copied().collect();
    assert_eq!(unique.len(), got.len(), "an index given twice");
    assert!(got.iter().all(|i| *i != 0 && *i <= 0x00ff_ffff));
    assert!(
        got.iter().all(|i| !taken.contains(i)),
        "an index in use given"
    );
    // Not a counter: consecutive indices are not neighbours.
    let neighbours = got.windows(2).filter(|w| w[1] == w[0] + 1).count();
    assert!(neighbours < 10, "{neighbours} consecutive pairs");
}

/// A peer with the key `key`, its pods at `10.<n>.0.0/16`.
pub(in crate::wg) fn peer(id: &str, key: PublicKey, endpoint: Option<&str>, n: u8) -> config::Peer {
    config::Peer {
        id: id.into(),
        public_key: key,
        endpoint: endpoint.map(|e| e.parse().unwrap()),
        keepalive: 0,
        remote_pod_cidr: format!("10.{n}.0.0/16").parse().unwrap(),
        remote_external_cidr: None,
        local_pod_cidr_at_peer: "10.50.0.0/16".parse().unwrap(),
        local_external_cidr_at_peer: None,
    }
}

/// The peer side of a session with us, expecting our public key `ours`.
pub(in crate::wg) fn remote(secret: &PrivateKey, ours: PublicKey, index: u32) -> Tunn {
    Tunn::new(
        secret.secret(),
        crate::keys::x25519(&ours),
        None,
        None,
        index,
        None,
    )
}

/// Whether `remote` answers the handshake initiation `init` with a response.
pub(in crate::wg) fn answers(remote: &mut Tunn, init: &[u8]) -> bool {
    let mut out = vec![0u8; 2048];
    matches!(
        remote.decapsulate(None, init, &mut out),
        boringtun::noise::TunnResult::WriteToNetwork(p) if p.first() == Some(&2)
    )
}

fn initiation(session: &Session) -> Vec<u8> {
    let mut out = vec![0u8; 256];
    match session.lock().format_handshake_initiation(&mut out, false) {
        boringtun::noise::TunnResult::WriteToNetwork(p) => p.to_vec(),
        _ => panic!("no initiation"),
    }
}

#[test]
fn a_new_key_makes_every_session_anew_and_the_same_key_keeps_them() {
    let (old, new) = (
        Identity::new(PrivateKey::generate().unwrap()),
        Identity::new(PrivateKey::generate().unwrap()),
    );
    let secrets: Vec<PrivateKey> = (0..3).map(|_| PrivateKey::generate().unwrap()).collect();
    let peers: BTreeMap<String, config::Peer> = [
        peer("milan", secrets[0].public(), Some("198.18.0.2:51840"), 71),
        peer("turin", secrets[1].public(), None, 72),
        peer("zurich", secrets[2].public(), None, 73),
    ]
    .into_iter()
    .map(|p| (p.id.clone(), p))
    .collect();
    let t0 = Table::build(&Table::empty(Arc::clone(&old)), &peers, &old);
    for p in t0.by_id.values() {
        p.tunn.get();
        p.stats
            .rx_packets
            .store(5, std::sync::atomic::Ordering::Relaxed);
    }
    let learned: SocketAddr = "198.18.0.3:4000".parse().unwrap();
    t0.by_id["turin"].saw(learned);

    // The same key: every session kept.
    let same = Table::build(&t0, &peers, &old);
    for (id, p) in &same.by_id {
        assert!(Arc::ptr_eq(p, &t0.by_id[id]), "{id} replaced");
    }

    // Another key: every session made anew with it, under a fresh index.
    let t1 = Table::build(&t0, &peers, &new);
    assert!(Arc::ptr_eq(&t1.own, &new));
    assert_eq!(t1.by_id.len(), 3);
    for (i, (id, p)) in t1.by_id.iter().enumerate() {
        let before = &t0.by_id[id];
        assert!(!Arc::ptr_eq(&p.tunn, &before.tunn), "{id} kept its session");
        assert!(
            p.tunn.started().is_none(),
            "{id}: a session made before it is used"
        );
        assert!(
            Arc::ptr_eq(p.tunn.identity(), &new),
            "{id} not on the new key"
        );
        assert!(
            !t0.by_index.contains_key(&p.index),
            "{id} took an index in use"
        );
        assert!(
            t1.by_receiver(before.index << 8).is_none(),
            "{id}'s old index still names it"
        );
        assert!(Arc::ptr_eq(t1.by_receiver(p.index << 8).unwrap(), p));
        assert!(Arc::ptr_eq(t1.by_key(&p.cfg.public_key.0).unwrap(), p));
        assert!(
            Arc::ptr_eq(&p.stats, &before.stats),
            "{id}'s counters reset"
        );
        assert!(!p.expired.load(std::sync::atomic::Ordering::Relaxed));
        // The new session speaks with the new key only: a peer that knows it answers the
        // initiation, a peer that still has the old public key does not.
        let init = initiation(&p.tunn);
        let index = 1000 + i as u32;
        assert!(
            answers(&mut remote(&secrets[i], new.public(), index), &init),
            "{id}"
        );
        assert!(
            !answers(&mut remote(&secrets[i], old.public(), index), &init),
            "{id}"
        );
    }
    assert_eq!(
        t1.by_id["milan"].endpoint(),
        Some("198.18.0.2:51840".parse().unwrap())
    );
    assert_eq!(
        t1.by_id["turin"].endpoint(),
        Some(learned),
        "the learned endpoint stays"
    );
    assert_eq!(t1.by_id["zurich"].endpoint(), None);
    assert_eq!(
        t1.route("10.72.1.1".parse().unwrap()).unwrap().cfg.id,
        "turin"
    );

    // Nothing of the new table holds the old key: dropping the old table frees it.
    let weak = Arc::downgrade(&old);
    drop((t0, same, old));
    assert!(weak.upgrade().is_none(), "the old key is still reachable");
}

#[test]
fn an_initiation_made_with_our_old_key_is_not_answered_by_a_new_session() {
    let (old, new) = (
        PrivateKey::generate().unwrap(),
        PrivateKey::generate().unwrap(),
    );
    let theirs = PrivateKey::generate().unwrap();
    let peers: BTreeMap<String, config::Peer> =
        [("milan".to_owned(), peer("milan", theirs.public(), None, 71))].into();
    let own = Identity::new(new.clone());
    let t = Table::build(&Table::empty(Arc::clone(&own)), &peers, &own);
    let mut out = vec![0u8; 2048];
    // The peer still has our old public key: its initiation's mac1 is keyed by it.
    let mut stale = remote(&theirs, old.public(), 7);
    let init = match stale.format_handshake_initiation(&mut out, false) {
        boringtun::noise::TunnResult::WriteToNetwork(p) => p.to_vec(),
        _ => panic!("no initiation"),
    };
    let mut reply = [0u8; 64];
    assert!(
        own.open.verify_packet(None, &init, &mut reply).is_err(),
        "mac1 of the old key admitted"
    );
    let session = &t.by_id["milan"].tunn;
    assert!(!answers(&mut session.lock(), &init));
    // Once it has the new one, it is answered.
    let mut fresh = remote(&theirs, new.public(), 8);
    let init = match fresh.format_handshake_initiation(&mut out, false) {
        boringtun::noise::TunnResult::WriteToNetwork(p) => p.to_vec(),
        _ => panic!("no initiation"),
    };
    assert!(own.open.verify_packet(None, &init, &mut reply).is_ok());
    assert!(answers(&mut session.lock(), &init));
}
