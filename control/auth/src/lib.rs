//! The identity side of peering (skeleton; see the crate description).
