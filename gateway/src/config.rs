//! The gateway's desired state: a YAML file ([`File`], with its [`defaults`]), validated into
//! [`Config`] before anything changes. The file, its validation and the validated values are
//! the wire types of `liqo_gateway_api::config`, shared with those who write the file (the
//! gateway operator, the lab), and re-exported here where they always were.

pub use liqo_gateway_api::config::{
    Config, ConfigError, Endpoint, EndpointMapping, File, Peer, PeerFile, defaults,
};
