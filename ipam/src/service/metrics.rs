//! Prometheus metrics of the service: pool usage, allocations, requests.

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use crate::Ipam;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabel {
    pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabel {
    method: String,
    outcome: String,
}

/// The service's metrics (shared handles; [`Metrics::registry`] exposes them).
#[derive(Default)]
pub struct Metrics {
    pool_used: Family<PoolLabel, Gauge>,
    pool_total: Family<PoolLabel, Gauge>,
    peers: Gauge,
    endpoints: Gauge,
    requests: Family<RequestLabel, Counter>,
    unauthenticated: Counter,
}

impl Metrics {
    /// Updates the gauges from the IPAM.
    pub fn observe(&self, ipam: &Ipam) {
        self.pool_used.clear();
        self.pool_total.clear();
        for (pool, used, total) in ipam.pool_usage() {
            let label = PoolLabel {
                pool: pool.to_string(),
            };
            self.pool_used
                .get_or_create(&label)
                .set(i64::try_from(used).unwrap_or(i64::MAX));
            self.pool_total
                .get_or_create(&label)
                .set(i64::try_from(total).unwrap_or(i64::MAX));
        }
        self.peers
            .set(i64::try_from(ipam.peers().count()).unwrap_or(i64::MAX));
        self.endpoints
            .set(i64::try_from(ipam.endpoints().count()).unwrap_or(i64::MAX));
    }

    /// Counts one request.
    pub fn request(&self, method: &str, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.requests
            .get_or_create(&RequestLabel {
                method: method.into(),
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Counts one call refused for missing or wrong credentials.
    pub fn unauthenticated(&self) {
        self.unauthenticated.inc();
    }

    /// A registry (prefix `liqo_ipam`) holding these metrics, to which a caller may add more
    /// (the reload gauges of the daemon runtime).
    pub fn registry(&self) -> Registry {
        let mut registry = Registry::with_prefix("liqo_ipam");
        registry.register(
            "pool_addresses_used",
            "Addresses allocated or reserved in each pool",
            self.pool_used.clone(),
        );
        registry.register(
            "pool_addresses",
            "Addresses in each pool",
            self.pool_total.clone(),
        );
        registry.register("peers", "Peers with allocated ranges", self.peers.clone());
        registry.register(
            "endpoints",
            "Local IPs mapped into the external CIDR",
            self.endpoints.clone(),
        );
        registry.register(
            "requests",
            "gRPC requests by method and outcome",
            self.requests.clone(),
        );
        registry.register(
            "unauthenticated_requests",
            "Calls refused for missing or wrong credentials",
            self.unauthenticated.clone(),
        );
        registry
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an error could only come from a metric's encoder.
        if let Err(e) = encode(&mut out, &self.registry()) {
            tracing::error!(error = %e, "encoding the metrics");
        }
        out
    }
}
