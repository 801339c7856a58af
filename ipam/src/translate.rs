//! Address translation for reflected objects (pod status, EndpointSlices), keeping host bits.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::{ClusterId, Error, Holder, Ipam, state::Endpoint, types::translate};

/// How a local IP appears to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointMapping {
    /// For a non-pod IP: its address in our external CIDR (shared by every peer).
    pub external_ip: Option<Ipv4Addr>,
    /// The address the peer uses.
    pub seen_by_peer: Ipv4Addr,
}

impl Ipam {
    /// A remote pod or external IP of peer `id` -> where it appears here.
    pub fn remote_to_local(&self, id: &ClusterId, ip: Ipv4Addr) -> Result<Ipv4Addr, Error> {
        let p = self.peer(id)?;
        if p.pod_cidr.contains(&ip) {
            return Ok(translate(ip, &p.pod_cidr, &p.pod_view));
        }
        if p.external_cidr.contains(&ip) {
            return Ok(translate(ip, &p.external_cidr, &p.external_view));
        }
        Err(Error::IpOutside {
            ip,
            ranges: format!(
                "peer {id}'s pod CIDR {} and external CIDR {}",
                p.pod_cidr, p.external_cidr
            ),
        })
    }

    /// A local pod IP (or an IP of our external CIDR) -> where peer `id` sees it.
    pub fn local_to_peer(&self, id: &ClusterId, ip: Ipv4Addr) -> Result<Ipv4Addr, Error> {
        let p = self.peer(id)?;
        let (pod, ext) = (self.config.pod_cidr, self.external_cidr);
        let view = |v: Option<Ipv4Net>| v.ok_or_else(|| Error::NoPeerView(id.clone()));
        if pod.contains(&ip) {
            return Ok(translate(ip, &pod, &view(p.our_pod_view)?));
        }
        if ext.contains(&ip) {
            return Ok(translate(ip, &ext, &view(p.our_external_view)?));
        }
        Err(Error::IpOutside {
            ip,
            ranges: format!("the local pod CIDR {pod} and external CIDR {ext}"),
        })
    }

    /// Exposes a local IP to peer `id`: a pod IP maps straight into the peer's view of our pods;
    /// any other IP gets an address in our external CIDR (one per IP, shared by all peers,
    /// counted per peer) seen through the peer's view of our external CIDR.
    pub fn map_endpoint(
        &mut self,
        id: &ClusterId,
        ip: Ipv4Addr,
        holder: &Holder,
    ) -> Result<EndpointMapping, Error> {
        if self.config.pod_cidr.contains(&ip) || self.external_cidr.contains(&ip) {
            return Ok(EndpointMapping {
                external_ip: None,
                seen_by_peer: self.local_to_peer(id, ip)?,
            });
        }
        let ext_view = self
            .peer(id)?
            .our_external_view
            .ok_or_else(|| Error::NoPeerView(id.clone()))?;
        let external_ip = match self.endpoints.get(&ip) {
            Some(e) => e.external_ip,
            None => self.next_external_ip(ip)?,
        };
        let e = self.endpoints.entry(ip).or_insert_with(|| Endpoint {
            ip,
            external_ip,
            peers: Default::default(),
        });
        e.peers
            .entry(id.clone())
            .or_default()
            .insert(holder.clone());
        self.external_used.insert(external_ip.into());
        Ok(EndpointMapping {
            external_ip: Some(external_ip),
            seen_by_peer: translate(external_ip, &self.external_cidr, &ext_view),
        })
    }

    /// Drops `holder`'s hold of the mapping of `ip` for peer `id` (or, when it has none, the
    /// unnamed hold of state written before holders: taken by a holder that could not say
    /// so); the external address is released when nobody holds it for any peer.
    pub fn unmap_endpoint(
        &mut self,
        id: &ClusterId,
        ip: Ipv4Addr,
        holder: &Holder,
    ) -> Result<(), Error> {
        self.peer(id)?;
        let e = self
            .endpoints
            .get_mut(&ip)
            .filter(|e| {
                e.peers
                    .get(id)
                    .is_some_and(|h| h.contains(holder) || h.contains(&Holder::default()))
            })
            .ok_or_else(|| Error::IpOutside {
                ip,
                ranges: format!("the endpoints {holder} holds for peer {id}"),
            })?;
        if let Some(holders) = e.peers.get_mut(id) {
            if !holders.remove(holder) {
                holders.remove(&Holder::default());
            }
            if holders.is_empty() {
                e.peers.remove(id);
            }
        }
        if e.peers.is_empty() {
            let ext = e.external_ip;
            self.endpoints.remove(&ip);
            self.external_used.remove(&u32::from(ext));
        }
        Ok(())
    }

    /// The lowest free host address of the external CIDR.
    fn next_external_ip(&self, for_ip: Ipv4Addr) -> Result<Ipv4Addr, Error> {
        let (lo, hi) = (
            u32::from(self.external_cidr.network()) + 1,
            u32::from(self.external_cidr.broadcast()) - 1,
        );
        let mut candidate = lo;
        for used in self.external_used.range(lo..=hi) {
            if *used != candidate {
                break;
            }
            candidate += 1;
        }
        if candidate > hi {
            return Err(Error::PoolExhausted {
                len: 32,
                what: format!("an external address for {for_ip} in {}", self.external_cidr),
            });
        }
        Ok(candidate.into())
    }
}
