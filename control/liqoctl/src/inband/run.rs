//! The I/O of `peer in-band` ([`peer()`]) and `unpeer in-band` ([`unpeer()`]) (the order is
//! in the parent module's doc), and what both share (`common`).

mod common;
mod peer;
mod unpeer;

pub use common::Side;
pub use peer::peer;
pub use unpeer::unpeer;
