//! Durations as the flags spell them (Go's `time.ParseDuration` subset: `500ms`, `30s`, `1m`,
//! `1h`, and sums like `1m30s`).

use std::time::Duration;

/// A duration flag refused, naming the text given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidDuration {
    /// Not a duration.
    #[error("bad duration {0:?}: expected e.g. 500ms, 30s, 1m, 1h30m")]
    Bad(String),
    /// More than a `Duration` holds.
    #[error("duration {0:?} is too long")]
    TooLong(String),
    /// A period shorter than a second.
    #[error("{0:?} is shorter than 1s")]
    TooShort(String),
}

/// Parses a duration; the error names the refused text.
pub fn parse(text: &str) -> Result<Duration, InvalidDuration> {
    let bad = || InvalidDuration::Bad(text.to_owned());
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        let too_long = || InvalidDuration::TooLong(text.to_owned());
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.checked_mul(60).ok_or_else(too_long)?),
            "h" => Duration::from_secs(n.checked_mul(3600).ok_or_else(too_long)?),
            _ => return Err(bad()),
        };
        total = total.checked_add(unit).ok_or_else(too_long)?;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// A resync period: at least a second (a zero period would reconcile, and call the peers'
/// auth services, in a loop).
pub fn parse_period(text: &str) -> Result<Duration, InvalidDuration> {
    let d = parse(text)?;
    if d < Duration::from_secs(1) {
        return Err(InvalidDuration::TooShort(text.to_owned()));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("2h"), Ok(Duration::from_secs(7200)));
        for bad in ["", "30", "s", "3x", "-1s", "1.5s", "99999999999999999999h"] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        let huge = format!("{}h", u64::MAX / 3600 + 1);
        assert!(parse(&huge).unwrap_err().to_string().contains("too long"));
        let sum = format!("{}s{}s", u64::MAX, u64::MAX);
        assert!(parse(&sum).unwrap_err().to_string().contains("too long"));
        assert_eq!(parse_period("30s"), Ok(Duration::from_secs(30)));
        for short in ["0s", "999ms"] {
            assert!(
                parse_period(short)
                    .unwrap_err()
                    .to_string()
                    .contains("shorter than 1s"),
                "{short}"
            );
        }
    }
}
