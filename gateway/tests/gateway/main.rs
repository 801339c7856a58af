//! The gateway's integration tests, one binary (root: real namespaces, TUN, UDP and packets;
//! WireGuard checked against wireguard-go): config checks (`check_config`), the data path
//! (`gateway_root`, `interop_root`), NAT (`nat_root`), endpoints (`endpoint_root`), reload
//! (`reload_root`), resync (`resync_root`), idle peers (`idle_peers_root`), garbage
//! (`garbage_root`), key rotation (`rotation_root`). Shared helpers in `common`. The tests that
//! measure rates and CPU placement are in `tests/gateway_load/` (their own binary: they need
//! the machine's CPUs to themselves).

mod common;

mod check_config;
mod endpoint_root;
mod garbage_root;
mod gateway_root;
mod idle_peers_root;
mod interop_root;
mod nat_root;
mod reload_root;
mod resync_root;
mod rotation_root;
