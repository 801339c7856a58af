//! The allocator: which ranges are taken, and the per-peer remapping.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::Ipv4Net;

use crate::{
    ClusterId, Error,
    buddy::Buddy,
    state::{Config, Endpoint, Peer, State},
    types::check_cidr,
};

/// State format version written by this code.
pub const STATE_VERSION: u32 = 2;
/// The versions read: 1 (endpoint peers as a list, each held by the unnamed holder) and 2
/// (endpoint holds per peer and holder).
const READ_VERSIONS: [u32; 2] = [1, 2];

/// How many released peers are remembered for [`Ipam::acquire`] to give their ranges back.
pub const RELEASED_MEMORY: usize = 1024;

/// The IPAM: pure, in memory, no I/O. Every method either succeeds or leaves it unchanged.
#[derive(Debug, Clone)]
pub struct Ipam {
    pub(crate) config: Config,
    pub(crate) external_cidr: Ipv4Net,
    pub(crate) peers: BTreeMap<ClusterId, Peer>,
    pub(crate) endpoints: BTreeMap<std::net::Ipv4Addr, Endpoint>,
    pub(crate) external_used: BTreeSet<u32>,
    released: Vec<Peer>,
    free: Buddy,
    /// Peer ranges kept as announced outside every pool: start -> (last, peer).
    outside: BTreeMap<u32, (u32, ClusterId)>,
}

fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(b) || b.contains(a)
}

fn bounds(n: &Ipv4Net) -> (u32, u32) {
    (n.network().into(), n.broadcast().into())
}

impl Ipam {
    /// A fresh IPAM for `config`. The local external CIDR is the requested one when it is free,
    /// otherwise a free prefix of the same length from the pools.
    pub fn new(config: Config) -> Result<Ipam, Error> {
        validate(&config)?;
        let mut ipam = Ipam {
            external_cidr: config.external_cidr,
            config,
            peers: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            external_used: BTreeSet::new(),
            released: Vec::new(),
            free: Buddy::new(&[]),
            outside: BTreeMap::new(),
        };
        let wanted = ipam.config.external_cidr;
        let fixed = [ipam.config.pod_cidr, ipam.config.service_cidr];
        let collides = fixed
            .iter()
            .chain(&ipam.config.reserved)
            .any(|f| overlaps(f, &wanted));
        ipam.external_cidr = if collides {
            ipam.rebuild_without_external()?;
            ipam.free
                .alloc(&ipam.config.pools, wanted.prefix_len())
                .ok_or(Error::PoolExhausted {
                    len: wanted.prefix_len(),
                    what: format!("the local external CIDR (requested {wanted} collides)"),
                })?
        } else {
            wanted
        };
        ipam.rebuild()?;
        Ok(ipam)
    }

    /// The IPAM exactly as saved, with every allocation in place.
    pub fn restore(state: State) -> Result<Ipam, Error> {
        if !READ_VERSIONS.contains(&state.version) {
            return Err(Error::Corrupt(format!(
                "unknown state version {}",
                state.version
            )));
        }
        validate(&state.config)?;
        let mut ipam = Ipam {
            config: state.config,
            external_cidr: state.external_cidr,
            peers: state.peers.into_iter().map(|p| (p.id.clone(), p)).collect(),
            endpoints: BTreeMap::new(),
            external_used: BTreeSet::new(),
            released: state.released,
            free: Buddy::new(&[]),
            outside: BTreeMap::new(),
        };
        for e in state.endpoints {
            if !ipam.external_cidr.contains(&e.external_ip)
                || !ipam.external_used.insert(e.external_ip.into())
            {
                return Err(Error::Corrupt(format!(
                    "endpoint {} -> {}",
                    e.ip, e.external_ip
                )));
            }
            ipam.endpoints.insert(e.ip, e);
        }
        ipam.rebuild()?;
        Ok(ipam)
    }

    /// The state to persist.
    pub fn state(&self) -> State {
        State {
            version: STATE_VERSION,
            config: self.config.clone(),
            external_cidr: self.external_cidr,
            peers: self.peers.values().cloned().collect(),
            endpoints: self.endpoints.values().cloned().collect(),
            released: self.released.clone(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The local external CIDR in use.
    pub fn external_cidr(&self) -> Ipv4Net {
        self.external_cidr
    }

    /// Every peer, by cluster ID.
    pub fn peers(&self) -> impl Iterator<Item = &Peer> {
        self.peers.values()
    }

    /// One peer.
    pub fn peer(&self, id: &ClusterId) -> Result<&Peer, Error> {
        self.peers
            .get(id)
            .ok_or_else(|| Error::UnknownPeer(id.clone()))
    }

    /// Every endpoint mapping.
    pub fn endpoints(&self) -> impl Iterator<Item = &Endpoint> {
        self.endpoints.values()
    }

    /// The fixed local ranges with their names.
    fn fixed(&self) -> Vec<(&'static str, Ipv4Net)> {
        let mut f = vec![
            ("pod CIDR", self.config.pod_cidr),
            ("service CIDR", self.config.service_cidr),
            ("external CIDR", self.external_cidr),
        ];
        f.extend(self.config.reserved.iter().map(|r| ("reserved subnet", *r)));
        f
    }

    fn rebuild_without_external(&mut self) -> Result<(), Error> {
        self.free = Buddy::new(&self.config.pools);
        for f in [self.config.pod_cidr, self.config.service_cidr]
            .iter()
            .chain(&self.config.reserved)
        {
            self.free.carve(f);
        }
        Ok(())
    }

    /// Recomputes the free space from the configuration and the peers' ranges.
    pub(crate) fn rebuild(&mut self) -> Result<(), Error> {
        self.free = Buddy::new(&self.config.pools);
        for (_, f) in self.fixed() {
            self.free.carve(&f);
        }
        self.outside.clear();
        let views: Vec<(ClusterId, Ipv4Net)> = self
            .peers
            .values()
            .flat_map(|p| [(p.id.clone(), p.pod_view), (p.id.clone(), p.external_view)])
            .collect();
        for (id, v) in views {
            if !self.is_free(&v) {
                return Err(Error::Corrupt(format!(
                    "range {v} of peer {id} overlaps another allocation"
                )));
            }
            self.take(&v, &id);
        }
        Ok(())
    }

    /// Whether all of `n` may be handed out: inside one pool and free there, or outside every
    /// pool and clear of the local ranges and other peers' ranges.
    pub fn is_free(&self, n: &Ipv4Net) -> bool {
        if self.free.overlaps_pool(n) {
            return self.free.pool_of(n).is_some() && self.free.is_free(n);
        }
        if self.fixed().iter().any(|(_, f)| overlaps(f, n)) {
            return false;
        }
        let (lo, hi) = bounds(n);
        self.outside
            .range(..=hi)
            .next_back()
            .is_none_or(|(_, (last, _))| *last < lo)
    }

    fn take(&mut self, n: &Ipv4Net, owner: &ClusterId) {
        if self.free.pool_of(n).is_some() {
            let taken = self.free.take(n);
            debug_assert!(taken, "checked free");
        } else {
            let (lo, hi) = bounds(n);
            self.outside.insert(lo, (hi, owner.clone()));
        }
    }

    fn give_back(&mut self, n: &Ipv4Net) {
        if self.free.pool_of(n).is_some() {
            self.free.free(n);
        } else {
            self.outside.remove(&bounds(n).0);
        }
    }

    /// `wanted` itself when free, else `hint` when free, else a free prefix of the same length
    /// from the pools.
    fn take_or_alloc(
        &mut self,
        wanted: Ipv4Net,
        hint: Option<Ipv4Net>,
        owner: &ClusterId,
        what: &str,
    ) -> Result<Ipv4Net, Error> {
        for candidate in std::iter::once(wanted).chain(hint) {
            if self.is_free(&candidate) {
                self.take(&candidate, owner);
                return Ok(candidate);
            }
        }
        self.free
            .alloc(&self.config.pools, wanted.prefix_len())
            .ok_or_else(|| Error::PoolExhausted {
                len: wanted.prefix_len(),
                what: format!("peer {owner} {what} {wanted}"),
            })
    }

    /// Decides where peer `id`'s pod and external CIDRs appear here: the same prefixes when
    /// free, otherwise free prefixes of the same lengths, chosen deterministically. Asking again
    /// with the same inputs returns the same answer; other inputs for a known peer are refused.
    pub fn acquire(
        &mut self,
        id: &ClusterId,
        pod: Ipv4Net,
        external: Ipv4Net,
    ) -> Result<(Ipv4Net, Ipv4Net), Error> {
        let (pod, external) = (check_cidr(pod)?, check_cidr(external)?);
        if let Some(p) = self.peers.get(id) {
            if p.pod_cidr == pod && p.external_cidr == external {
                return Ok((p.pod_view, p.external_view));
            }
            return Err(Error::PeerConflict {
                peer: id.clone(),
                pod: p.pod_cidr,
                external: p.external_cidr,
                new_pod: pod,
                new_external: external,
            });
        }
        if overlaps(&pod, &external) {
            return Err(Error::PeerSelfOverlap {
                peer: id.clone(),
                pod,
                external,
            });
        }
        // A peer coming back with the same CIDRs gets its previous ranges when still free.
        let before = self
            .released
            .iter()
            .position(|p| p.id == *id && p.pod_cidr == pod && p.external_cidr == external)
            .map(|i| self.released.remove(i));
        let hints = before.as_ref().map(|p| (p.pod_view, p.external_view));
        // Take every announced prefix that is free first, so that remapping one of them never
        // consumes the other.
        let keep_pod = self.is_free(&pod);
        if keep_pod {
            self.take(&pod, id);
        }
        let keep_ext = self.is_free(&external);
        if keep_ext {
            self.take(&external, id);
        }
        let pod_view = if keep_pod {
            pod
        } else {
            match self.take_or_alloc(pod, hints.map(|h| h.0), id, "pod CIDR") {
                Ok(v) => v,
                Err(e) => {
                    if keep_ext {
                        self.give_back(&external);
                    }
                    self.released.extend(before);
                    return Err(e);
                }
            }
        };
        let external_view = if keep_ext {
            external
        } else {
            match self.take_or_alloc(external, hints.map(|h| h.1), id, "external CIDR") {
                Ok(v) => v,
                Err(e) => {
                    self.give_back(&pod_view);
                    self.released.extend(before);
                    return Err(e);
                }
            }
        };
        let peer = Peer {
            id: id.clone(),
            pod_cidr: pod,
            external_cidr: external,
            pod_view,
            external_view,
            our_pod_view: None,
            our_external_view: None,
        };
        self.peers.insert(id.clone(), peer);
        Ok((pod_view, external_view))
    }

    /// Frees exactly peer `id`'s ranges and its endpoint references.
    pub fn release(&mut self, id: &ClusterId) -> Result<Peer, Error> {
        let peer = self
            .peers
            .remove(id)
            .ok_or_else(|| Error::UnknownPeer(id.clone()))?;
        self.give_back(&peer.pod_view);
        self.give_back(&peer.external_view);
        self.released.retain(|p| p.id != *id);
        if self.released.len() == RELEASED_MEMORY {
            self.released.remove(0);
        }
        self.released.push(Peer {
            our_pod_view: None,
            our_external_view: None,
            ..peer.clone()
        });
        let mut gone = Vec::new();
        for (ip, e) in &mut self.endpoints {
            if e.peers.remove(id).is_some() && e.peers.is_empty() {
                gone.push(*ip);
            }
        }
        for ip in gone {
            if let Some(e) = self.endpoints.remove(&ip) {
                self.external_used.remove(&u32::from(e.external_ip));
            }
        }
        Ok(peer)
    }

    /// Records how peer `id` sees our pod and external CIDRs (its IPAM's decision).
    pub fn set_peer_view(
        &mut self,
        id: &ClusterId,
        pod_view: Ipv4Net,
        external_view: Ipv4Net,
    ) -> Result<(), Error> {
        let (pod_view, external_view) = (check_cidr(pod_view)?, check_cidr(external_view)?);
        let (ours_pod, ours_ext) = (self.config.pod_cidr, self.external_cidr);
        let peer = self
            .peers
            .get_mut(id)
            .ok_or_else(|| Error::UnknownPeer(id.clone()))?;
        for (view, what, ours) in [
            (pod_view, "pod CIDR", ours_pod),
            (external_view, "external CIDR", ours_ext),
        ] {
            if view.prefix_len() != ours.prefix_len() {
                return Err(Error::ViewLength {
                    peer: id.clone(),
                    view,
                    what,
                    ours,
                });
            }
        }
        peer.our_pod_view = Some(pod_view);
        peer.our_external_view = Some(external_view);
        Ok(())
    }

    /// Forgets how peer `id` sees our ranges (the undo of [`Ipam::set_peer_view`]); doing it
    /// twice is harmless.
    pub fn clear_peer_view(&mut self, id: &ClusterId) -> Result<(), Error> {
        let peer = self
            .peers
            .get_mut(id)
            .ok_or_else(|| Error::UnknownPeer(id.clone()))?;
        peer.our_pod_view = None;
        peer.our_external_view = None;
        Ok(())
    }

    /// Addresses used and total in each pool.
    pub fn pool_usage(&self) -> Vec<(Ipv4Net, u64, u64)> {
        self.free
            .pools()
            .iter()
            .map(|p| {
                let total = 1u64 << (32 - u32::from(p.prefix_len()));
                (*p, total - self.free.free_in(p), total)
            })
            .collect()
    }

    /// Who holds a range overlapping `n`, if anyone (a peer or a local range).
    pub(crate) fn holder(&self, n: &Ipv4Net, include_reserved: bool) -> Option<String> {
        for p in self.peers.values() {
            for (v, what) in [(p.pod_view, "pod CIDR"), (p.external_view, "external CIDR")] {
                if overlaps(&v, n) {
                    return Some(format!(
                        "peer {} ({what} {} seen here as {v})",
                        p.id,
                        if what == "pod CIDR" {
                            p.pod_cidr
                        } else {
                            p.external_cidr
                        }
                    ));
                }
            }
        }
        if overlaps(&self.external_cidr, n) {
            return Some(format!("the local external CIDR {}", self.external_cidr));
        }
        if include_reserved {
            return self
                .config
                .reserved
                .iter()
                .find(|r| overlaps(r, n))
                .map(|r| format!("reserved subnet {r}"));
        }
        None
    }
}

/// Checks a configuration on its own.
pub(crate) fn validate(c: &Config) -> Result<(), Error> {
    check_cidr(c.pod_cidr)?;
    check_cidr(c.service_cidr)?;
    check_cidr(c.external_cidr)?;
    if overlaps(&c.pod_cidr, &c.service_cidr) {
        return Err(Error::LocalOverlap {
            a_what: "pod CIDR",
            a: c.pod_cidr,
            b_what: "service CIDR",
            b: c.service_cidr,
        });
    }
    for (i, p) in c.pools.iter().enumerate() {
        liqo_types::Cidr::new(*p)?;
        if let Some(q) = c.pools[..i].iter().find(|q| overlaps(p, q)) {
            return Err(Error::PoolOverlap(*p, *q));
        }
    }
    for r in &c.reserved {
        check_cidr(*r)?;
    }
    Ok(())
}
