//! The WireGuard data path: boringtun's `noise::Tunn` per peer, driven by our own I/O loop.
//!
//! Four threads: TUN -> encrypt -> UDP ([`tx`]), UDP -> decrypt -> TUN ([`rx`], which also
//! admits handshake messages: [`guard`]), the key exchanges ([`handshake`]) and the timers
//! (handshake retries, keepalives, session expiry: [`timers`]). The peer table is swapped whole
//! on reconfiguration; peers whose identity did not change keep their session. Lightly loaded,
//! the two data threads share one CPU ([`affinity`]).

mod affinity;
mod device;
pub mod guard;
mod handshake;
pub mod offload;
pub mod peers;
mod poller;
mod rx;
mod steering;
mod timers;
mod tx;

pub use affinity::{cpus_allowed, lanes_for};
pub use device::{Device, PeerStatus, Wire, WireStatus};
