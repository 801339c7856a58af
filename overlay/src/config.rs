//! The agent's desired state: the cluster's nodes, which one is the gateway, and the remote
//! ranges, from a YAML file ([`File`], with its [`defaults`]) validated into [`Config`] before
//! anything changes (errors name the field). The file, its validation and the validated values
//! are the wire types of `liqo_overlay_api::config`, shared with those who write the file (the
//! route operator, the lab), and re-exported here where they always were.

pub use liqo_overlay_api::config::{
    Config, ConfigError, File, Node, NodeFile, OVERLAY_RANGE, defaults, unusable_node_address,
};
