//! IPv4 networks as the v0.5 network CRDs write them: a plain CIDR, or a NAT target that is a
//! CIDR or the literal `None` (no remapping).

use std::{borrow::Cow, fmt, str::FromStr};

use ipnet::Ipv4Net;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// An IPv4 CIDR (`a.b.c.d/n`); the schema equivalent of [`Ipv4Net`]'s parser.
pub const IPV4_CIDR_PATTERN: &str = r"^((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])/(3[0-2]|[12]?[0-9])$";

/// A NAT target: [`IPV4_CIDR_PATTERN`] or `None`.
pub const NAT_CIDR_PATTERN: &str = r"^(None|((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])/(3[0-2]|[12]?[0-9]))$";

/// The literal upstream writes when a network is not remapped.
pub const NOT_REMAPPED: &str = "None";

/// Why a string is not a CIDR (or `None`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an IPv4 CIDR")]
pub struct InvalidCidr(pub String);

/// An IPv4 network in CIDR notation (`10.200.0.0/16`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Cidr(pub Ipv4Net);

impl FromStr for Cidr {
    type Err = InvalidCidr;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(Self).map_err(|_| InvalidCidr(s.to_owned()))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl JsonSchema for Cidr {
    fn schema_name() -> Cow<'static, str> {
        "Cidr".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "pattern": IPV4_CIDR_PATTERN })
    }
}

/// Where a network is remapped to: `None` (kept as is) or another network. Serialized as
/// upstream does: the CIDR, or the string `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NatCidr(pub Option<Ipv4Net>);

impl NatCidr {
    /// The network traffic is seen in: the remapped one, or `original` when not remapped.
    pub fn or(self, original: Ipv4Net) -> Ipv4Net {
        self.0.unwrap_or(original)
    }
}

impl FromStr for NatCidr {
    type Err = InvalidCidr;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == NOT_REMAPPED {
            return Ok(Self(None));
        }
        s.parse()
            .map(|net| Self(Some(net)))
            .map_err(|_| InvalidCidr(s.to_owned()))
    }
}

impl TryFrom<String> for NatCidr {
    type Error = InvalidCidr;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<NatCidr> for String {
    fn from(nat: NatCidr) -> String {
        nat.to_string()
    }
}

impl fmt::Display for NatCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(net) => net.fmt(f),
            None => f.write_str(NOT_REMAPPED),
        }
    }
}

impl JsonSchema for NatCidr {
    fn schema_name() -> Cow<'static, str> {
        "NatCidr".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "pattern": NAT_CIDR_PATTERN })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parses_and_serializes_as_string() {
        let cidr: Cidr = "10.200.0.0/16".parse().unwrap();
        assert_eq!(serde_json::to_string(&cidr).unwrap(), "\"10.200.0.0/16\"");
        let back: Cidr = serde_json::from_str("\"10.200.0.0/16\"").unwrap();
        assert_eq!(back, cidr);
        assert_eq!(
            "10.200.0.0".parse::<Cidr>(),
            Err(InvalidCidr("10.200.0.0".into()))
        );
        assert!("fd00::/8".parse::<Cidr>().is_err());
        assert!(serde_json::from_str::<Cidr>("\"None\"").is_err());
    }

    #[test]
    fn nat_cidr_none_round_trips() {
        let none: NatCidr = serde_json::from_str("\"None\"").unwrap();
        assert_eq!(none, NatCidr(None));
        assert_eq!(NatCidr::default(), none);
        assert_eq!(serde_json::to_string(&none).unwrap(), "\"None\"");
        let some: NatCidr = "10.71.0.0/16".parse().unwrap();
        assert_eq!(serde_json::to_string(&some).unwrap(), "\"10.71.0.0/16\"");
        assert!(serde_json::from_str::<NatCidr>("\"none\"").is_err());
    }

    #[test]
    fn nat_cidr_or_falls_back_to_original() {
        let original: Ipv4Net = "10.200.0.0/16".parse().unwrap();
        assert_eq!(NatCidr(None).or(original), original);
        let remapped: NatCidr = "10.71.0.0/16".parse().unwrap();
        assert_eq!(remapped.or(original).to_string(), "10.71.0.0/16");
    }
}
