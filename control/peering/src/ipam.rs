//! The IPAM as the peering needs it, as single-side steps: each side remaps the other's ranges
//! (how it sees the peer) and records the peer's decision (how the peer sees it). A controller
//! that owns only one side runs its half: it reads what it holds for the peer ([`Ipam::peer`])
//! and keeps it as its undo, then [`decide`], then, once the peer answered, [`record`]; on a
//! failure, [`restore`] puts back what it read (idempotent, so also after a call the IPAM
//! carried out but whose answer was lost).
//!
//! [`Ipam`] is implemented for the in-memory [`::ipam::Ipam`] here and for the typed gRPC
//! client of `liqo-ipam` in [`crate::grpc`].

use std::future::Future;

use liqo_types::{Cidr, ClusterId, PeerView};

use crate::error::Step;

pub use liqo_types::view::{IpamPeer, Ranges};

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

    /// Forgets where our ranges appear at `peer` (undoing the first [`Ipam::set_peer_view`]).
    /// `Ok(false)`: this IPAM has no way to (an IPAM without such a call);
    /// [`restore`] reports it.
    fn clear_peer_view(
        &mut self,
        peer: &ClusterId,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// Frees exactly `peer`'s ranges.
    fn release(&mut self, peer: &ClusterId)
    -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Why [`restore`] could not put a side's entry back.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError<E: std::error::Error + 'static> {
    /// An IPAM call failed.
    #[error("{step}")]
    Call {
        /// The call.
        step: Step,
        /// Why.
        #[source]
        source: E,
    },
    /// The peer's view of us was recorded in this attempt and this IPAM cannot forget it.
    #[error(
        "this IPAM cannot forget how {peer} sees us: \
         it stays recorded as {} and {}",
        left.pods,
        left.external
    )]
    CannotClearView {
        /// The peer.
        peer: ClusterId,
        /// What stays recorded.
        left: Ranges,
    },
    /// The peer's ranges, released meanwhile, came back elsewhere.
    #[error(
        "{peer}'s ranges came back as {} and {} instead of {} and {}",
        got.pods,
        got.external,
        wanted.pods,
        wanted.external
    )]
    Moved {
        /// The peer.
        peer: ClusterId,
        /// Where they are now.
        got: Ranges,
        /// Where they were.
        wanted: Ranges,
    },
}

impl<E: std::error::Error + 'static> RestoreError<E> {
    /// The step that failed.
    pub fn step(&self) -> Step {
        match self {
            RestoreError::Call { step, .. } => step.clone(),
            RestoreError::CannotClearView { peer, .. } => Step::ClearPeerView(peer.clone()),
            RestoreError::Moved { peer, .. } => Step::Reacquire(peer.clone()),
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> RestoreError<E> {
    /// The failed step on `cluster`, with the IPAM's error as the cause when it is one.
    pub(crate) fn on(self, cluster: &ClusterId) -> crate::error::StepError {
        match self {
            RestoreError::Call { step, source } => crate::error::at(step, cluster)(source),
            other => crate::error::at(other.step(), cluster)(other),
        }
    }
}

fn failed<E: std::error::Error + 'static>(step: Step) -> impl FnOnce(E) -> RestoreError<E> {
    move |source| RestoreError::Call { step, source }
}

/// What a cluster announces to a peer: its pod CIDR and its IPAM's external CIDR.
pub async fn announce<I: Ipam>(ipam: &mut I, pod_cidr: Cidr) -> Result<Ranges, I::Error> {
    Ok(Ranges {
        pods: pod_cidr,
        external: ipam.external_cidr().await?,
    })
}

/// Step 1 on one side: where `peer`'s announced ranges appear here (idempotent). Read what the
/// side held before ([`Ipam::peer`]) and keep it as the undo first: a remap the IPAM carried out
/// but whose answer was lost (a deadline, a broken connection) leaves ranges held, which
/// [`restore`] releases.
pub async fn decide<I: Ipam>(
    ipam: &mut I,
    peer: &ClusterId,
    announced: Ranges,
) -> Result<Ranges, I::Error> {
    ipam.remap(peer, announced).await
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

/// The view of a side that shows the peer at `seen_here` and is shown at `seen_there`
/// ([`PeerView::of`]).
pub fn view(seen_here: Ranges, seen_there: Ranges) -> PeerView {
    PeerView::of(seen_here, seen_there)
}

/// Puts one side's entry for `peer` back to `before` (what the side held before [`decide`]):
/// releases ranges held since, acquires released ranges again, and puts back the recorded view
/// of the peer (or forgets one recorded since). Idempotent: it compares with what is held now,
/// so it may run whether or not the steps it undoes took effect.
pub async fn restore<I: Ipam>(
    ipam: &mut I,
    peer: &ClusterId,
    before: Option<IpamPeer>,
) -> Result<(), RestoreError<I::Error>> {
    let now = ipam
        .peer(peer)
        .await
        .map_err(failed(Step::ReadIpam(peer.clone())))?;
    let Some(before) = before else {
        if now.is_some() {
            ipam.release(peer)
                .await
                .map_err(failed(Step::Release(peer.clone())))?;
        }
        return Ok(());
    };
    let seen_there = match now {
        Some(now) => now.seen_there,
        None => {
            let got = ipam
                .remap(peer, before.announced)
                .await
                .map_err(failed(Step::Reacquire(peer.clone())))?;
            if got != before.seen_here {
                return Err(RestoreError::Moved {
                    peer: peer.clone(),
                    got,
                    wanted: before.seen_here,
                });
            }
            None
        }
    };
    match (before.seen_there, seen_there) {
        (Some(v), n) if n != Some(v) => ipam
            .set_peer_view(peer, v)
            .await
            .map_err(failed(Step::SetPeerView(peer.clone()))),
        (None, Some(left)) => {
            let cleared = ipam
                .clear_peer_view(peer)
                .await
                .map_err(failed(Step::ClearPeerView(peer.clone())))?;
            if cleared {
                Ok(())
            } else {
                Err(RestoreError::CannotClearView {
                    peer: peer.clone(),
                    left,
                })
            }
        }
        // The view recorded then is the one recorded now.
        _ => Ok(()),
    }
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

/// What the in-memory IPAM holds for a peer, as the peering reads it.
fn held(p: &::ipam::Peer) -> IpamPeer {
    IpamPeer {
        announced: ranges(p.pod_cidr, p.external_cidr),
        seen_here: ranges(p.pod_view, p.external_view),
        seen_there: p
            .our_pod_view
            .zip(p.our_external_view)
            .map(|(a, b)| ranges(a, b)),
    }
}

/// The in-memory IPAM (tests, and whoever embeds it).
impl Ipam for ::ipam::Ipam {
    type Error = ::ipam::Error;

    async fn external_cidr(&mut self) -> Result<Cidr, ::ipam::Error> {
        Ok(cidr(::ipam::Ipam::external_cidr(self)))
    }

    async fn peer(&mut self, peer: &ClusterId) -> Result<Option<IpamPeer>, ::ipam::Error> {
        Ok(::ipam::Ipam::peer(self, peer).ok().map(held))
    }

    async fn remap(&mut self, peer: &ClusterId, a: Ranges) -> Result<Ranges, ::ipam::Error> {
        let (p, e) = self.acquire(peer, a.pods.net(), a.external.net())?;
        Ok(ranges(p, e))
    }

    async fn set_peer_view(&mut self, peer: &ClusterId, v: Ranges) -> Result<(), ::ipam::Error> {
        ::ipam::Ipam::set_peer_view(self, peer, v.pods.net(), v.external.net())
    }

    async fn clear_peer_view(&mut self, peer: &ClusterId) -> Result<bool, ::ipam::Error> {
        ::ipam::Ipam::clear_peer_view(self, peer).map(|()| true)
    }

    async fn release(&mut self, peer: &ClusterId) -> Result<(), ::ipam::Error> {
        ::ipam::Ipam::release(self, peer).map(drop)
    }
}
