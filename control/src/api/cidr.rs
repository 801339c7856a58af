//! IPv4 networks as the v0.5 network CRDs write them: a plain CIDR ([`Cidr`], shared with the
//! data plane), or a NAT target that is a CIDR or the literal `None` (no remapping).

use std::{borrow::Cow, fmt, str::FromStr};

use liqo_types::{Cidr, InvalidCidr};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

pub use liqo_types::cidr::IPV4_CIDR_PATTERN;

/// A NAT target: [`IPV4_CIDR_PATTERN`] or `None`.
pub const NAT_CIDR_PATTERN: &str = r"^(None|((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])/(3[0-2]|[12]?[0-9]))$";

/// The literal upstream writes when a network is not remapped.
pub const NOT_REMAPPED: &str = "None";

/// Where a network is remapped to: `None` (kept as is) or another network. Serialized as
/// upstream does: the CIDR, or the string `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NatCidr(pub Option<Cidr>);

impl NatCidr {
    /// The network traffic is seen in: the remapped one, or `original` when not remapped.
    pub fn or(self, original: Cidr) -> Cidr {
        self.0.unwrap_or(original)
    }
}

impl FromStr for NatCidr {
    type Err = InvalidCidr;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == NOT_REMAPPED {
            return Ok(Self(None));
        }
        s.parse().map(|net| Self(Some(net)))
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
        assert!("10.200.0.0".parse::<Cidr>().is_err());
        assert!("fd00::/8".parse::<Cidr>().is_err());
        assert!(serde_json::from_str::<Cidr>("\"None\"").is_err());
        assert!(serde_json::from_str::<NatCidr>("\"10.71.0.1/16\"").is_err());
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
        let original: Cidr = "10.200.0.0/16".parse().unwrap();
        assert_eq!(NatCidr(None).or(original), original);
        let remapped: NatCidr = "10.71.0.0/16".parse().unwrap();
        assert_eq!(remapped.or(original).to_string(), "10.71.0.0/16");
    }
}
