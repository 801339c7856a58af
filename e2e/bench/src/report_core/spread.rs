//! [`Spread`]: the median and range of a figure over the samples of a run, and [`ratio`].

use serde::{Deserialize, Serialize};

/// Median and range of a set of values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Median (the mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`, ignoring non-finite ones; `None` if none is left.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }

    /// Every value times `factor` (another unit: `1e-3` from ms to s).
    pub fn scaled(self, factor: f64) -> Spread {
        Spread {
            median: self.median * factor,
            min: self.min * factor,
            max: self.max * factor,
        }
    }
}

/// `ours / this`: how many times `this` fits in ours (`3.7` = ours is 3.7 times faster); none
/// if either is missing, or `this` is not above 0.
pub fn ratio(ours: Option<f64>, this: Option<f64>) -> Option<f64> {
    match (ours, this) {
        (Some(o), Some(t)) if t > 0.0 && o.is_finite() => Some(o / t),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max() {
        let s = Spread::of([3.0, 1.0, 2.0, 5.0, 4.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 5.0));
        let s = Spread::of([4.0, 1.0, 2.0, f64::NAN, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        assert_eq!(Spread::of([]), None);
        assert_eq!(Spread::of([f64::NAN]), None);
        let ms = Spread::of([10.0, 20.0, 30.0]).unwrap().scaled(1e-3);
        assert_eq!((ms.median, ms.min, ms.max), (0.02, 0.01, 0.03));
    }

    #[test]
    fn ratios_need_both_figures_and_a_positive_divisor() {
        assert_eq!(ratio(Some(3.7), Some(1.0)), Some(3.7));
        assert_eq!(ratio(Some(3.7), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio(Some(f64::INFINITY), Some(1.0)), None);
    }
}
