//! `/status` (JSON, for `liqo-overlay status` and the lab) and `/metrics` (Prometheus).

use std::{
    fmt::Write as _,
    sync::{Arc, Mutex},
};

use prometheus_client::{encoding::text::encode, metrics::gauge::Gauge, registry::Registry};
use serde::{Deserialize, Serialize};

use crate::config::Config;

/// What the agent has applied, and what it refused.
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
    /// Configurations applied since start.
    pub applies: u64,
    /// Why the last configuration change was refused (the running state is kept).
    pub config_error: Option<String>,
    /// The last kernel error while applying (retried every reload tick).
    pub apply_error: Option<String>,
}

impl Status {
    /// Records `cfg` as applied.
    pub fn applied(&mut self, cfg: &Config) {
        self.node.clone_from(&cfg.me);
        self.overlay_ip = cfg.me().overlay_ip().to_string();
        self.gateway.clone_from(&cfg.gateway);
        self.nodes = cfg.nodes.keys().cloned().collect();
        self.remote_cidrs = cfg.remote_cidrs.iter().map(ToString::to_string).collect();
        self.applies += 1;
        self.config_error = None;
        self.apply_error = None;
    }
}

/// Shared between the reload loop and the server.
pub type Shared = Arc<Mutex<Status>>;

fn snapshot(s: &Shared) -> Status {
    s.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Prometheus text for `s`.
pub fn metrics(s: &Status) -> String {
    let mut registry = Registry::with_prefix("liqo_overlay");
    let gauges: [(&str, &str, i64); 5] = [
        ("nodes", "Nodes in the overlay", s.nodes.len() as i64),
        (
            "remote_cidrs",
            "Remote ranges routed through the gateway node",
            s.remote_cidrs.len() as i64,
        ),
        (
            "is_gateway",
            "1 when this node runs the gateway",
            i64::from(s.node == s.gateway && !s.node.is_empty()),
        ),
        (
            "applies",
            "Configurations applied since start",
            s.applies as i64,
        ),
        (
            "config_refused",
            "1 while the last configuration change is refused",
            i64::from(s.config_error.is_some()),
        ),
    ];
    for (name, help, value) in gauges {
        let g: Gauge = Gauge::default();
        g.set(value);
        registry.register(name, help, g);
    }
    let mut out = String::new();
    let _ = encode(&mut out, &registry);
    out
}

/// A summary for people.
pub fn render(s: &Status) -> String {
    let role = if s.node == s.gateway {
        "gateway node".to_owned()
    } else {
        format!("via gateway node {}", s.gateway)
    };
    let mut out = format!(
        "node {} (overlay {}), {role}\nnodes: {}\nremote ranges: {}\napplied {} configuration(s)\n",
        s.node,
        s.overlay_ip,
        s.nodes.join(", "),
        if s.remote_cidrs.is_empty() {
            "(none)".into()
        } else {
            s.remote_cidrs.join(", ")
        },
        s.applies
    );
    if let Some(e) = &s.config_error {
        let _ = writeln!(
            out,
            "last configuration change REFUSED (running state kept): {e}"
        );
    }
    if let Some(e) = &s.apply_error {
        let _ = writeln!(out, "last apply FAILED (retrying): {e}");
    }
    out
}

/// Serves `/status` and `/metrics` until the runtime stops.
pub async fn serve(listener: tokio::net::TcpListener, state: Shared) -> std::io::Result<()> {
    let s2 = Arc::clone(&state);
    let app = axum::Router::new()
        .route(
            "/status",
            axum::routing::get(move || async move {
                serde_json::to_string(&snapshot(&state)).unwrap_or_default()
            }),
        )
        .route(
            "/metrics",
            axum::routing::get(move || async move { metrics(&snapshot(&s2)) }),
        );
    axum::serve(listener, app).await
}

#[cfg(test)]
mod tests {
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
        let mut s = Status {
            config_error: Some("old".into()),
            ..Status::default()
        };
        s.applied(&cfg);
        assert_eq!(s.overlay_ip, "240.18.0.2");
        assert_eq!(s.remote_cidrs, ["10.71.0.0/16", "10.72.0.0/16"]);
        assert_eq!(s.config_error, None);
        let m = metrics(&s);
        assert!(m.contains("liqo_overlay_remote_cidrs 2"), "{m}");
        assert!(m.contains("liqo_overlay_is_gateway 0"), "{m}");
        assert!(render(&s).contains("via gateway node n0"));
    }
}
