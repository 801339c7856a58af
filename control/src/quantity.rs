//! Kubernetes quantities (`500m`, `1.5Gi`, `2e3`, ...): the one parser of the tree, into an
//! exact [`Amount`] ([`Resources`]: amounts by resource name), and the canonical decimal form
//! the offers are written in.
//!
//! The grammar is Kubernetes': an optional sign, a decimal number (`1`, `1.5`, `.5`, `5.`),
//! then a suffix: decimal SI (`n u m k M G T P E`, or none), binary SI (`Ki Mi Gi Ti Pi Ei`)
//! or an exponent (`e3`, `E-2`). Amounts are kept in nano-units: a finer fraction is rounded
//! up (away from zero), as Kubernetes rounds; the integer views ([`Amount::ceil_scaled`])
//! round up as `Quantity.Value()`/`MilliValue()` do. Errors name the refused quantity.

use std::{collections::BTreeMap, fmt};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// What is wrong with a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityProblem {
    /// Empty.
    #[error("is empty")]
    Empty,
    /// No digit before the suffix.
    #[error("has no number")]
    NoDigits,
    /// Two decimal points.
    #[error("has more than one '.'")]
    TwoPoints,
    /// A suffix that is none of the known ones.
    #[error(
        "has an unknown suffix {0:?} (known: n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, \
         or an exponent such as e3)"
    )]
    UnknownSuffix(String),
    /// Too large (or an exponent beyond ±100).
    #[error("is out of range")]
    OutOfRange,
}

/// A string refused as a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad quantity {quantity:?}: {problem}")]
pub struct InvalidQuantity {
    /// The refused text.
    pub quantity: String,
    /// Why.
    pub problem: QuantityProblem,
}

/// Resource amounts by resource name (`cpu`, `memory`, `pods`, ...): a `ResourceList`,
/// exactly.
pub type Resources = BTreeMap<String, Amount>;

/// An exact quantity, in nano-units (value × 10⁹).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Amount(i128);

const NANO: i32 = 9;
const MAX_EXPONENT: i32 = 100;

impl Amount {
    /// Zero.
    pub const ZERO: Amount = Amount(0);

    /// Parses a quantity's text.
    pub fn parse(text: &str) -> Result<Self, InvalidQuantity> {
        parse(text).map_err(|problem| InvalidQuantity {
            quantity: text.to_owned(),
            problem,
        })
    }

    /// Parses a k8s-openapi `Quantity`.
    pub fn from_quantity(q: &Quantity) -> Result<Self, InvalidQuantity> {
        Self::parse(&q.0)
    }

    /// The amount of `n` × 10^`exp10` units (saturating).
    pub fn scaled(n: i128, exp10: i32) -> Self {
        Amount(mul_pow10(n, exp10 + NANO).unwrap_or(if n < 0 { i128::MIN } else { i128::MAX }))
    }

    /// The value in nano-units.
    pub fn nanos(self) -> i128 {
        self.0
    }

    /// The value in units of 10^`exp10`, rounded away from zero (`-3`: Kubernetes'
    /// `MilliValue`; `0`: `Value`; `6`: `ScaledValue(Mega)`).
    pub fn ceil_scaled(self, exp10: i32) -> i128 {
        div_pow10_up(self.0, exp10 + NANO)
    }

    /// The sum (saturating).
    pub fn plus(self, other: Amount) -> Amount {
        Amount(self.0.saturating_add(other.0))
    }

    /// The difference (saturating).
    pub fn minus(self, other: Amount) -> Amount {
        Amount(self.0.saturating_sub(other.0))
    }
}

impl fmt::Display for Amount {
    /// The canonical decimal form, at nano precision.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&canonical(self.0, -NANO))
    }
}

/// `n` × 10^`exp10` as a canonical decimal-SI quantity (as Kubernetes writes one): the largest
/// SI suffix that keeps the number whole (`2400m`, `3`, `1536M`, `2G`, `0`).
pub fn decimal(n: i128, exp10: i32) -> Quantity {
    Quantity(canonical(n, exp10))
}

fn canonical(mut n: i128, mut exp: i32) -> String {
    if n == 0 {
        return "0".into();
    }
    // Bring the exponent to a multiple of 3 (a finer one only ever comes from our callers'
    // -9, -3, 0 and 6), then climb while the number stays whole.
    while exp.rem_euclid(3) != 0 {
        n = n.saturating_mul(10);
        exp -= 1;
    }
    while n % 1000 == 0 && exp < 18 {
        n /= 1000;
        exp += 3;
    }
    let suffix = match exp {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return format!("{n}e{exp}"),
    };
    format!("{n}{suffix}")
}

fn parse(text: &str) -> Result<Amount, QuantityProblem> {
    if text.is_empty() {
        return Err(QuantityProblem::Empty);
    }
    let (negative, rest) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(end);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if frac.contains('.') {
        return Err(QuantityProblem::TwoPoints);
    }
    if int.is_empty() && frac.is_empty() {
        return Err(QuantityProblem::NoDigits);
    }
    let (exp10, binary) = suffix_scale(suffix)?;
    // The digits as one integer: drop the fraction's trailing zeros and the leading zeros.
    let frac = frac.trim_end_matches('0');
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 38 {
        return Err(QuantityProblem::OutOfRange);
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| QuantityProblem::OutOfRange)?
    };
    let mantissa = mantissa
        .checked_mul(
            1i128
                .checked_shl(binary)
                .ok_or(QuantityProblem::OutOfRange)?,
        )
        .ok_or(QuantityProblem::OutOfRange)?;
    let frac_len = i32::try_from(frac.len()).map_err(|_| QuantityProblem::OutOfRange)?;
    let power = exp10 + NANO - frac_len;
    let nanos = if power >= 0 {
        mul_pow10(mantissa, power).ok_or(QuantityProblem::OutOfRange)?
    } else {
        div_pow10_up(mantissa, -power)
    };
    Ok(Amount(if negative { -nanos } else { nanos }))
}

/// A suffix's decimal exponent and binary shift.
fn suffix_scale(suffix: &str) -> Result<(i32, u32), QuantityProblem> {
    let decimal = |e| Ok((e, 0));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => Ok((0, 10)),
        "Mi" => Ok((0, 20)),
        "Gi" => Ok((0, 30)),
        "Ti" => Ok((0, 40)),
        "Pi" => Ok((0, 50)),
        "Ei" => Ok((0, 60)),
        _ => {
            let unknown = || QuantityProblem::UnknownSuffix(suffix.to_owned());
            let exponent = suffix
                .strip_prefix(['e', 'E'])
                .filter(|e| {
                    let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
                })
                .ok_or_else(unknown)?;
            let e: i32 = exponent.parse().map_err(|_| QuantityProblem::OutOfRange)?;
            if e.abs() > MAX_EXPONENT {
                return Err(QuantityProblem::OutOfRange);
            }
            decimal(e)
        }
    }
}

fn mul_pow10(n: i128, power: i32) -> Option<i128> {
    if n == 0 {
        return Some(0);
    }
    if power < 0 {
        return Some(div_pow10_up(n, -power));
    }
    let p = 10i128.checked_pow(u32::try_from(power).ok()?)?;
    n.checked_mul(p)
}

/// `n` / 10^`power` rounded away from zero (a `power` ≤ 0 multiplies, saturating).
fn div_pow10_up(n: i128, power: i32) -> i128 {
    if power <= 0 {
        return mul_pow10(n, -power).unwrap_or(if n < 0 { i128::MIN } else { i128::MAX });
    }
    let Some(p) = u32::try_from(power)
        .ok()
        .and_then(|p| 10i128.checked_pow(p))
    else {
        // Beyond i128: any non-zero amount is a fraction of one unit, which rounds up.
        return n.signum();
    };
    let (q, r) = (n / p, n % p);
    if r == 0 { q } else { q + n.signum() }
}

#[cfg(test)]
mod tests;
