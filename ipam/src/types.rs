//! Validated inputs: cluster IDs and CIDRs.

use std::{fmt, str::FromStr};

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::Error;

/// A peer's cluster ID: a DNS label (1 to 63 of `[a-z0-9-]`, alphanumeric at both ends), which
/// covers both Liqo's UUIDs and its newer cluster names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClusterId(String);

impl FromStr for ClusterId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = (1..=63).contains(&s.len())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !s.starts_with('-')
            && !s.ends_with('-');
        if ok {
            Ok(ClusterId(s.into()))
        } else {
            Err(Error::BadClusterId(s.into()))
        }
    }
}

impl TryFrom<String> for ClusterId {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ClusterId> for String {
    fn from(c: ClusterId) -> String {
        c.0
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl ClusterId {
    /// The ID as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Longest prefix accepted for a range (a /30 still has two usable addresses).
pub const MAX_PREFIX_LEN: u8 = 30;

/// Parses an IPv4 network written without host bits (`10.200.0.0/16`), at most /30 long.
pub fn parse_cidr(s: &str) -> Result<Ipv4Net, Error> {
    let n: Ipv4Net = s.trim().parse().map_err(|_| Error::NotACidr(s.into()))?;
    check_cidr(n)
}

/// Checks a network: no host bits, at most /30.
pub fn check_cidr(n: Ipv4Net) -> Result<Ipv4Net, Error> {
    if n != n.trunc() {
        return Err(Error::HostBits {
            value: n,
            network: n.trunc(),
        });
    }
    if n.prefix_len() > MAX_PREFIX_LEN {
        return Err(Error::PrefixTooLong(n));
    }
    Ok(n)
}

/// `ip` moved from `from` into `to` (same prefix length), keeping its host bits.
pub fn translate(ip: std::net::Ipv4Addr, from: &Ipv4Net, to: &Ipv4Net) -> std::net::Ipv4Addr {
    let host = u32::from(ip) & !u32::from(from.netmask());
    (u32::from(to.network()) | host).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_are_checked_naming_the_value() {
        assert_eq!(
            parse_cidr("10.200.0.0/16").unwrap().to_string(),
            "10.200.0.0/16"
        );
        assert_eq!(
            parse_cidr("10.200.0.0").unwrap_err().to_string(),
            "\"10.200.0.0\" is not a CIDR (expected a.b.c.d/len)"
        );
        assert_eq!(
            parse_cidr("10.200.1.0/16").unwrap_err().to_string(),
            "10.200.1.0/16 has host bits set (did you mean 10.200.0.0/16?)"
        );
        assert_eq!(
            parse_cidr("10.0.0.0/31").unwrap_err().to_string(),
            "10.0.0.0/31 is longer than /30"
        );
    }

    #[test]
    fn cluster_ids() {
        assert!("rome".parse::<ClusterId>().is_ok());
        assert!(
            "4c1e8e2a-3b2f-4c7e-9d6a-1f0e2d3c4b5a"
                .parse::<ClusterId>()
                .is_ok()
        );
        for bad in ["", "Rome", "-a", "a-", "a_b", &"x".repeat(64)] {
            assert!(bad.parse::<ClusterId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn translation_keeps_host_bits() {
        let ip = translate(
            "10.200.1.3".parse().unwrap(),
            &"10.200.0.0/16".parse().unwrap(),
            &"10.71.0.0/16".parse().unwrap(),
        );
        assert_eq!(ip.to_string(), "10.71.1.3");
    }
}
