//! The service's Prometheus metrics: requests by path and outcome.

use std::sync::Arc;

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family},
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
        Metrics {
            registry: Arc::new(registry),
            requests,
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
