//! The WireGuard data path: boringtun's `noise::Tunn` per peer, driven by our own I/O loop.
//!
//! Per lane (one per CPU: a TUN queue and a UDP socket), two threads: TUN -> encrypt -> UDP
//! ([`tx`]) and UDP -> decrypt -> TUN ([`rx`], which also admits handshake messages:
//! [`guard`]); then one thread for the key exchanges ([`handshake`]) and one for the timers
//! (handshake retries, keepalives, session expiry: [`timers`]), and one that places the data
//! threads ([`placement`]: [`affinity`], [`idleclass`], [`steering`]). The peer table is swapped whole on
//! reconfiguration; peers whose identity did not change keep their session. Our own key lives in
//! the table ([`Identity`]): a new key is switched to live by the same swap, every session made
//! anew with it. Lightly loaded, a packet is read on the CPU that sent or received it, by a thread
//! in the idle scheduling class so that the application it wakes stays on that CPU.
//!
//! Bottom up: the tuning constants the threads read ([`tuning`]) and the parts they work with
//! (peers, guard, offload, lanes and each half's buffers, the handshake queue, the placement and
//! the steering); the device's state ([`state`]), which every thread reads; each thread's work
//! as `impl Device` in its own module ([`tx`], [`rx`], [`handshake`], [`timers`], [`poller`],
//! [`placement`]); and [`device`] on top, which builds a device and starts its threads.

mod affinity;
mod batches;
mod device;
pub mod guard;
mod half;
mod handshake;
mod identity;
mod idleclass;
mod lanes;
pub mod offload;
pub mod peers;
mod placement;
mod poller;
mod queue;
mod rx;
mod state;
mod steering;
mod timers;
mod tuning;
mod tx;

pub use identity::Identity;
pub use lanes::{cpus_allowed, lanes_for};
pub use liqo_gateway_api::status::{DataPathStatus, PeerStatus, WireStatus};
pub use state::{Device, Wire};
