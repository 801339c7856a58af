//! Prometheus metrics of an operator (prefix `liqo_gateway_operator` or `liqo_route_operator`),
//! served on `--metrics-listen` at `/metrics`.

use std::sync::Arc;

use prometheus_client::{
    encoding::text::encode,
    metrics::{counter::Counter, gauge::Gauge},
    registry::Registry,
};

/// The process's metrics.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    /// Reconciles.
    pub reconciles: Counter,
    /// Failed reconciles.
    pub errors: Counter,
    /// Config files written (a changed text).
    pub writes: Counter,
    /// Peers in the file written last.
    pub peers: Gauge,
    /// TunnelEndpoints left out of it (a bad field, a duplicate, a refusal).
    pub refused: Gauge,
    /// TunnelEndpoints waiting on the daemon (not connected yet, or deleted and not yet
    /// dropped).
    pub pending: Gauge,
    /// Gateway keys rotated (a new key handed to the gateway; the gateway operator only).
    pub key_rotations: Counter,
    /// 1 while this gateway operator is the active one (always 1 without `--leader-elect`;
    /// always 0 for the route operator).
    pub leading: Gauge,
    /// Times this gateway operator stopped being the active one while it ran (the Lease lost,
    /// or given back when its gateway stopped answering) and stood again as a standby.
    pub step_downs: Counter,
}

impl Metrics {
    /// Metrics under `prefix`.
    pub fn new(prefix: &str) -> Metrics {
        let mut registry = Registry::with_prefix(prefix);
        let m = Metrics {
            registry: Arc::new(Registry::default()),
            reconciles: Counter::default(),
            errors: Counter::default(),
            writes: Counter::default(),
            peers: Gauge::default(),
            refused: Gauge::default(),
            pending: Gauge::default(),
            key_rotations: Counter::default(),
            leading: Gauge::default(),
            step_downs: Counter::default(),
        };
        registry.register("reconciles", "Reconciles", m.reconciles.clone());
        registry.register("reconcile_errors", "Failed reconciles", m.errors.clone());
        registry.register("config_writes", "Config files written", m.writes.clone());
        registry.register("peers", "Peers in the config written last", m.peers.clone());
        registry.register(
            "refused_tunnelendpoints",
            "TunnelEndpoints left out (a bad field, a duplicate, a refusal)",
            m.refused.clone(),
        );
        registry.register(
            "pending_tunnelendpoints",
            "TunnelEndpoints waiting on the daemon",
            m.pending.clone(),
        );
        registry.register(
            "key_rotations",
            "Gateway keys rotated (a rotation asked for, or the key Secret deleted)",
            m.key_rotations.clone(),
        );
        registry.register(
            "leading",
            "Gateway operator: 1 while it is the active one (always 1 without --leader-elect); route operator: 0",
            m.leading.clone(),
        );
        registry.register(
            "step_downs",
            "Gateway operator: times it stopped being the active one and stood again as a standby",
            m.step_downs.clone(),
        );
        Metrics {
            registry: Arc::new(registry),
            ..m
        }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }

    /// The registry, for [`liqo_daemon::server::spawn_metrics`].
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_show_under_the_prefix() {
        let m = Metrics::new("liqo_gateway_operator");
        m.reconciles.inc();
        m.peers.set(2);
        let text = m.encode();
        assert!(
            text.contains("liqo_gateway_operator_reconciles_total 1"),
            "{text}"
        );
        assert!(text.contains("liqo_gateway_operator_peers 2"), "{text}");
    }
}
