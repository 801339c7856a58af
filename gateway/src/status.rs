//! `/status` (JSON, for `liqo-gateway status`) and `/metrics` (Prometheus) over HTTP.

use std::{fmt::Write as _, sync::Arc};

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};
use serde::{Deserialize, Serialize};

use crate::wg::{Device, PeerStatus};

/// What `/status` returns.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Our public key.
    pub public_key: String,
    /// UDP port.
    pub listen_port: u16,
    /// Packets with no peer for their destination.
    pub no_route: u64,
    /// Peers.
    pub peers: Vec<PeerStatus>,
    /// Why the last configuration change was refused, if it was (the running state is kept).
    pub config_error: Option<String>,
}

/// Shared between the reload loop and the status server.
pub type ConfigError = Arc<std::sync::Mutex<Option<String>>>;

/// The status of `device`.
pub fn status(device: &Device, public_key: String, config_error: &ConfigError) -> Status {
    Status {
        config_error: config_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
        public_key,
        listen_port: device.port().unwrap_or(0),
        no_route: device.no_route.load(std::sync::atomic::Ordering::Relaxed),
        peers: device.status(),
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PeerLabel {
    peer: String,
}

/// Name, help, family and how to read the value from a peer's status.
type PeerMetric = (
    &'static str,
    &'static str,
    Family<PeerLabel, Gauge>,
    fn(&PeerStatus) -> i64,
);

/// Prometheus text for `s`.
pub fn metrics(s: &Status) -> String {
    let mut registry = Registry::with_prefix("liqo_gateway");
    let families: Vec<PeerMetric> = vec![
        (
            "peer_tx_bytes",
            "Inner bytes sent to the peer",
            Family::default(),
            |p| p.tx_bytes as i64,
        ),
        (
            "peer_rx_bytes",
            "Inner bytes received from the peer",
            Family::default(),
            |p| p.rx_bytes as i64,
        ),
        (
            "peer_tx_packets",
            "Inner packets sent to the peer",
            Family::default(),
            |p| p.tx_packets as i64,
        ),
        (
            "peer_rx_packets",
            "Inner packets received from the peer",
            Family::default(),
            |p| p.rx_packets as i64,
        ),
        (
            "peer_dropped_packets",
            "Packets dropped for the peer",
            Family::default(),
            |p| p.dropped as i64,
        ),
        (
            "peer_handshake_age_seconds",
            "Seconds since the last handshake (-1: never)",
            Family::default(),
            |p| p.handshake_age_secs.map_or(-1, |a| a as i64),
        ),
    ];
    for (name, help, family, value) in &families {
        for p in &s.peers {
            family
                .get_or_create(&PeerLabel { peer: p.id.clone() })
                .set(value(p));
        }
        registry.register(*name, *help, family.clone());
    }
    let no_route: Gauge = Gauge::default();
    no_route.set(s.no_route as i64);
    registry.register(
        "no_route_packets",
        "Packets with no peer for their destination",
        no_route,
    );
    let mut out = String::new();
    let _ = encode(&mut out, &registry);
    out
}

/// A table for people.
pub fn render(s: &Status) -> String {
    let mut out = format!(
        "public key {}  listening on UDP {}\n",
        s.public_key, s.listen_port
    );
    if let Some(e) = &s.config_error {
        let _ = writeln!(
            out,
            "last configuration change REFUSED (running state kept): {e}"
        );
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "{:<16} {:<22} {:>10} {:>12} {:>12} {:>10} {:>10} {:>8}",
        "PEER", "ENDPOINT", "HANDSHAKE", "TX BYTES", "RX BYTES", "TX PKTS", "RX PKTS", "DROPPED"
    );
    for p in &s.peers {
        let hs = p
            .handshake_age_secs
            .map_or("never".into(), |a| format!("{a}s ago"));
        let _ = writeln!(
            out,
            "{:<16} {:<22} {:>10} {:>12} {:>12} {:>10} {:>10} {:>8}",
            p.id,
            p.endpoint.as_deref().unwrap_or("(unknown)"),
            hs,
            p.tx_bytes,
            p.rx_bytes,
            p.tx_packets,
            p.rx_packets,
            p.dropped
        );
    }
    out
}

/// Serves `/status` and `/metrics` until the runtime stops.
pub async fn serve(
    listener: tokio::net::TcpListener,
    device: Arc<Device>,
    public_key: String,
    config_error: ConfigError,
) -> std::io::Result<()> {
    let (d1, k1, d2, k2) = (Arc::clone(&device), public_key.clone(), device, public_key);
    let (e1, e2) = (Arc::clone(&config_error), config_error);
    let app = axum::Router::new()
        .route(
            "/status",
            axum::routing::get(move || async move {
                serde_json::to_string(&status(&d1, k1.clone(), &e1)).unwrap_or_default()
            }),
        )
        .route(
            "/metrics",
            axum::routing::get(move || async move { metrics(&status(&d2, k2.clone(), &e2)) }),
        );
    axum::serve(listener, app).await
}
