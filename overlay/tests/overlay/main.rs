//! The overlay crate's integration tests, one binary (root: real namespaces, VXLAN and packets):
//! the agent (`overlay_root`) and its recovery after a crash or a hand edit
//! (`overlay_recovery_root`). Shared helpers in `common`.

mod common;

mod overlay_recovery_root;
mod overlay_root;
