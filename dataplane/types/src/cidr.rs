//! [`Cidr`]: an IPv4 network written without host bits (`10.200.0.0/16`). Every CIDR the
//! project reads (flags, files, CRD fields, gRPC requests) goes through [`Cidr::from_str`].

use std::{fmt, net::Ipv4Addr, ops::Deref, str::FromStr};

use ipnet::{Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

/// Why a string is not a [`Cidr`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidCidr {
    /// Not of the form `a.b.c.d/len`.
    #[error("{0:?} is not an IPv4 CIDR (expected a.b.c.d/len)")]
    NotACidr(String),
    /// An IPv6 network where IPv4 is needed.
    #[error("{0:?} is an IPv6 CIDR; only IPv4 is supported")]
    Ipv6(String),
    /// Bits set after the prefix.
    #[error("{value} has host bits set (did you mean {network}?)")]
    HostBits {
        /// As written.
        value: Ipv4Net,
        /// The network it probably means.
        network: Ipv4Net,
    },
    /// Not usable as a range of pods, services, nodes or external addresses.
    #[error("{0}: a range must be /1 to /{MAX_RANGE_LEN} long")]
    RangeLength(Ipv4Net),
}

/// The longest range handed out or accepted for pods, services, nodes and external addresses
/// (a /30 still has two usable addresses).
pub const MAX_RANGE_LEN: u8 = 30;

/// An IPv4 network without host bits. It derefs to [`Ipv4Net`] and (de)serialises as its text.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cidr(Ipv4Net);

impl Cidr {
    /// `net`, refused if it has host bits.
    pub fn new(net: Ipv4Net) -> Result<Cidr, InvalidCidr> {
        if net != net.trunc() {
            return Err(InvalidCidr::HostBits {
                value: net,
                network: net.trunc(),
            });
        }
        Ok(Cidr(net))
    }

    /// The network.
    pub fn net(&self) -> Ipv4Net {
        self.0
    }

    /// This network as a range of pods, services, nodes or external addresses: `/1` to
    /// [`MAX_RANGE_LEN`] (a `/0` would take every destination).
    pub fn range(self) -> Result<Cidr, InvalidCidr> {
        if (1..=MAX_RANGE_LEN).contains(&self.0.prefix_len()) {
            Ok(self)
        } else {
            Err(InvalidCidr::RangeLength(self.0))
        }
    }

    /// Whether the two networks share an address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.0.contains(&other.0) || other.0.contains(&self.0)
    }

    /// `ip` (an address of this network) moved into `to`, keeping its host bits: how an address
    /// of a remapped range is seen on the other side.
    pub fn translate(&self, ip: Ipv4Addr, to: &Cidr) -> Ipv4Addr {
        let host = u32::from(ip) & !u32::from(self.0.netmask());
        (u32::from(to.0.network()) | host).into()
    }
}

impl Deref for Cidr {
    type Target = Ipv4Net;
    fn deref(&self) -> &Ipv4Net {
        &self.0
    }
}

impl From<Cidr> for Ipv4Net {
    fn from(c: Cidr) -> Ipv4Net {
        c.0
    }
}

impl TryFrom<Ipv4Net> for Cidr {
    type Error = InvalidCidr;
    fn try_from(net: Ipv4Net) -> Result<Self, Self::Error> {
        Cidr::new(net)
    }
}

impl FromStr for Cidr {
    type Err = InvalidCidr;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        match t.parse::<Ipv4Net>() {
            Ok(net) => Cidr::new(net),
            Err(_) if t.parse::<Ipv6Net>().is_ok() => Err(InvalidCidr::Ipv6(s.to_owned())),
            Err(_) => Err(InvalidCidr::NotACidr(s.to_owned())),
        }
    }
}

impl TryFrom<String> for Cidr {
    type Error = InvalidCidr;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Cidr> for String {
    fn from(c: Cidr) -> String {
        c.to_string()
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cidr({})", self.0)
    }
}

/// The schema pattern of an IPv4 CIDR (host bits cannot be expressed in a pattern; the
/// controllers check them).
pub const IPV4_CIDR_PATTERN: &str = r"^((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])/(3[0-2]|[12]?[0-9])$";

#[cfg(feature = "schemars")]
impl schemars::JsonSchema for Cidr {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Cidr".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "pattern": IPV4_CIDR_PATTERN })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_names_the_bad_value() {
        let c: Cidr = " 10.200.0.0/16".parse().unwrap();
        assert_eq!(c.to_string(), "10.200.0.0/16");
        assert_eq!(c.prefix_len(), 16);
        assert_eq!(
            "10.200.0.0".parse::<Cidr>().unwrap_err().to_string(),
            "\"10.200.0.0\" is not an IPv4 CIDR (expected a.b.c.d/len)"
        );
        assert_eq!(
            "10.200.1.0/16".parse::<Cidr>().unwrap_err().to_string(),
            "10.200.1.0/16 has host bits set (did you mean 10.200.0.0/16?)"
        );
        assert!(matches!(
            "fd00::/8".parse::<Cidr>(),
            Err(InvalidCidr::Ipv6(_))
        ));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("0.0.0.0/0".parse::<Cidr>().is_ok());
        for bad in ["0.0.0.0/0", "10.0.0.0/31", "10.0.0.1/32"] {
            let e = bad.parse::<Cidr>().unwrap().range().unwrap_err();
            assert!(e.to_string().contains("/1 to /30"), "{e}");
        }
        assert!("10.0.0.0/30".parse::<Cidr>().unwrap().range().is_ok());
    }

    #[test]
    fn serde_goes_through_the_parser() {
        let c: Cidr = serde_json::from_str("\"10.71.0.0/16\"").unwrap();
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"10.71.0.0/16\"");
        let e = serde_json::from_str::<Cidr>("\"10.71.0.1/16\"").unwrap_err();
        assert!(e.to_string().contains("host bits"), "{e}");
    }

    #[test]
    fn translation_keeps_host_bits_and_overlap_is_symmetric() {
        let (a, b): (Cidr, Cidr) = (
            "10.200.0.0/16".parse().unwrap(),
            "10.71.0.0/16".parse().unwrap(),
        );
        assert_eq!(
            a.translate("10.200.1.3".parse().unwrap(), &b).to_string(),
            "10.71.1.3"
        );
        let s: Cidr = "10.200.5.0/24".parse().unwrap();
        assert!(a.overlaps(&s) && s.overlaps(&a) && !a.overlaps(&b));
    }
}
