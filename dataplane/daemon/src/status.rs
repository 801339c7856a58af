//! The daemons' side of the `reload` block of `/status` ([`ReloadStatus`], a wire type of
//! `liqo_types::reload`, re-exported here): its Prometheus gauges.

use prometheus_client::{metrics::gauge::Gauge, registry::Registry};

pub use liqo_types::reload::{Applied, Failed, Refused, ReloadStatus, digest};

/// Registers the reload gauges of `s` in `registry` (under its prefix): `config_applies`,
/// `config_refused`, `config_apply_failed`, `config_apply_attempts`, `config_unreadable`.
pub fn register_metrics(s: &ReloadStatus, registry: &mut Registry) {
    let gauges: [(&str, &str, i64); 5] = [
        (
            "config_applies",
            "Configurations applied since start",
            s.applied.as_ref().map_or(0, |a| saturate(a.count)),
        ),
        (
            "config_refused",
            "1 while the config file's text is refused",
            i64::from(s.refused.is_some()),
        ),
        (
            "config_apply_failed",
            "1 while applying the config file's text fails (retried)",
            i64::from(s.apply_error.is_some()),
        ),
        (
            "config_apply_attempts",
            "Failed attempts to apply the config file's text",
            s.apply_error.as_ref().map_or(0, |f| saturate(f.attempts)),
        ),
        (
            "config_unreadable",
            "1 while the config file cannot be read",
            i64::from(s.read_error.is_some()),
        ),
    ];
    for (name, help, value) in gauges {
        let g: Gauge = Gauge::default();
        g.set(value);
        registry.register(name, help, g);
    }
}

fn saturate(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_follow_the_status() {
        let s = ReloadStatus {
            refused: Some(Refused {
                digest: digest("b"),
                field: "f".into(),
                problem: "p".into(),
            }),
            ..ReloadStatus::default()
        };
        let mut r = Registry::with_prefix("x");
        register_metrics(&s, &mut r);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        assert!(text.contains("x_config_refused 1"), "{text}");
        assert!(text.contains("x_config_apply_failed 0"), "{text}");
        assert!(text.contains("x_config_applies 0"), "{text}");
    }
}
