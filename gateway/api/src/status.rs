//! What the gateway's `/status` returns (JSON, for `liqo-gateway status`, the operators and the
//! lab): the running key, the port's and each peer's counters, where the data path runs, and the
//! reload state (what runs, what was refused, what failed to apply).

use serde::{Deserialize, Serialize};

pub use liqo_types::reload::ReloadStatus;

/// What `/status` returns.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Our public key: the one running now (it changes with a key switch).
    pub public_key: String,
    /// Since when it runs (Unix seconds): the start, or the last key switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_since: Option<u64>,
    /// Key switches since the start.
    #[serde(default)]
    pub key_rotations: u64,
    /// UDP port.
    pub listen_port: u16,
    /// Packets with no peer for their destination.
    pub no_route: u64,
    /// Counters of the WireGuard port: refused datagrams, cookies, handshakes limited.
    #[serde(default)]
    pub wire: WireStatus,
    /// Where the data path runs: lanes, pinned or spread, steering, scheduling class.
    #[serde(default)]
    pub data_path: DataPathStatus,
    /// Peers.
    pub peers: Vec<PeerStatus>,
    /// The config file: what runs, what was refused, what failed to apply.
    pub reload: ReloadStatus,
}

/// One peer as `liqo-gateway status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PeerStatus {
    /// Cluster ID.
    pub id: String,
    /// Public key.
    pub public_key: String,
    /// Current endpoint.
    pub endpoint: Option<String>,
    /// Seconds since the last handshake.
    pub handshake_age_secs: Option<u64>,
    /// Inner packets sent.
    pub tx_packets: u64,
    /// Inner bytes sent.
    pub tx_bytes: u64,
    /// Inner packets received.
    pub rx_packets: u64,
    /// Inner bytes received.
    pub rx_bytes: u64,
    /// Packets of this peer dropped (no endpoint yet, a failed send, an authenticated packet
    /// from outside its allowed IPs).
    pub dropped: u64,
    /// Datagrams naming this peer (its receiver index or its key) that failed authentication or
    /// were replays: anyone can send those, so they are not the peer's doing.
    #[serde(default)]
    pub rejected: u64,
}

/// The counters of the WireGuard port (the gateway's `wg::Wire`), as `liqo-gateway status` shows
/// them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WireStatus {
    /// Datagrams refused before reaching a peer: malformed, bad mac1, unknown receiver index or
    /// key.
    pub invalid: u64,
    /// Cookie replies sent (under load, to handshakes without a valid mac2).
    pub cookies_sent: u64,
    /// Handshake messages handed to the handshake thread.
    pub handshakes_processed: u64,
    /// Handshake messages dropped by the per-source or global rate limit.
    pub handshakes_limited: u64,
    /// Handshake messages dropped because the handshake thread's queue was full.
    pub handshakes_overflow: u64,
}

/// Where the data path runs now, as `liqo-gateway status` shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DataPathStatus {
    /// Lanes: TUN queues and UDP sockets, one per CPU the process may use (at most 16).
    pub lanes: usize,
    /// Whether each lane's threads live on its CPU now (lightly loaded) or use every CPU.
    pub pinned: bool,
    /// Times the threads left their CPUs for every CPU since the start: under load, or packets
    /// waiting for a busy neighbour (the gateway's `wg::affinity`).
    #[serde(default)]
    pub spreads: u64,
    /// Whether packets pick their lane by CPU now (pinned) or by flow.
    pub steered_by_cpu: bool,
    /// Whether the data threads run in the idle scheduling class now (pinned, and no packet
    /// held up for them lately).
    pub idle_class: bool,
    /// Why the idle class is never used, if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_class_refused: Option<String>,
}
