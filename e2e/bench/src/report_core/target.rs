//! [`Target`]: a named limit, the figure a run measured against it, and whether it was met. A
//! missed target is a result, not an error: the benches still exit 0.

use serde::{Deserialize, Serialize};

/// A target and whether this run met it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// What is measured, and where (`full apply of 1000 peers (from 1)`).
    pub what: String,
    /// The measured figure; `None`: not measured.
    pub value: Option<f64>,
    /// The limit; `None` when it depends on a figure that was not measured.
    pub limit: Option<f64>,
    /// Whether the figure must be at most (else at least) the limit.
    pub at_most: bool,
    /// The unit of the figure and the limit (`ms`, `MiB`, `s`, `µs`), empty for a ratio.
    pub unit: String,
    /// Whether it holds; `None` when the figure or the limit is missing.
    pub met: Option<bool>,
}

impl Target {
    /// `value` must be at most `limit`.
    pub fn at_most(
        what: impl Into<String>,
        value: Option<f64>,
        limit: Option<f64>,
        unit: &str,
    ) -> Target {
        Target::new(what.into(), value, limit, true, unit)
    }

    /// `value` must be at least `limit`.
    pub fn at_least(
        what: impl Into<String>,
        value: Option<f64>,
        limit: Option<f64>,
        unit: &str,
    ) -> Target {
        Target::new(what.into(), value, limit, false, unit)
    }

    fn new(
        what: String,
        value: Option<f64>,
        limit: Option<f64>,
        at_most: bool,
        unit: &str,
    ) -> Target {
        Target {
            what,
            value,
            limit,
            at_most,
            unit: unit.into(),
            met: value
                .zip(limit)
                .map(|(v, l)| if at_most { v <= l } else { v >= l }),
        }
    }

    /// Whether it was met (a missing figure or limit does not meet it).
    pub fn holds(&self) -> bool {
        self.met == Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn met_at_the_limit_and_not_without_a_figure_or_a_limit() {
        let t = Target::at_most("apply", Some(50.0), Some(50.0), "ms");
        assert_eq!((t.met, t.holds(), t.at_most), (Some(true), true, true));
        assert_eq!(
            Target::at_most("apply", Some(50.1), Some(50.0), "ms").met,
            Some(false)
        );
        let r = Target::at_least("tcp", Some(0.95), Some(0.95), "");
        assert!(r.holds() && !r.at_most && r.unit.is_empty());
        assert_eq!(
            Target::at_least("tcp", Some(0.94), Some(0.95), "").met,
            Some(false)
        );
        let none = Target::at_most("rss", None, Some(100.0), "MiB");
        assert_eq!((none.met, none.holds()), (None, false));
        assert_eq!(Target::at_most("secs", Some(1.0), None, "s").met, None);
    }
}
