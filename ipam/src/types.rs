//! Validated inputs: cluster IDs, CIDRs and the holders of endpoint mappings.

use ipnet::Ipv4Net;

use crate::Error;

pub use liqo_types::ClusterId;

/// A cluster ID, refused with the IPAM's error.
pub fn cluster_id(s: &str) -> Result<ClusterId, Error> {
    s.parse().map_err(|source| Error::BadClusterId {
        id: s.into(),
        source,
    })
}

/// Who holds an endpoint mapping for a peer (`virtual-kubelet`, `liqoctl-in-band`): each
/// holder takes and drops its own hold, so one component's release never drops another's.
/// Empty is the unnamed holder (callers that name none, and state written before holders).
#[derive(
    Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct Holder(String);

impl Holder {
    /// Longest name accepted.
    pub const MAX_LEN: usize = 63;

    /// Its name (empty for the unnamed holder).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Holder {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let ok = s.len() <= Self::MAX_LEN
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-./".contains(&b));
        if ok {
            Ok(Holder(s.to_owned()))
        } else {
            Err(Error::BadHolder(s.to_owned()))
        }
    }
}

impl TryFrom<String> for Holder {
    type Error = Error;

    fn try_from(s: String) -> Result<Self, Error> {
        s.parse()
    }
}

impl From<Holder> for String {
    fn from(h: Holder) -> String {
        h.0
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "(unnamed)"
        } else {
            &self.0
        })
    }
}

/// Longest prefix accepted for a range (a /30 still has two usable addresses).
pub const MAX_PREFIX_LEN: u8 = liqo_types::cidr::MAX_RANGE_LEN;

/// Parses an IPv4 network written without host bits (`10.200.0.0/16`), at most /30 long.
pub fn parse_cidr(s: &str) -> Result<Ipv4Net, Error> {
    check_cidr(s.parse::<liqo_types::Cidr>()?.net())
}

/// Checks a network: no host bits, /1 to /30 ([`liqo_types::Cidr::range`]).
pub fn check_cidr(n: Ipv4Net) -> Result<Ipv4Net, Error> {
    Ok(liqo_types::Cidr::new(n)?.range()?.net())
}

/// `ip` moved from `from` into `to` (same prefix length), keeping its host bits.
pub fn translate(ip: std::net::Ipv4Addr, from: &Ipv4Net, to: &Ipv4Net) -> std::net::Ipv4Addr {
    let (from, to) = (
        liqo_types::Cidr::new(from.trunc()),
        liqo_types::Cidr::new(to.trunc()),
    );
    from.expect("truncated")
        .translate(ip, &to.expect("truncated"))
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
            "\"10.200.0.0\" is not an IPv4 CIDR (expected a.b.c.d/len)"
        );
        assert_eq!(
            parse_cidr("10.200.1.0/16").unwrap_err().to_string(),
            "10.200.1.0/16 has host bits set (did you mean 10.200.0.0/16?)"
        );
        assert_eq!(
            parse_cidr("10.0.0.0/31").unwrap_err().to_string(),
            "10.0.0.0/31: a range must be /1 to /30 long"
        );
    }

    #[test]
    fn cluster_ids_name_the_value() {
        assert!(cluster_id("rome").is_ok());
        let e = cluster_id("Rome").unwrap_err().to_string();
        assert!(e.contains("\"Rome\"") && e.contains("'R'"), "{e}");
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
