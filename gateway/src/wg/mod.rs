//! The WireGuard data path: boringtun's `noise::Tunn` per peer, driven by our own I/O loop.
//!
//! Per lane (one per CPU: a TUN queue and a UDP socket), two threads: TUN -> encrypt -> UDP
//! ([`tx`]) and UDP -> decrypt -> TUN ([`rx`], which also admits handshake messages:
//! [`guard`]); then one thread for the key exchanges ([`handshake`]) and one for the timers
//! (handshake retries, keepalives, session expiry: [`timers`]), and one that places the data
//! threads ([`affinity`], [`idleclass`], [`steering`]). The peer table is swapped whole on
//! reconfiguration; peers whose identity did not change keep their session. Our own key lives in
//! the table ([`Identity`]): a new key is switched to live by the same swap, every session made
//! anew with it. Lightly loaded, a packet is read on the CPU that sent or received it, by a thread
//! in the idle scheduling class so that the application it wakes stays on that CPU.

mod affinity;
mod device;
pub mod guard;
mod handshake;
mod identity;
mod idleclass;
mod lanes;
pub mod offload;
pub mod peers;
mod poller;
mod rx;
mod steering;
mod timers;
mod tx;

pub use device::{Device, PeerStatus, Wire, WireStatus};
pub use identity::Identity;
pub use lanes::{DataPathStatus, cpus_allowed, lanes_for};
