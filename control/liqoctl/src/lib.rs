//! liqoctl (skeleton; see the crate description).
