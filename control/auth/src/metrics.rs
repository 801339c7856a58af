//! The service's Prometheus metrics: requests by path and outcome, and its connections (open
//! now, and refused over the limit).

use std::sync::Arc;

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

/// A request's labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    /// `ids`, `certificate`, or `other` (any other path: only `too_large` and `timeout`).
    pub path: &'static str,
    /// What happened: `ok` (`ids`), `accepted` (`certificate`, 202), `reissued` (202: the
    /// same CSR again, the stored certificate answered once more), or an error kind of
    /// [`crate::server::AuthError::outcome`]: `bad_request` (400), `no_token` (401),
    /// `wrong_token`, `already_issued` and `replay` (403: the same CSR again without a
    /// valid proof of possession newer than the last one), `namespace_taken` (409), `not_signed` (504),
    /// `error` (500); on any path, `too_large` (413, body over the limit) and `timeout` (503,
    /// not handled in time).
    pub outcome: &'static str,
}

/// The metrics of one server.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    requests: Family<RequestLabels, Counter>,
    connections: crate::https::Connections,
}

impl Default for Metrics {
    fn default() -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        let mut registry = Registry::with_prefix("liqo_auth");
        registry.register(
            "requests",
            "Requests to the auth service by path and outcome",
            requests.clone(),
        );
        let connections = crate::https::Connections {
            open: Gauge::default(),
            refused: Counter::default(),
        };
        registry.register(
            "connections",
            "Connections holding one of the service's slots now",
            connections.open.clone(),
        );
        registry.register(
            "connections_refused",
            "Connections closed at once because every slot was taken (max connections)",
            connections.refused.clone(),
        );
        Metrics {
            registry: Arc::new(registry),
            requests,
            connections,
        }
    }
}

impl Metrics {
    /// Counts a request.
    pub fn request(&self, path: &'static str, outcome: &'static str) {
        self.requests
            .get_or_create(&RequestLabels { path, outcome })
            .inc();
    }

    /// The connection figures, for the serving loop to update.
    pub fn connections(&self) -> crate::https::Connections {
        self.connections.clone()
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_outcome() {
        let m = Metrics::default();
        m.request("certificate", "forbidden");
        m.request("certificate", "forbidden");
        let text = m.encode();
        assert!(
            text.contains(r#"liqo_auth_requests_total{path="certificate",outcome="forbidden"} 2"#),
            "{text}"
        );
    }
}
