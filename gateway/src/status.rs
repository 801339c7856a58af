//! What `/status` (JSON, for `liqo-gateway status` and the lab) and `/metrics` (Prometheus)
//! report: the peers and the reload state (what runs, what was refused, what failed to apply).
//! The document is `liqo_gateway_api::status` (re-exported here); this module fills it from a
//! running device and renders it. The server itself is `liqo_daemon::server`.

use std::time::UNIX_EPOCH;

use liqo_gateway_api::status::{DataPathStatus, PeerStatus};
pub use liqo_gateway_api::status::{ReloadStatus, Status};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use crate::wg::Device;

/// The status of `device`.
pub fn status(device: &Device, reload: ReloadStatus) -> Status {
    let own = device.identity();
    Status {
        public_key: own.public().to_string(),
        key_since: own
            .since()
            .duration_since(UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs()),
        key_rotations: own.rotations(),
        listen_port: device.port().unwrap_or(0),
        no_route: device.no_route.load(std::sync::atomic::Ordering::Relaxed),
        wire: device.wire_status(),
        data_path: device.data_path_status(),
        peers: device.status(),
        reload,
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

fn gauge(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The metrics of `s` (prefix `liqo_gateway`).
pub fn metrics(s: &Status) -> Registry {
    let mut registry = Registry::with_prefix("liqo_gateway");
    let families: Vec<PeerMetric> = vec![
        (
            "peer_tx_bytes",
            "Inner bytes sent to the peer",
            Family::default(),
            |p| gauge(p.tx_bytes),
        ),
        (
            "peer_rx_bytes",
            "Inner bytes received from the peer",
            Family::default(),
            |p| gauge(p.rx_bytes),
        ),
        (
            "peer_tx_packets",
            "Inner packets sent to the peer",
            Family::default(),
            |p| gauge(p.tx_packets),
        ),
        (
            "peer_rx_packets",
            "Inner packets received from the peer",
            Family::default(),
            |p| gauge(p.rx_packets),
        ),
        (
            "peer_dropped_packets",
            "Packets dropped for the peer",
            Family::default(),
            |p| gauge(p.dropped),
        ),
        (
            "peer_rejected_datagrams",
            "Datagrams naming the peer that failed authentication or were replays",
            Family::default(),
            |p| gauge(p.rejected),
        ),
        (
            "peer_handshake_age_seconds",
            "Seconds since the last handshake (-1: never)",
            Family::default(),
            |p| p.handshake_age_secs.map_or(-1, gauge),
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
    no_route.set(gauge(s.no_route));
    registry.register(
        "no_route_packets",
        "Packets with no peer for their destination",
        no_route,
    );
    let w = &s.wire;
    let d = &s.data_path;
    for (name, help, value) in [
        (
            "data_lanes",
            "Lanes of the data path (TUN queues and UDP sockets)",
            u64::try_from(d.lanes).unwrap_or(u64::MAX),
        ),
        (
            "data_pinned",
            "1 while each lane's threads live on its CPU (lightly loaded), 0 while spread",
            u64::from(d.pinned),
        ),
        (
            "data_idle_class",
            "1 while the data threads run in the idle scheduling class",
            u64::from(d.idle_class),
        ),
        (
            "invalid_datagrams",
            "Datagrams refused before reaching a peer (malformed, bad mac1, unknown index or key)",
            w.invalid,
        ),
        (
            "cookie_replies",
            "Cookie replies sent to handshakes without a valid mac2 under load",
            w.cookies_sent,
        ),
        (
            "handshakes_processed",
            "Handshake messages handed to the handshake thread",
            w.handshakes_processed,
        ),
        (
            "handshakes_limited",
            "Handshake messages dropped by the per-source or global rate limit",
            w.handshakes_limited,
        ),
        (
            "handshakes_overflow",
            "Handshake messages dropped because the handshake queue was full",
            w.handshakes_overflow,
        ),
    ] {
        let g: Gauge = Gauge::default();
        g.set(gauge(value));
        registry.register(name, help, g);
    }
    for (name, help, value) in [
        (
            "key_rotations",
            "Switches of the gateway's WireGuard key since its start",
            s.key_rotations,
        ),
        (
            "data_spreads",
            "Times the data threads left their CPUs for every CPU (load, or a busy neighbour)",
            d.spreads,
        ),
    ] {
        let c: Counter = Counter::default();
        c.inc_by(value);
        registry.register(name, help, c);
    }
    liqo_daemon::status::register_metrics(&s.reload, &mut registry);
    registry
}

/// One line: lanes, where their threads run, how packets pick a lane, the scheduling class.
fn render_data_path(d: &DataPathStatus) -> String {
    let class = match (&d.idle_class_refused, d.idle_class) {
        (Some(why), _) => format!("normal class (idle class refused: {why})"),
        (None, true) => "idle class".to_owned(),
        (None, false) => "normal class".to_owned(),
    };
    format!(
        "data path: {} lane{}, {}, steered by {}, {class}\n",
        d.lanes,
        if d.lanes == 1 { "" } else { "s" },
        if d.pinned {
            "pinned to their CPUs"
        } else {
            "spread over every CPU"
        },
        if d.steered_by_cpu { "CPU" } else { "flow" },
    )
}

/// A table for people: the gateway, its config file (what runs, refused, failed), the peers.
pub fn render(s: &Status) -> String {
    let rotated = match s.key_rotations {
        0 => String::new(),
        1 => "  (key switched once)".to_owned(),
        n => format!("  (key switched {n} times)"),
    };
    let mut out = format!(
        "public key {}{rotated}  listening on UDP {}\n{}\n",
        s.public_key,
        s.listen_port,
        s.reload.render()
    );
    let w = &s.wire;
    out.push_str(&format!(
        "wire: {} invalid, {} cookie replies, handshakes {} processed, {} rate-limited, {} queue full\n",
        w.invalid, w.cookies_sent, w.handshakes_processed, w.handshakes_limited, w.handshakes_overflow
    ));
    out.push_str(&render_data_path(&s.data_path));
    out.push_str(&format!(
        "{:<16} {:<22} {:>10} {:>12} {:>12} {:>10} {:>10} {:>8} {:>8}\n",
        "PEER",
        "ENDPOINT",
        "HANDSHAKE",
        "TX BYTES",
        "RX BYTES",
        "TX PKTS",
        "RX PKTS",
        "DROPPED",
        "REJECTED"
    ));
    for p in &s.peers {
        let hs = p
            .handshake_age_secs
            .map_or("never".into(), |a| format!("{a}s ago"));
        out.push_str(&format!(
            "{:<16} {:<22} {:>10} {:>12} {:>12} {:>10} {:>10} {:>8} {:>8}\n",
            p.id,
            p.endpoint.as_deref().unwrap_or("(unknown)"),
            hs,
            p.tx_bytes,
            p.rx_bytes,
            p.tx_packets,
            p.rx_packets,
            p.dropped,
            p.rejected
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use liqo_daemon::status::{Applied, Failed, Refused};
    use prometheus_client::encoding::text::encode;

    use liqo_gateway_api::status::WireStatus;

    use super::*;

    fn sample() -> Status {
        Status {
            public_key: "k".into(),
            key_since: Some(1_700_000_000),
            key_rotations: 2,
            listen_port: 51840,
            no_route: 3,
            wire: WireStatus {
                handshakes_limited: 7,
                ..WireStatus::default()
            },
            data_path: DataPathStatus {
                lanes: 2,
                pinned: true,
                spreads: 3,
                steered_by_cpu: true,
                idle_class: false,
                idle_class_refused: Some("Operation not permitted".into()),
            },
            peers: Vec::new(),
            reload: ReloadStatus {
                source: "/etc/liqo/gateway.yaml".into(),
                applied: Some(Applied {
                    digest: "0123456789abcdef".into(),
                    count: 4,
                    micros: 0,
                }),
                refused: Some(Refused {
                    digest: "fedcba9876543210".into(),
                    field: "peers[1].remotePodCIDR".into(),
                    problem: "overlaps peers[0].remotePodCIDR".into(),
                }),
                apply_error: Some(Failed {
                    digest: "fedcba9876543211".into(),
                    error: "RTNETLINK: Network is unreachable".into(),
                    attempts: 2,
                }),
                read_error: None,
            },
        }
    }

    #[test]
    fn status_round_trips_with_the_reload_block() {
        let s = sample();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["reload"]["refused"]["field"], "peers[1].remotePodCIDR");
        assert_eq!(v["reload"]["applyError"]["attempts"], 2);
        assert_eq!(v["reload"]["applied"]["digest"], "0123456789abcdef");
        assert!(v.get("configError").is_none(), "{v}");
        assert_eq!(v["wire"]["handshakesLimited"], 7);
        assert_eq!(v["dataPath"]["steeredByCpu"], true);
        assert_eq!(v["dataPath"]["spreads"], 3);
        assert_eq!(v["dataPath"]["idleClassRefused"], "Operation not permitted");
        assert_eq!(
            (&v["keySince"], &v["keyRotations"]),
            (&1_700_000_000.into(), &2.into())
        );
        assert_eq!(serde_json::from_value::<Status>(v).unwrap(), s);
    }

    #[test]
    fn a_status_without_the_key_fields_still_parses() {
        let mut v = serde_json::to_value(sample()).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("keySince").unwrap();
        o.remove("keyRotations").unwrap();
        let s: Status = serde_json::from_value(v).unwrap();
        assert_eq!((s.key_since, s.key_rotations), (None, 0));
        let v = serde_json::to_value(&s).unwrap();
        assert!(v.get("keySince").is_none(), "{v}");
    }

    #[test]
    fn table_and_metrics_show_what_runs_refused_and_failed() {
        let s = sample();
        let t = render(&s);
        assert!(t.contains("running 0123456789abcdef"), "{t}");
        assert!(t.starts_with("public key k  (key switched 2 times)"), "{t}");
        assert!(
            t.contains("REFUSED") && t.contains("peers[1].remotePodCIDR"),
            "{t}"
        );
        assert!(
            t.contains("APPLY FAILED") && t.contains("Network is unreachable"),
            "{t}"
        );
        assert!(
            t.contains(
                "data path: 2 lanes, pinned to their CPUs, steered by CPU, normal class (idle \
                 class refused: Operation not permitted)"
            ),
            "{t}"
        );
        let mut m = String::new();
        encode(&mut m, &metrics(&s)).unwrap();
        for line in [
            "liqo_gateway_no_route_packets 3",
            "liqo_gateway_handshakes_limited 7",
            "liqo_gateway_config_refused 1",
            "liqo_gateway_config_apply_failed 1",
            "liqo_gateway_config_applies 4",
            "liqo_gateway_data_lanes 2",
            "liqo_gateway_data_pinned 1",
            "liqo_gateway_data_idle_class 0",
            "liqo_gateway_key_rotations_total 2",
            "liqo_gateway_data_spreads_total 3",
        ] {
            assert!(m.contains(line), "{line} in\n{m}");
        }
    }
}
