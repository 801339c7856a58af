//! The peering controllers (skeleton; see the crate description).
