//! What `/status` (JSON, for `liqo-overlay status` and the lab) and `/metrics` (Prometheus)
//! report: the configuration in force and the reload state (what runs, what was refused, what
//! failed to apply). The document is `liqo_overlay_api::status` (re-exported here); this module
//! renders it. The server itself is `liqo_daemon::server`.

use prometheus_client::{metrics::gauge::Gauge, registry::Registry};

pub use liqo_overlay_api::status::{ReloadStatus, Status};

/// The metrics of `s` (prefix `liqo_overlay`).
pub fn metrics(s: &Status) -> Registry {
    let mut registry = Registry::with_prefix("liqo_overlay");
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let gauges: [(&str, &str, i64); 3] = [
        ("nodes", "Nodes in the overlay", count(s.nodes.len())),
        (
            "remote_cidrs",
            "Remote ranges routed through the gateway node",
            count(s.remote_cidrs.len()),
        ),
        (
            "is_gateway",
            "1 when this node runs the gateway",
            i64::from(s.node == s.gateway && !s.node.is_empty()),
        ),
    ];
    for (name, help, value) in gauges {
        let g: Gauge = Gauge::default();
        g.set(value);
        registry.register(name, help, g);
    }
    liqo_daemon::status::register_metrics(&s.reload, &mut registry);
    registry
}

/// A summary for people: the node's role, what it routes, and its config file (what runs,
/// refused, failed).
pub fn render(s: &Status) -> String {
    let role = if s.node == s.gateway {
        "gateway node".to_owned()
    } else {
        format!("via gateway node {}", s.gateway)
    };
    format!(
        "node {} (overlay {}), {role}\nnodes: {}\nremote ranges: {}\n{}",
        s.node,
        s.overlay_ip,
        s.nodes.join(", "),
        if s.remote_cidrs.is_empty() {
            "(none)".into()
        } else {
            s.remote_cidrs.join(", ")
        },
        s.reload.render()
    )
}

#[cfg(test)]
mod tests {
    use liqo_daemon::status::{Applied, Refused};
    use prometheus_client::encoding::text::encode;

    use super::*;
    use crate::config::File;

    #[test]
    fn applied_config_shows_in_status_and_metrics() {
        let cfg = File::parse(
            "node: n1\ngateway: n0\nremoteCIDRs: [10.71.0.0/16, 10.72.0.0/16]\nnodes:\n  - {name: n0, address: 172.18.0.1, podCIDR: 10.200.0.0/24}\n  - {name: n1, address: 172.18.0.2, podCIDR: 10.200.1.0/24}\n",
        )
        .unwrap()
        .validate()
        .unwrap();
        let reload = ReloadStatus {
            source: "/etc/liqo/overlay.yaml".into(),
            applied: Some(Applied {
                digest: "0123456789abcdef".into(),
                count: 2,
                micros: 0,
            }),
            refused: Some(Refused {
                digest: "fedcba9876543210".into(),
                field: "gateway".into(),
                problem: "n9 is not in nodes".into(),
            }),
            ..ReloadStatus::default()
        };
        let s = Status::new(&cfg, reload);
        assert_eq!(s.overlay_ip, "240.18.0.2");
        assert_eq!(s.remote_cidrs, ["10.71.0.0/16", "10.72.0.0/16"]);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["reload"]["refused"]["field"], "gateway");
        assert!(v.get("configError").is_none() && v.get("applyError").is_none());
        assert_eq!(serde_json::from_value::<Status>(v).unwrap(), s);
        let mut m = String::new();
        encode(&mut m, &metrics(&s)).unwrap();
        assert!(m.contains("liqo_overlay_remote_cidrs 2"), "{m}");
        assert!(m.contains("liqo_overlay_is_gateway 0"), "{m}");
        assert!(m.contains("liqo_overlay_config_refused 1"), "{m}");
        assert!(m.contains("liqo_overlay_config_applies 2"), "{m}");
        let t = render(&s);
        assert!(t.contains("via gateway node n0"), "{t}");
        assert!(
            t.contains("REFUSED") && t.contains("n9 is not in nodes"),
            "{t}"
        );
    }
}
