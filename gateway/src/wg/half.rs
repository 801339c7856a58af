//! The two halves of a lane's data path: which one ([`Half`]), what one attempt at it did
//! ([`Step`]), and the buffers each owns ([`TxState`], [`RxState`]), held by whichever thread
//! runs the half.

use super::{
    batches::{BATCH_BYTES, Batches},
    offload::{Coalescer, MAX_PACKET, VNET_HDR_LEN},
    tuning::BUF,
};

/// What one attempt at a half did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Handled a packet or a batch (or an interrupted call: try again).
    Worked,
    /// Nothing was waiting.
    Empty,
    /// The descriptor failed; the half stops (logged where it failed).
    Failed,
}

/// One half of the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Half {
    /// TUN -> encrypt -> UDP.
    Tx,
    /// UDP -> decrypt -> TUN.
    Rx,
}

impl Half {
    /// Its index among a lane's two threads.
    pub(super) fn index(self) -> usize {
        match self {
            Half::Tx => 0,
            Half::Rx => 1,
        }
    }

    /// The lane's other half.
    pub(super) fn other(self) -> Half {
        match self {
            Half::Tx => Half::Rx,
            Half::Rx => Half::Tx,
        }
    }
}

/// The buffers of the send half (one packet in, one GSO batch out).
pub(super) struct TxState {
    pub(super) buf: Vec<u8>,
    pub(super) out: Vec<u8>,
    pub(super) batches: Batches,
}

impl Default for TxState {
    fn default() -> Self {
        TxState {
            buf: vec![0u8; VNET_HDR_LEN + MAX_PACKET],
            // Every segment of the largest packet, encrypted, fits without a send in between.
            out: vec![0u8; 2 * (BATCH_BYTES + 2048)],
            batches: Batches::default(),
        }
    }
}

/// The buffers of the receive half.
pub(super) struct RxState {
    pub(super) buf: Vec<u8>,
    pub(super) out: Vec<u8>,
    pub(super) coalescer: Coalescer,
    pub(super) cmsg: Vec<u8>,
}

impl Default for RxState {
    fn default() -> Self {
        RxState {
            buf: vec![0u8; BUF],
            out: vec![0u8; BUF],
            coalescer: Coalescer::default(),
            cmsg: nix::cmsg_space!(i32, nix::sys::time::TimeSpec),
        }
    }
}
