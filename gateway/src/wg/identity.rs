//! Our side of every session: the static private key and what is derived from its public half
//! (the mac1 and cookie state of the two rate limiters). It lives in the peer table
//! ([`super::peers::Table`]), so that a key switch is one swap of the table: sessions made with
//! the new key and the admission of handshakes addressed to it, together
//! ([`super::Device::set_key`]).

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::SystemTime,
};

use boringtun::noise::rate_limiter::RateLimiter;

use super::{Device, peers::Peer};
use crate::{
    config,
    keys::{PrivateKey, PublicKey, x25519},
};

/// The next identity's generation (unique in the process).
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

/// Our static key and its derived state.
pub struct Identity {
    /// The private key: the one copy the device holds (each `Tunn` made with it keeps its own).
    pub(super) key: PrivateKey,
    /// Its public half.
    pub(super) public: PublicKey,
    /// Checks mac1 and never asks for a cookie: the one every `Tunn` holds, since admission
    /// ([`super::guard`]) happened before a message reaches its peer.
    pub(super) open: Arc<RateLimiter>,
    /// Always "under load": checks mac2 and makes cookie replies, for [`super::guard`].
    pub(super) strict: RateLimiter,
    /// Names this identity (unique in the process): a session whose identity is not the
    /// device's current one sends nothing ([`Device::current`]).
    pub(super) generation: u64,
    /// When the device started running it.
    pub(super) since: SystemTime,
    /// Key switches before it ran (0: the key the device started with). Held here, not beside
    /// the table, so one read of the table gives a key and its count together.
    pub(super) rotations: u64,
}

impl Identity {
    /// `key`, running from now, the key the device starts with.
    pub(super) fn new(key: PrivateKey) -> Arc<Identity> {
        Identity::after(key, 0)
    }

    /// `key`, running from now, after `rotations` key switches.
    pub(super) fn after(key: PrivateKey, rotations: u64) -> Arc<Identity> {
        let public = key.public();
        let x = x25519(&public);
        Arc::new(Identity {
            key,
            public,
            open: Arc::new(RateLimiter::new(&x, u64::MAX)),
            strict: RateLimiter::new(&x, 0),
            generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
            since: SystemTime::now(),
            rotations,
        })
    }

    /// The public key.
    pub fn public(&self) -> PublicKey {
        self.public
    }

    /// When the device started running this key.
    pub fn since(&self) -> SystemTime {
        self.since
    }

    /// Key switches before this key ran.
    pub fn rotations(&self) -> u64 {
        self.rotations
    }
}

impl Device {
    /// Switches to `key` live, with `peers`, in one swap of the peer table: every peer gets a
    /// fresh session made with the new key and a fresh receiver index (its counters and learned
    /// endpoint stay), handshakes are admitted (mac1, cookies) and answered with the new key
    /// only, and peers with an endpoint are sent an initiation right away. Nothing of the old key
    /// stays reachable from the device once the data threads are done with the packet at hand;
    /// a handshake in flight during the switch may fail. Returns the public key that ran before.
    pub fn set_key(&self, key: PrivateKey, peers: &BTreeMap<String, config::Peer>) -> PublicKey {
        self.replace(Some(key), peers)
    }

    /// The key the device runs: its public half, since when and after how many switches, from
    /// one read (a status never shows a new key with the old count).
    pub fn identity(&self) -> Arc<Identity> {
        Arc::clone(&self.table().own)
    }

    /// The public key the device runs.
    pub fn public_key(&self) -> PublicKey {
        self.table().own.public
    }

    /// When the device started running its key (the start, or the last switch).
    pub fn key_since(&self) -> SystemTime {
        self.table().own.since
    }

    /// Key switches since start (of the key it runs).
    pub fn key_rotations(&self) -> u64 {
        self.table().own.rotations
    }

    /// Whether `peer`'s session is made with the key the device runs now. A thread that took the
    /// table before a key switch checks this before it sends a handshake message or an answer
    /// of that session: nothing made with the old key leaves after the switch.
    pub(super) fn current(&self, peer: &Peer) -> bool {
        peer.tunn.identity().generation == self.key_generation.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests;
