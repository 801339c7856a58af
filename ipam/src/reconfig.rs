//! Changing reserved subnets, pools and local CIDRs on a running IPAM.
//!
//! Each change is checked and applied on a copy, which replaces the live IPAM only when every
//! step succeeded, so a refused change leaves everything as it was.

use ipnet::Ipv4Net;

use crate::{Error, Ipam, core::validate, state::Config, types::check_cidr};

impl Ipam {
    /// Adds a reserved subnet. Refused, naming the holder, if it overlaps a peer's range or the
    /// local external CIDR. Adding one that is already reserved does nothing.
    pub fn add_reserved(&mut self, net: Ipv4Net) -> Result<(), Error> {
        let net = check_cidr(net)?;
        if self.config.reserved.contains(&net) {
            return Ok(());
        }
        if let Some(holder) = self.holder(&net, false) {
            return Err(Error::InUse {
                what: "reserved subnet",
                net,
                holder,
            });
        }
        let mut next = self.clone();
        next.config.reserved.push(net);
        next.rebuild()?;
        *self = next;
        Ok(())
    }

    /// Removes a reserved subnet, making its addresses available again.
    pub fn remove_reserved(&mut self, net: Ipv4Net) -> Result<(), Error> {
        let i =
            self.config
                .reserved
                .iter()
                .position(|r| *r == net)
                .ok_or(Error::NotConfigured {
                    what: "reserved subnet",
                    net,
                })?;
        let mut next = self.clone();
        next.config.reserved.remove(i);
        next.rebuild()?;
        *self = next;
        Ok(())
    }

    /// Adds a pool. It must not overlap another pool, nor cut through a peer's range kept
    /// outside the pools.
    pub fn add_pool(&mut self, net: Ipv4Net) -> Result<(), Error> {
        let net = check_cidr(net)?;
        let mut next = self.clone();
        next.config.pools.push(net);
        validate(&next.config)?;
        for p in self.peers.values() {
            for v in [p.pod_view, p.external_view] {
                if v.contains(&net) && v != net {
                    return Err(Error::InUse {
                        what: "pool",
                        net,
                        holder: format!("peer {} (range {v})", p.id),
                    });
                }
            }
        }
        next.rebuild()?;
        *self = next;
        Ok(())
    }

    /// Removes a pool; refused, naming the holder, while a peer's range or the local external
    /// CIDR lies inside it.
    pub fn remove_pool(&mut self, net: Ipv4Net) -> Result<(), Error> {
        let i = self
            .config
            .pools
            .iter()
            .position(|p| *p == net)
            .ok_or(Error::NotConfigured { what: "pool", net })?;
        if let Some(holder) = self.holder(&net, false) {
            return Err(Error::InUse {
                what: "pool",
                net,
                holder,
            });
        }
        let mut next = self.clone();
        next.config.pools.remove(i);
        next.rebuild()?;
        *self = next;
        Ok(())
    }

    /// Applies a configuration given at start-up to a restored IPAM: local CIDRs may change only
    /// while no peer holds allocations; pools and reserved subnets are set to the given lists
    /// with the same checks as the runtime changes.
    pub fn reconfigure(&mut self, wanted: Config) -> Result<(), Error> {
        validate(&wanted)?;
        let mut next = self.clone();
        for (what, old, new) in [
            ("pod CIDR", self.config.pod_cidr, wanted.pod_cidr),
            (
                "service CIDR",
                self.config.service_cidr,
                wanted.service_cidr,
            ),
            (
                "external CIDR",
                self.config.external_cidr,
                wanted.external_cidr,
            ),
        ] {
            if old != new && !self.peers.is_empty() {
                return Err(Error::LocalChange {
                    what,
                    old,
                    new,
                    peers: self.peers.len(),
                });
            }
        }
        if next.config.pod_cidr != wanted.pod_cidr
            || next.config.service_cidr != wanted.service_cidr
            || next.config.external_cidr != wanted.external_cidr
        {
            // No peers: start over with the new local ranges (endpoints go with the old
            // external CIDR).
            *self = Ipam::new(wanted)?;
            return Ok(());
        }
        for r in self
            .config
            .reserved
            .iter()
            .filter(|r| !wanted.reserved.contains(r))
        {
            next.remove_reserved(*r)?;
        }
        for r in wanted
            .reserved
            .iter()
            .filter(|r| !self.config.reserved.contains(r))
        {
            next.add_reserved(*r)?;
        }
        for p in self
            .config
            .pools
            .iter()
            .filter(|p| !wanted.pools.contains(p))
        {
            next.remove_pool(*p)?;
        }
        for p in wanted
            .pools
            .iter()
            .filter(|p| !self.config.pools.contains(p))
        {
            next.add_pool(*p)?;
        }
        // The lists as given: the order of the pools is the order remaps are taken from.
        next.config.pools = wanted.pools;
        next.config.reserved = wanted.reserved;
        next.rebuild()?;
        *self = next;
        Ok(())
    }
}
