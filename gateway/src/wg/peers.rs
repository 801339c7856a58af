//! The peer table: keys, receiver indices and allowed IPs (longest-prefix match), and our own
//! key ([`Identity`]) every session is made with, swapped as a whole on reconfiguration so the
//! data path never sees a half-updated table, nor sessions of one key while handshakes are
//! admitted for another.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    net::{Ipv4Addr, SocketAddr},
    sync::{
        Arc, Mutex, MutexGuard, OnceLock, RwLock,
        atomic::{AtomicBool, AtomicU64},
    },
};

use boringtun::noise::Tunn;

use super::identity::Identity;
use crate::{config, keys::PublicKey};

/// Counters of one peer.
#[derive(Debug, Default)]
pub struct Stats {
    /// Packets sent into the tunnel.
    pub tx_packets: AtomicU64,
    /// Bytes of those packets (inner).
    pub tx_bytes: AtomicU64,
    /// Packets received from the tunnel.
    pub rx_packets: AtomicU64,
    /// Bytes of those packets (inner).
    pub rx_bytes: AtomicU64,
    /// Packets dropped (no endpoint, a failed send, source outside allowed IPs).
    pub dropped: AtomicU64,
    /// Datagrams naming the peer that failed authentication or were replays.
    pub rejected: AtomicU64,
}

/// A peer's protocol state, made on first use: building a `Tunn` costs a key exchange (the
/// static-static X25519), and a hub's peers without an endpoint may never call; a thousand of
/// them would otherwise cost ~50 ms of every apply that adds them.
pub struct Session {
    cell: OnceLock<Mutex<Tunn>>,
    /// Our key (and the rate limiter every `Tunn` of it holds).
    own: Arc<Identity>,
    peer: PublicKey,
    keepalive: Option<u16>,
    index: u32,
}

impl Session {
    /// The state, made now if it was not yet.
    pub fn get(&self) -> &Mutex<Tunn> {
        self.cell.get_or_init(|| {
            Mutex::new(Tunn::new(
                self.own.key.secret(),
                crate::keys::x25519(&self.peer),
                None,
                self.keepalive,
                self.index,
                Some(Arc::clone(&self.own.open)),
            ))
        })
    }

    /// The state, if it was made.
    pub fn started(&self) -> Option<&Mutex<Tunn>> {
        self.cell.get()
    }

    /// The state, locked (made now if it was not yet).
    pub fn lock(&self) -> MutexGuard<'_, Tunn> {
        self.get().lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Our key this session is made with.
    pub fn identity(&self) -> &Arc<Identity> {
        &self.own
    }
}

/// One peer of the device.
pub struct Peer {
    /// Its configuration.
    pub cfg: config::Peer,
    /// Our receiver index for it (boringtun shifts it left by 8).
    pub index: u32,
    /// The protocol state (shared with the entry that replaces this one on reconfiguration).
    pub tunn: Arc<Session>,
    /// Where to send: configured, or learned from its last authenticated packet (shared with
    /// the entry that replaces this one, unless the new configuration sets an endpoint).
    pub endpoint: Arc<RwLock<Option<SocketAddr>>>,
    /// Counters (shared like `tunn`).
    pub stats: Arc<Stats>,
    /// Whether the last timer tick found the handshake given up (to log the transitions only).
    pub expired: Arc<AtomicBool>,
}

impl Peer {
    /// A fresh peer, whose session will be made with our key `own`.
    pub fn new(cfg: config::Peer, own: &Arc<Identity>, index: u32) -> Peer {
        let tunn = Session {
            cell: OnceLock::new(),
            own: Arc::clone(own),
            peer: cfg.public_key,
            keepalive: (cfg.keepalive > 0).then_some(cfg.keepalive),
            index,
        };
        Peer {
            endpoint: Arc::new(RwLock::new(cfg.endpoint)),
            cfg,
            index,
            tunn: Arc::new(tunn),
            stats: Arc::default(),
            expired: Arc::default(),
        }
    }

    /// The same peer (session, counters, learned endpoint) with new settings.
    fn updated(&self, cfg: &config::Peer) -> Peer {
        Peer {
            endpoint: match cfg.endpoint {
                Some(e) => Arc::new(RwLock::new(Some(e))),
                None => Arc::clone(&self.endpoint),
            },
            cfg: cfg.clone(),
            index: self.index,
            tunn: Arc::clone(&self.tunn),
            stats: Arc::clone(&self.stats),
            expired: Arc::clone(&self.expired),
        }
    }

    /// The same peer after our key changed: a fresh session (made with `own`) and receiver
    /// index, as a new peer's, so nothing made with the old key is kept; its counters and its
    /// learned endpoint (unless the configuration sets one) stay.
    fn rekeyed(&self, cfg: &config::Peer, own: &Arc<Identity>, index: u32) -> Peer {
        let fresh = Peer::new(cfg.clone(), own, index);
        Peer {
            endpoint: match cfg.endpoint {
                Some(_) => fresh.endpoint,
                None => Arc::clone(&self.endpoint),
            },
            stats: Arc::clone(&self.stats),
            ..fresh
        }
    }

    /// The current endpoint.
    pub fn endpoint(&self) -> Option<SocketAddr> {
        *self.endpoint.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Records where the peer's last authenticated packet came from (roaming).
    pub fn saw(&self, from: SocketAddr) {
        if self.endpoint() != Some(from) {
            tracing::info!(peer = %self.cfg.id, endpoint = %from, "peer endpoint");
            *self.endpoint.write().unwrap_or_else(|p| p.into_inner()) = Some(from);
        }
    }

    /// Whether `ip` lies in the peer's allowed IPs.
    pub fn allows(&self, ip: Ipv4Addr) -> bool {
        self.cfg.allowed().iter().any(|n| n.contains(&ip))
    }
}

/// All peers, indexed three ways, and our key their sessions are made with.
pub struct Table {
    /// Our key: every session of the table is made with it, and handshakes are admitted (mac1,
    /// cookies) and answered with it.
    pub own: Arc<Identity>,
    /// By ID.
    pub by_id: BTreeMap<String, Arc<Peer>>,
    by_key: HashMap<[u8; 32], Arc<Peer>>,
    by_index: HashMap<u32, Arc<Peer>>,
    /// Prefix lengths in use, longest first, each with its networks.
    routes: Vec<(u8, HashMap<u32, Arc<Peer>>)>,
}

/// Whether `cfg` can keep `p`'s session (same key and keepalive: boringtun fixes the keepalive
/// when it makes the session).
fn reusable(p: &Peer, cfg: &config::Peer) -> bool {
    p.cfg.public_key == cfg.public_key && p.cfg.keepalive == cfg.keepalive
}

/// Receiver indices for new peers: random 24-bit numbers, as the kernel's (an attacker cannot
/// guess which index names which peer), never 0 and never one in use.
struct Indices {
    taken: HashSet<u32>,
    pool: Vec<u32>,
    /// Counts up when the random source fails (never seen; still unique).
    fallback: u32,
}

impl Indices {
    fn new(taken: impl IntoIterator<Item = u32>) -> Indices {
        Indices {
            taken: taken.into_iter().collect(),
            pool: Vec::new(),
            fallback: 0,
        }
    }

    fn next(&mut self, wanted: usize) -> u32 {
        loop {
            let i = match self.pool.pop() {
                Some(i) => i,
                None => {
                    let mut bytes = vec![0u8; 4 * wanted.clamp(16, 4096)];
                    if let Err(e) = crate::keys::random(&mut bytes) {
                        if self.fallback == 0 {
                            tracing::warn!(error = %e, "no random receiver indices; counting instead");
                        }
                        self.fallback += 1;
                        self.fallback
                    } else {
                        self.pool = bytes
                            .chunks_exact(4)
                            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                            .collect();
                        continue;
                    }
                }
            } & 0x00ff_ffff;
            if i != 0 && self.taken.insert(i) {
                return i;
            }
        }
    }
}

impl Table {
    /// A table of no peers, with our key `own`.
    pub fn empty(own: Arc<Identity>) -> Table {
        Table {
            own,
            by_id: BTreeMap::new(),
            by_key: HashMap::new(),
            by_index: HashMap::new(),
            routes: Vec::new(),
        }
    }

    /// The table for `peers` with our key `own`. With the key of `old`, the state (sessions,
    /// counters, learned endpoint) of every peer of `old` whose key and keepalive did not change
    /// is reused; with another key, every peer gets a fresh session and receiver index (its
    /// counters and learned endpoint stay).
    pub fn build(
        old: &Table,
        peers: &BTreeMap<String, config::Peer>,
        own: &Arc<Identity>,
    ) -> Table {
        let mut t = Table::empty(Arc::clone(own));
        let same_key = Arc::ptr_eq(&old.own, own);
        let mut lengths: BTreeMap<u8, HashMap<u32, Arc<Peer>>> = BTreeMap::new();
        // The old table's indices stay taken: its packets may still be in flight.
        let mut indices = Indices::new(old.by_index.keys().copied());
        let wanted = peers
            .iter()
            .filter(|(id, cfg)| !same_key || old.by_id.get(*id).is_none_or(|p| !reusable(p, cfg)))
            .count();
        for (id, cfg) in peers {
            let peer = match old.by_id.get(id) {
                Some(p) if same_key && p.cfg == *cfg => Arc::clone(p),
                // Same identity and timers: keep the session, take the new ranges or endpoint.
                Some(p) if same_key && reusable(p, cfg) => Arc::new(p.updated(cfg)),
                // Our key changed: the same peer, with nothing made with the old key.
                Some(p) if p.cfg.public_key == cfg.public_key => {
                    Arc::new(p.rekeyed(cfg, own, indices.next(wanted)))
                }
                _ => Arc::new(Peer::new(cfg.clone(), own, indices.next(wanted))),
            };
            for n in peer.cfg.allowed() {
                lengths
                    .entry(n.prefix_len())
                    .or_default()
                    .insert(n.network().into(), Arc::clone(&peer));
            }
            t.by_key.insert(peer.cfg.public_key.0, Arc::clone(&peer));
            t.by_index.insert(peer.index, Arc::clone(&peer));
            t.by_id.insert(id.clone(), peer);
        }
        t.routes = lengths.into_iter().rev().collect();
        t
    }

    /// The peer whose allowed IPs hold `dst` (longest prefix).
    pub fn route(&self, dst: Ipv4Addr) -> Option<&Arc<Peer>> {
        let a = u32::from(dst);
        self.routes.iter().find_map(|(len, nets)| {
            let mask = if *len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(*len))
            };
            nets.get(&(a & mask))
        })
    }

    /// The peer with this static public key.
    pub fn by_key(&self, key: &[u8; 32]) -> Option<&Arc<Peer>> {
        self.by_key.get(key)
    }

    /// The peer of a receiver index taken from a packet.
    pub fn by_receiver(&self, receiver_idx: u32) -> Option<&Arc<Peer>> {
        self.by_index.get(&(receiver_idx >> 8))
    }
}

#[cfg(test)]
pub(in crate::wg) mod tests;
