//! The IPAM as the peering needs it, as single-side steps: each side remaps the other's ranges
//! (how it sees the peer) and records the peer's decision (how the peer sees it). A controller
//! that owns only one side runs its half: [`decide`], then, once the peer answered, [`record`].
//!
//! [`Ipam`] is implemented for the in-memory [`::ipam::Ipam`] here and for the typed gRPC
//! client of `liqo-ipam` in [`crate::grpc`].

use std::future::Future;

use liqo_types::{Cidr, ClusterId, PeerView};

/// A pod CIDR and an external CIDR: what a cluster announces, or where they appear elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ranges {
    /// Pods.
    pub pods: Cidr,
    /// External CIDR.
    pub external: Cidr,
}

/// What an IPAM holds for one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpamPeer {
    /// What the peer announced.
    pub announced: Ranges,
    /// Where its ranges appear here.
    pub seen_here: Ranges,
    /// Where our ranges appear at the peer (its decision), once recorded.
    pub seen_there: Option<Ranges>,
}

/// The IPAM operations the peering uses.
pub trait Ipam: Send {
    /// Why an operation failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The local external CIDR in use (the one announced to peers).
    fn external_cidr(&mut self) -> impl Future<Output = Result<Cidr, Self::Error>> + Send;

    /// What is held for `peer`, if anything.
    fn peer(
        &mut self,
        peer: &ClusterId,
    ) -> impl Future<Output = Result<Option<IpamPeer>, Self::Error>> + Send;

    /// Decides where `peer`'s announced ranges appear here (idempotent for the same ranges).
    fn remap(
        &mut self,
        peer: &ClusterId,
        announced: Ranges,
    ) -> impl Future<Output = Result<Ranges, Self::Error>> + Send;

    /// Records where our ranges appear at `peer` (its decision).
    fn set_peer_view(
        &mut self,
        peer: &ClusterId,
        seen_there: Ranges,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Frees exactly `peer`'s ranges.
    fn release(&mut self, peer: &ClusterId)
    -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// What [`decide`] did on one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    /// Where the peer's ranges appear on this side.
    pub seen_here: Ranges,
    /// What this side held for the peer before (`None`: the ranges were acquired now).
    pub before: Option<IpamPeer>,
}

/// What a cluster announces to a peer: its pod CIDR and its IPAM's external CIDR.
pub async fn announce<I: Ipam>(ipam: &mut I, pod_cidr: Cidr) -> Result<Ranges, I::Error> {
    Ok(Ranges {
        pods: pod_cidr,
        external: ipam.external_cidr().await?,
    })
}

/// Step 1 on one side: where `peer`'s announced ranges appear here.
pub async fn decide<I: Ipam>(
    ipam: &mut I,
    peer: &ClusterId,
    announced: Ranges,
) -> Result<Decided, I::Error> {
    let before = ipam.peer(peer).await?;
    let seen_here = ipam.remap(peer, announced).await?;
    Ok(Decided { seen_here, before })
}

/// Step 2 on one side: records where the peer shows our ranges (its step 1), and returns this
/// side's view of the peering.
pub async fn record<I: Ipam>(
    ipam: &mut I,
    peer: &ClusterId,
    seen_here: Ranges,
    seen_there: Ranges,
) -> Result<PeerView, I::Error> {
    ipam.set_peer_view(peer, seen_there).await?;
    Ok(view(seen_here, seen_there))
}

/// The view of a side that shows the peer at `seen_here` and is shown at `seen_there`.
pub fn view(seen_here: Ranges, seen_there: Ranges) -> PeerView {
    PeerView {
        remote_pods: seen_here.pods,
        remote_external: seen_here.external,
        local_pods_at_peer: seen_there.pods,
        local_external_at_peer: seen_there.external,
    }
}

/// Puts one side's entry for `peer` back to `before` (what [`decide`] found): releases ranges
/// acquired in this attempt, or restores the recorded view of the peer.
pub async fn restore<I: Ipam>(
    ipam: &mut I,
    peer: &ClusterId,
    before: Option<IpamPeer>,
) -> Result<(), I::Error> {
    match before {
        None => {
            if ipam.peer(peer).await?.is_some() {
                ipam.release(peer).await?;
            }
        }
        Some(p) => {
            if let Some(v) = p.seen_there {
                ipam.set_peer_view(peer, v).await?;
            }
        }
    }
    Ok(())
}

/// A range from the IPAM (which holds none with host bits).
fn cidr(n: ipnet::Ipv4Net) -> Cidr {
    Cidr::new(n).expect("the IPAM holds no host bits")
}

fn ranges(pods: ipnet::Ipv4Net, external: ipnet::Ipv4Net) -> Ranges {
    Ranges {
        pods: cidr(pods),
        external: cidr(external),
    }
}

impl From<&::ipam::Peer> for IpamPeer {
    fn from(p: &::ipam::Peer) -> IpamPeer {
        IpamPeer {
            announced: ranges(p.pod_cidr, p.external_cidr),
            seen_here: ranges(p.pod_view, p.external_view),
            seen_there: p
                .our_pod_view
                .zip(p.our_external_view)
                .map(|(a, b)| ranges(a, b)),
        }
    }
}

/// The in-memory IPAM (tests, and whoever embeds it).
impl Ipam for ::ipam::Ipam {
    type Error = ::ipam::Error;

    async fn external_cidr(&mut self) -> Result<Cidr, ::ipam::Error> {
        Ok(cidr(::ipam::Ipam::external_cidr(self)))
    }

    async fn peer(&mut self, peer: &ClusterId) -> Result<Option<IpamPeer>, ::ipam::Error> {
        Ok(::ipam::Ipam::peer(self, peer).ok().map(IpamPeer::from))
    }

    async fn remap(&mut self, peer: &ClusterId, a: Ranges) -> Result<Ranges, ::ipam::Error> {
        let (p, e) = self.acquire(peer, a.pods.net(), a.external.net())?;
        Ok(ranges(p, e))
    }

    async fn set_peer_view(&mut self, peer: &ClusterId, v: Ranges) -> Result<(), ::ipam::Error> {
        ::ipam::Ipam::set_peer_view(self, peer, v.pods.net(), v.external.net())
    }

    async fn release(&mut self, peer: &ClusterId) -> Result<(), ::ipam::Error> {
        ::ipam::Ipam::release(self, peer).map(drop)
    }
}
