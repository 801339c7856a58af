//! What the overlay agent's `/status` returns (JSON, for `liqo-overlay status`, the route
//! operator and the lab): the configuration in force and the reload state (what runs, what was
//! refused, what failed to apply).

use serde::{Deserialize, Serialize};

pub use liqo_types::reload::ReloadStatus;

use crate::config::Config;

/// What `/status` returns.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// This node.
    pub node: String,
    /// Its overlay address.
    pub overlay_ip: String,
    /// The gateway node it routes through (or is).
    pub gateway: String,
    /// Nodes known.
    pub nodes: Vec<String>,
    /// Remote ranges routed.
    #[serde(rename = "remoteCIDRs")]
    pub remote_cidrs: Vec<String>,
    /// The config file: what runs, what was refused, what failed to apply.
    pub reload: ReloadStatus,
}

impl Status {
    /// The status of an agent running `cfg`.
    pub fn new(cfg: &Config, reload: ReloadStatus) -> Status {
        Status {
            node: cfg.me.clone(),
            overlay_ip: cfg.me().overlay_ip().to_string(),
            gateway: cfg.gateway.clone(),
            nodes: cfg.nodes.keys().cloned().collect(),
            remote_cidrs: cfg.remote_cidrs.iter().map(ToString::to_string).collect(),
            reload,
        }
    }
}
