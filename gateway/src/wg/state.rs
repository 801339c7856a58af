//! The device's state, which every thread of the data path reads: the peer table (and our key
//! in it), the lanes, the handshake queue's sending end, the counters, the placement and the
//! steering, and the stop flag. The threads' work is `impl Device` in their own modules
//! ([`super::tx`], [`super::rx`], [`super::handshake`], [`super::timers`], [`super::poller`],
//! [`super::placement`]); building a device and starting its threads is [`super::device`].

use std::{
    collections::VecDeque,
    fs::File,
    net::UdpSocket,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        mpsc::{Receiver, SyncSender},
    },
};

use super::{
    affinity::Affinity,
    lanes::Lane,
    peers::{Peer, Table},
    queue::Handshake,
    steering::Steering,
};

/// Counters of the WireGuard port itself, not of a peer.
#[derive(Debug, Default)]
pub struct Wire {
    /// Datagrams refused before reaching a peer: malformed, bad mac1, unknown receiver index or
    /// key.
    pub invalid: AtomicU64,
    /// Cookie replies sent (under load, to handshakes without a valid mac2).
    pub cookies_sent: AtomicU64,
    /// Handshake messages handed to the handshake thread.
    pub handshakes_processed: AtomicU64,
    /// Handshake messages dropped by the per-source or global rate limit.
    pub handshakes_limited: AtomicU64,
    /// Handshake messages dropped because the handshake thread's queue was full.
    pub handshakes_overflow: AtomicU64,
}

/// Counts one more in `c`.
pub(super) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A running WireGuard device.
pub struct Device {
    /// The peers and our key (its [`Identity`](super::Identity)), swapped whole.
    pub(super) table: RwLock<Arc<Table>>,
    /// The generation of the identity of the table (see [`Device::current`]).
    pub(super) key_generation: AtomicU64,
    /// One per queue of the TUN device (at least one); see [`Lane`].
    pub(super) lanes: Vec<Lane>,
    pub(super) stop: AtomicBool,
    /// Set once the kernel refused a UDP GSO send.
    pub(super) gso_off: AtomicBool,
    /// Packets from the TUN device with no peer for their destination.
    pub no_route: AtomicU64,
    /// Counters of the port.
    pub wire: Wire,
    pub(super) handshakes: SyncSender<Handshake>,
    pub(super) handshake_queue: Mutex<Option<Receiver<Handshake>>>,
    /// [`Device::busy_poll`], in microseconds.
    pub(super) busy_poll_us: AtomicU64,
    /// Handshake messages waiting in the queue (the handshake thread's load).
    pub(super) queued: AtomicUsize,
    /// New peers (IDs) still to be sent their first handshake initiation.
    pub(super) pending_calls: Mutex<VecDeque<String>>,
    /// Where the data threads run.
    pub(super) affinity: Affinity,
    /// Which lane a packet takes.
    pub(super) steering: Mutex<Steering>,
}

impl Device {
    /// The current peer table.
    pub fn table(&self) -> Arc<Table> {
        Arc::clone(&self.table.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The socket handshakes, cookies and keepalives leave by (the first lane's).
    pub(super) fn udp(&self) -> &UdpSocket {
        &self.lanes[0].udp
    }

    /// The TUN queue that packets decrypted off the data path (after a handshake) are written to.
    pub(super) fn tun(&self) -> &File {
        &self.lanes[0].tun
    }

    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Whether `peer`'s session is made with the key the device runs now. A thread that took the
    /// table before a key switch checks this before it sends a handshake message or an answer
    /// of that session: nothing made with the old key leaves after the switch.
    pub(super) fn current(&self, peer: &Peer) -> bool {
        peer.tunn.identity().generation == self.key_generation.load(Ordering::Acquire)
    }
}
