//! A key switch on a device (no threads, no root): one swap, every session anew, the old key
//! unreachable, and an initiation with the new key sent at once to peers with an endpoint.

use std::{
    net::UdpSocket,
    os::fd::OwnedFd,
    time::{Duration, SystemTime},
};

use super::*;
use crate::wg::peers::tests::{answers, peer, remote};

/// A device of one lane: a pipe stands in for the TUN queue (nothing is read from it here).
fn device(key: PrivateKey) -> Arc<Device> {
    let (tun, _writer): (OwnedFd, OwnedFd) = nix::unistd::pipe().unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    Device::new(key, vec![(tun, udp)], None).unwrap()
}

/// The next datagram on `sock` (a handshake message from the device).
fn next(sock: &UdpSocket) -> Vec<u8> {
    let mut buf = [0u8; 2048];
    let (n, _) = sock
        .recv_from(&mut buf)
        .expect("a datagram from the device");
    buf[..n].to_vec()
}

#[test]
fn set_key_switches_in_one_swap_and_calls_every_peer_with_the_new_key() {
    let (old, new) = (
        PrivateKey::generate().unwrap(),
        PrivateKey::generate().unwrap(),
    );
    let theirs = PrivateKey::generate().unwrap();
    let listener = UdpSocket::bind("127.0.0.1:0").unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let endpoint = listener.local_addr().unwrap().to_string();
    let peers: BTreeMap<String, config::Peer> = [
        peer("milan", theirs.public(), Some(&endpoint), 71),
        peer("turin", PrivateKey::generate().unwrap().public(), None, 72),
    ]
    .into_iter()
    .map(|p| (p.id.clone(), p))
    .collect();
    let d = device(old.clone());
    assert_eq!(d.public_key(), old.public());
    assert_eq!(d.key_rotations(), 0);
    d.set_peers(&peers);
    // A new peer with an endpoint is called at once, with the old key.
    let first = next(&listener);
    assert!(answers(&mut remote(&theirs, old.public(), 1), &first));
    let before = d.table();
    let weak = Arc::downgrade(&before.own);
    let peer_before = Arc::clone(&before.by_id["milan"]);
    assert!(d.current(&peer_before));
    drop(before);
    let t0 = SystemTime::now();

    assert_eq!(d.set_key(new.clone(), &peers), old.public());
    assert_eq!(d.public_key(), new.public());
    assert_eq!(d.key_rotations(), 1);
    assert!(d.key_since() >= t0);
    let t = d.table();
    assert_eq!(t.own.public, new.public());
    for p in t.by_id.values() {
        assert!(Arc::ptr_eq(p.tunn.identity(), &t.own), "{}", p.cfg.id);
        assert!(d.current(p));
    }
    // A thread that took the old table before the switch sends nothing of its sessions.
    assert!(!d.current(&peer_before));
    d.send(&peer_before, &first);
    // The peer with an endpoint is called again at once, with the new key: a peer that knows
    // the new key answers, one that still has the old one does not.
    let second = next(&listener);
    assert_ne!(second, first);
    assert!(answers(&mut remote(&theirs, new.public(), 2), &second));
    assert!(!answers(&mut remote(&theirs, old.public(), 3), &second));
    listener
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 2048];
    assert!(
        listener.recv_from(&mut buf).is_err(),
        "a stale session's message was sent"
    );
    // Nothing of the device holds the old key once the last stale reference is gone.
    drop(peer_before);
    assert!(weak.upgrade().is_none(), "the old key is still reachable");

    // The same peers again: no switch, the sessions kept.
    let session = Arc::clone(&t.by_id["milan"].tunn);
    d.set_peers(&peers);
    assert!(Arc::ptr_eq(&d.table().by_id["milan"].tunn, &session));
    assert_eq!((d.public_key(), d.key_rotations()), (new.public(), 1));
    // The key and its count come from one read: the running identity carries both.
    let own = d.identity();
    assert_eq!((own.public(), own.rotations()), (new.public(), 1));
    // A second switch counts 2; peers alone changing keep the key and its count.
    let third = PrivateKey::generate().unwrap();
    assert_eq!(d.set_key(third.clone(), &peers), new.public());
    d.set_peers(&peers);
    let own = d.identity();
    assert_eq!((own.public(), own.rotations()), (third.public(), 2));
}
