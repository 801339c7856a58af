//! The defaults of the optional fields of the gateway's file.

/// Gateway namespace.
pub const NAMESPACE: &str = "liqo-gateway";
/// UDP port.
pub const LISTEN_PORT: u16 = 51840;
/// Tunnel MTU.
pub const MTU: u32 = 1420;
/// Keepalive seconds (as upstream Liqo).
pub const KEEPALIVE: u16 = 10;
/// Busy polling after the last packet (µs).
pub const BUSY_POLL_MICROS: u32 = 0;
/// Private key file.
pub const PRIVATE_KEY_FILE: &str = "/var/lib/liqo-gateway/private.key";
/// veth link between host and gateway namespace (as upstream: 169.254.100.1/.2).
pub const LINK_CIDR: &str = "169.254.100.0/30";
/// Name of the tunnel device in the gateway namespace.
pub const TUN: &str = "liqo.tunnel";
/// veth end in the host namespace.
pub const HOST_LINK: &str = liqo_types::GATEWAY_HOST_LINK;
/// veth end in the gateway namespace.
pub const GATEWAY_LINK: &str = "liqo.gateway";
