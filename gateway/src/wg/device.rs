//! The device: its sockets, peers, counters and threads. The per-packet work lives in
//! [`super::tx`] (TUN to UDP), [`super::rx`] (UDP to TUN), [`super::handshake`] (key exchanges,
//! on their own thread) and [`super::timers`].

use std::{
    collections::{BTreeMap, VecDeque},
    fs::File,
    io,
    net::UdpSocket,
    os::fd::OwnedFd,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        mpsc::{Receiver, SyncSender, sync_channel},
    },
    thread::{self, JoinHandle},
    time::Duration,
};

use boringtun::noise::TunnResult;
use dataplane::steer::TunSteering;
use serde::{Deserialize, Serialize};

use super::{
    affinity::Affinity,
    handshake::{Handshake, QUEUE},
    identity::Identity,
    lanes::Lane,
    peers::{Peer, Table},
    poller::Half,
    steering::Steering,
};
use crate::{
    config,
    keys::{PrivateKey, PublicKey},
};

/// How long blocking calls wait before checking for shutdown.
pub(super) const TICK: Duration = Duration::from_millis(200);
/// First handshake initiations sent per apply, and then per timer tick (100 ms): a hub that
/// gains a thousand peers calls them over two seconds, not in one burst.
pub(super) const INITIATIONS_PER_TICK: usize = 50;
/// UDP socket buffer size (bytes).
pub(super) const SOCKET_BUFFER: usize = 2 << 20;

/// One peer as `liqo-gateway status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PeerStatus {
    /// Cluster ID.
    pub id: String,
    /// Public key.
    pub public_key: String,
    /// Current endpoint.
    pub endpoint: Option<String>,
    /// Seconds since the last handshake.
    pub handshake_age_secs: Option<u64>,
    /// Inner packets sent.
    pub tx_packets: u64,
    /// Inner bytes sent.
    pub tx_bytes: u64,
    /// Inner packets received.
    pub rx_packets: u64,
    /// Inner bytes received.
    pub rx_bytes: u64,
    /// Packets of this peer dropped (no endpoint yet, a failed send, an authenticated packet
    /// from outside its allowed IPs).
    pub dropped: u64,
    /// Datagrams naming this peer (its receiver index or its key) that failed authentication or
    /// were replays: anyone can send those, so they are not the peer's doing.
    #[serde(default)]
    pub rejected: u64,
}

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

/// [`Wire`] as `liqo-gateway status` shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WireStatus {
    /// See [`Wire::invalid`].
    pub invalid: u64,
    /// See [`Wire::cookies_sent`].
    pub cookies_sent: u64,
    /// See [`Wire::handshakes_processed`].
    pub handshakes_processed: u64,
    /// See [`Wire::handshakes_limited`].
    pub handshakes_limited: u64,
    /// See [`Wire::handshakes_overflow`].
    pub handshakes_overflow: u64,
}

/// A running WireGuard device.
pub struct Device {
    /// The peers and our key (its [`Identity`]), swapped whole.
    pub(super) table: RwLock<Arc<Table>>,
    /// The generation of the identity of the table (see [`Device::current`]).
    pub(super) key_generation: AtomicU64,
    /// One per queue of the TUN device (at least one); see [`Lane`].
    pub(super) lanes: Vec<Lane>,
    stop: AtomicBool,
    /// Set once the kernel refused a UDP GSO send.
    pub(super) gso_off: AtomicBool,
    /// Packets from the TUN device with no peer for their destination.
    pub no_route: AtomicU64,
    /// Counters of the port.
    pub wire: Wire,
    pub(super) handshakes: SyncSender<Handshake>,
    handshake_queue: Mutex<Option<Receiver<Handshake>>>,
    /// [`Device::busy_poll`], in microseconds.
    pub(super) busy_poll_us: AtomicU64,
    /// Handshake messages waiting in the queue (the handshake thread's load).
    pub(super) queued: AtomicUsize,
    /// New peers (IDs) still to be sent their first handshake initiation.
    pending_calls: Mutex<VecDeque<String>>,
    /// Where the data threads run.
    pub(super) affinity: Affinity,
    /// Which lane a packet takes.
    pub(super) steering: Mutex<Steering>,
}

impl Device {
    /// A device over its lanes: each a queue of one TUN device and a UDP socket of one port
    /// (one of each: a device of one lane). Lane `i` should carry what CPU `i` (modulo their
    /// count) sends and receives (`dataplane::steer`).
    /// `steering` is the loaded TUN steering program: without it, lanes are picked by flow.
    pub fn new(
        key: PrivateKey,
        queues: Vec<(OwnedFd, UdpSocket)>,
        steering: Option<TunSteering>,
    ) -> io::Result<Arc<Device>> {
        if queues.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a device needs at least one TUN queue and UDP socket",
            ));
        }
        let lanes = queues
            .into_iter()
            .enumerate()
            .map(|(i, (tun, udp))| Lane::new(i, tun, udp))
            .collect::<io::Result<Vec<_>>>()?;
        let own = Identity::new(key);
        let (handshakes, queue) = sync_channel(QUEUE);
        Ok(Arc::new(Device {
            key_generation: AtomicU64::new(own.generation),
            table: RwLock::new(Arc::new(Table::empty(own))),
            affinity: Affinity::new(lanes.len()),
            lanes,
            stop: AtomicBool::new(false),
            gso_off: AtomicBool::new(false),
            no_route: AtomicU64::new(0),
            wire: Wire::default(),
            handshakes,
            handshake_queue: Mutex::new(Some(queue)),
            busy_poll_us: AtomicU64::new(0),
            queued: AtomicUsize::new(0),
            pending_calls: Mutex::default(),
            steering: Mutex::new(Steering::new(steering)),
        }))
    }

    /// The current peer table.
    pub fn table(&self) -> Arc<Table> {
        Arc::clone(&self.table.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Replaces the peers; unchanged peers keep their sessions and counters. New peers with a
    /// known endpoint are sent a handshake initiation right away (beyond the first
    /// [`INITIATIONS_PER_TICK`], paced by the timer thread), so the first packet does not wait
    /// for a keepalive.
    pub fn set_peers(&self, peers: &BTreeMap<String, config::Peer>) {
        self.replace(None, peers);
    }

    /// Replaces the peers, and with `key` our key too, in one swap of the table; returns the
    /// public key that ran before. Peers with a new session (all of them with a new key) and an
    /// endpoint are sent a handshake initiation right away.
    pub(super) fn replace(
        &self,
        key: Option<PrivateKey>,
        peers: &BTreeMap<String, config::Peer>,
    ) -> PublicKey {
        let (fresh, before): (Vec<Arc<Peer>>, _) = {
            let mut t = self.table.write().unwrap_or_else(|p| p.into_inner());
            // A new key is counted under the lock: two switches never get the same number.
            let own = match key {
                Some(key) => Identity::after(key, t.own.rotations + 1),
                None => Arc::clone(&t.own),
            };
            let next = Arc::new(Table::build(&t, peers, &own));
            // Before the table: a thread that still holds the old one sees its sessions are no
            // longer current, and sends none of their handshake messages.
            self.key_generation.store(own.generation, Ordering::Release);
            let fresh = next
                .by_id
                .values()
                .filter(|p| {
                    t.by_id
                        .get(&p.cfg.id)
                        .is_none_or(|old| !Arc::ptr_eq(&old.tunn, &p.tunn))
                })
                .cloned()
                .collect();
            let before = std::mem::replace(&mut *t, next);
            (fresh, before.own.public)
        };
        let mut calls: Vec<String> = fresh
            .iter()
            .filter(|p| p.endpoint().is_some())
            .map(|p| p.cfg.id.clone())
            .collect();
        // The first few at once; a hub's hundreds are paced by the timer thread.
        let later = calls.split_off(calls.len().min(INITIATIONS_PER_TICK));
        self.initiate(&calls);
        self.pending_calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(later);
        before
    }

    /// Sends a handshake initiation to each of these peers (those still in the table and with an
    /// endpoint).
    pub(super) fn initiate(&self, ids: &[String]) {
        let table = self.table();
        let mut out = vec![0u8; 256];
        for peer in ids.iter().filter_map(|id| table.by_id.get(id)) {
            // A paced peer may have called us meanwhile: its session is up, nothing to start.
            let handshaken = peer.tunn.started().is_some_and(|t| {
                t.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .stats()
                    .0
                    .is_some()
            });
            if peer.endpoint().is_none() || handshaken {
                continue;
            }
            let r = peer
                .tunn
                .lock()
                .format_handshake_initiation(&mut out, false);
            if let TunnResult::WriteToNetwork(init) = r {
                self.send(peer, init);
            }
        }
    }

    /// Up to [`INITIATIONS_PER_TICK`] of the peers still waiting for their first initiation.
    pub(super) fn next_calls(&self) -> Vec<String> {
        let mut q = self.pending_calls.lock().unwrap_or_else(|p| p.into_inner());
        let n = q.len().min(INITIATIONS_PER_TICK);
        q.drain(..n).collect()
    }

    /// The UDP port actually bound.
    pub fn port(&self) -> io::Result<u16> {
        Ok(self.udp().local_addr()?.port())
    }

    /// The socket handshakes, cookies and keepalives leave by (the first lane's).
    pub(super) fn udp(&self) -> &UdpSocket {
        &self.lanes[0].udp
    }

    /// The TUN queue that packets decrypted off the data path (after a handshake) are written to.
    pub(super) fn tun(&self) -> &File {
        &self.lanes[0].tun
    }

    /// How many lanes (TUN queues and UDP sockets) the data path has.
    pub fn lanes(&self) -> usize {
        self.lanes.len()
    }

    /// Starts the threads: TUN to UDP and UDP to TUN for each lane, handshakes, timers,
    /// placement.
    pub fn start(self: &Arc<Self>) -> io::Result<Vec<JoinHandle<()>>> {
        let queue = self
            .handshake_queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| io::Error::other("the device was started already"))?;
        let mut handles = Vec::new();
        let d = Arc::clone(self);
        handles.push(
            thread::Builder::new()
                .name("wg-handshake".into())
                .spawn(move || d.handshake_loop(&queue))?,
        );
        for lane in 0..self.lanes.len() {
            for (name, half) in [("wg-tun", Half::Tx), ("wg-udp", Half::Rx)] {
                let d = Arc::clone(self);
                handles.push(
                    thread::Builder::new()
                        .name(format!("{name}/{lane}"))
                        .spawn(move || d.run_half(lane, half))?,
                );
            }
        }
        let d = Arc::clone(self);
        handles.push(
            thread::Builder::new()
                .name("wg-timers".into())
                .spawn(move || d.timer_loop())?,
        );
        let d = Arc::clone(self);
        handles.push(
            thread::Builder::new()
                .name("wg-place".into())
                .spawn(move || d.placement_loop())?,
        );
        Ok(handles)
    }

    /// Asks the threads to stop (they notice within [`TICK`]).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Status of every peer.
    pub fn status(&self) -> Vec<PeerStatus> {
        self.table()
            .by_id
            .values()
            .map(|p| {
                // A session never made has never handshaken.
                let age = p.tunn.started().and_then(|t| {
                    let (age, ..) = t.lock().unwrap_or_else(|e| e.into_inner()).stats();
                    age
                });
                let s = &p.stats;
                PeerStatus {
                    id: p.cfg.id.clone(),
                    public_key: p.cfg.public_key.to_string(),
                    endpoint: p.endpoint().map(|e| e.to_string()),
                    handshake_age_secs: age.map(|d| d.as_secs()),
                    tx_packets: s.tx_packets.load(Ordering::Relaxed),
                    tx_bytes: s.tx_bytes.load(Ordering::Relaxed),
                    rx_packets: s.rx_packets.load(Ordering::Relaxed),
                    rx_bytes: s.rx_bytes.load(Ordering::Relaxed),
                    dropped: s.dropped.load(Ordering::Relaxed),
                    rejected: s.rejected.load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// The counters of the port.
    pub fn wire_status(&self) -> WireStatus {
        let w = &self.wire;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WireStatus {
            invalid: get(&w.invalid),
            cookies_sent: get(&w.cookies_sent),
            handshakes_processed: get(&w.handshakes_processed),
            handshakes_limited: get(&w.handshakes_limited),
            handshakes_overflow: get(&w.handshakes_overflow),
        }
    }
}
