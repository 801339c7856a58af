//! Why the gateway could not start or apply a change.

use dataplane::{nft, sysctl, tun};
use liqo_daemon::RollbackFailed;

use crate::{config::ConfigError, keys::KeyFileError};

/// Why the gateway could not start or apply a change.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The configuration is refused (nothing was changed).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The private key file.
    #[error(transparent)]
    Key(#[from] KeyFileError),
    /// A kernel request failed.
    #[error(transparent)]
    Netlink(#[from] dataplane::netlink::Error),
    /// The namespace.
    #[error(transparent)]
    Netns(#[from] dataplane::netns::Error),
    /// nftables.
    #[error(transparent)]
    Nft(#[from] nft::Error),
    /// The TUN device.
    #[error(transparent)]
    Tun(#[from] tun::Error),
    /// A sysctl.
    #[error(transparent)]
    Sysctl(#[from] sysctl::Error),
    /// A change (or the start) failed, and undoing it failed too.
    #[error(transparent)]
    Rollback(#[from] RollbackFailed),
    /// The UDP sockets of the WireGuard port (one per lane).
    #[error(transparent)]
    Port(#[from] dataplane::steer::Error),
    /// The UDP socket.
    #[error("binding UDP port {port}")]
    Bind {
        /// The port.
        port: u16,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
