//! The WireGuard data path: boringtun's `noise::Tunn` per peer, driven by our own I/O loop.
//!
//! Three threads: TUN -> encrypt -> UDP, UDP -> decrypt -> TUN (plus handshake answers), and the
//! timers (handshake retries, keepalives, session expiry). The peer table is swapped whole on
//! reconfiguration; peers whose identity did not change keep their session.

mod device;
pub mod offload;
pub mod peers;

pub use device::{Device, PeerStatus};
