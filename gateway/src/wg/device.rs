//! The device: built over its lanes, its threads started and stopped, its peers and key
//! replaced, its status read. Its state ([`super::state`]) is below every thread; the per-packet
//! work lives in [`super::tx`] (TUN to UDP), [`super::rx`] (UDP to TUN), [`super::handshake`]
//! (key exchanges, on their own thread), [`super::timers`] and [`super::placement`], each wired
//! here.

use std::{
    collections::BTreeMap,
    io,
    net::UdpSocket,
    os::fd::OwnedFd,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        mpsc::sync_channel,
    },
    thread::{self, JoinHandle},
    time::SystemTime,
};

use dataplane::steer::TunSteering;
use liqo_gateway_api::status::{PeerStatus, WireStatus};

use super::{
    affinity::Affinity,
    half::Half,
    identity::Identity,
    lanes::Lane,
    peers::{Peer, Table},
    state::{Device, Wire},
    steering::Steering,
    tuning::{INITIATIONS_PER_TICK, QUEUE},
};
use crate::{
    config,
    keys::{PrivateKey, PublicKey},
};

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
    fn replace(
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

    /// The UDP port actually bound.
    pub fn port(&self) -> io::Result<u16> {
        Ok(self.udp().local_addr()?.port())
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

    /// Asks the threads to stop (they notice within [`TICK`](super::tuning::TICK)).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
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

#[cfg(test)]
mod tests;
