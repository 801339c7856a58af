//! The gateway's load tests, their own binary because they measure what other tests running
//! alongside would disturb (root): a cookie-answering flood against the data path and the
//! handshakes (`flood_root`), and each lane on its CPU (`affinity_root`). They run one at a
//! time ([`MACHINE`]); the helpers are the gateway tests' `common`.

#[path = "../gateway/common/mod.rs"]
mod common;

mod affinity_root;
mod flood_root;

/// Held by each test here for its whole run: one measurement at a time (another's bulk
/// transfer would spread a lane's threads or slow the flood's sender).
static MACHINE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
