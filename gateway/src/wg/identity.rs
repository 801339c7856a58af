//! Our side of every session: the static private key and what is derived from its public half
//! (the mac1 and cookie state of the two rate limiters). It lives in the peer table
//! ([`super::peers::Table`]), so that a key switch is one swap of the table: sessions made with
//! the new key and the admission of handshakes addressed to it, together
//! ([`super::Device::set_key`]).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::SystemTime,
};

use boringtun::noise::rate_limiter::RateLimiter;

use crate::keys::{PrivateKey, PublicKey, x25519};

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
    /// device's current one sends nothing ([`Device::current`](super::Device::current)).
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
