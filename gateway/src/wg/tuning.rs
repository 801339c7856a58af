//! The tuning constants of the WireGuard data path, read by its threads: how long they block
//! before checking for shutdown, their buffers, the handshake queue's bound and the placement
//! thread's tick. Nothing here reads anything else of the data path.

use std::time::Duration;

/// How long blocking calls wait before checking for shutdown.
pub(super) const TICK: Duration = Duration::from_millis(200);
/// First handshake initiations sent per apply, and then per timer tick (100 ms): a hub that
/// gains a thousand peers calls them over two seconds, not in one burst.
pub(super) const INITIATIONS_PER_TICK: usize = 50;
/// UDP socket buffer size (bytes).
pub(super) const SOCKET_BUFFER: usize = 2 << 20;
/// Largest datagram or packet handled.
pub(super) const BUF: usize = 65_536;
/// Handshakes per second all sources together may start (each costs ~100 µs of one core).
pub const GLOBAL_RATE: u64 = 2_000;
/// Handshake messages waiting at most for the handshake thread (a second of the global rate).
pub(super) const QUEUE: usize = GLOBAL_RATE as usize;
/// How often the placement thread measures the data threads and decides.
pub(super) const PLACEMENT_TICK: Duration = Duration::from_millis(20);
