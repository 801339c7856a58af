//! The dataplane crate's integration tests, one binary (root: the real kernel): namespaces
//! (`netns_root`), netlink requests (`netlink_root`) and batches (`batch_root`), nftables rulesets
//! (`nft_root`), sessions (`nft_session_root`) and endpoint maps (`nft_endpoint_maps_root`), TUN
//! steering (`steer_root`). Shared helpers in `common`.

mod common;

mod batch_root;
mod netlink_root;
mod netns_root;
mod nft_endpoint_maps_root;
mod nft_root;
mod nft_session_root;
mod steer_root;
