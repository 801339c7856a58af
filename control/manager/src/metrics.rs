//! Prometheus metrics: reconciles and errors per controller, admission reviews by webhook and
//! outcome, whether this replica leads, the live heap and the anonymous resident memory, served
//! on `--metrics-listen`.

use std::sync::Arc;

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

/// A controller's label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ControllerLabels {
    /// `foreigncluster`, `replicator`, `resourcerequest`, `resourceoffer`.
    pub controller: &'static str,
}

/// A webhook review's labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ReviewLabels {
    /// `pod.mutate.liqo.io`, `nsoff.validate.liqo.io`.
    pub webhook: &'static str,
    /// `patched`, `allowed`, `warned`, `denied`, `error`, `bad_request`, `too_large`, `timeout`.
    pub outcome: &'static str,
}

/// The process's metrics.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconciles: Family<ControllerLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    reviews: Family<ReviewLabels, Counter>,
    leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let errors = Family::<ControllerLabels, Counter>::default();
        let mut registry = Registry::with_prefix("liqo_controller_manager");
        registry.register("reconciles", "Reconciles by controller", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Failed reconciles by controller",
            errors.clone(),
        );
        let reviews = Family::<ReviewLabels, Counter>::default();
        registry.register(
            "webhook_reviews",
            "Admission reviews by webhook and outcome",
            reviews.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica leads (reconciles and runs the virtual kubelets); always 1 without --leader-elect",
            leader.clone(),
        );
        // The live heap and the anonymous resident memory (`liqo_daemon::memory`).
        registry.register_collector(Box::new(liqo_daemon::memory::HeapCollector));
        Metrics {
            registry: Arc::new(registry),
            reconciles,
            errors,
            reviews,
            leader,
        }
    }
}

impl Metrics {
    /// Counts a reconcile.
    pub fn reconcile(&self, controller: &'static str) {
        self.reconciles
            .get_or_create(&ControllerLabels { controller })
            .inc();
    }

    /// Counts a failed reconcile.
    pub fn error(&self, controller: &'static str) {
        self.errors
            .get_or_create(&ControllerLabels { controller })
            .inc();
    }

    /// Counts an admission review.
    pub fn review(&self, webhook: &'static str, outcome: &'static str) {
        self.reviews
            .get_or_create(&ReviewLabels { webhook, outcome })
            .inc();
    }

    /// The gauge saying whether this replica leads.
    pub fn leader(&self) -> Gauge {
        self.leader.clone()
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
    fn counts_by_controller() {
        let m = Metrics::default();
        m.reconcile("foreigncluster");
        m.reconcile("foreigncluster");
        m.error("replicator");
        let text = m.encode();
        assert!(
            text.contains(
                r#"liqo_controller_manager_reconciles_total{controller="foreigncluster"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"liqo_controller_manager_reconcile_errors_total{controller="replicator"} 1"#
            ),
            "{text}"
        );
    }
}
