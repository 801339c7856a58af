//! The prefix of a test's or a lab's objects: every namespace, cluster directory and process a
//! test or a lab makes carries it, so one test never touches another's and leftovers can be
//! named.

use std::{fmt, str::FromStr};

use dataplane::NetnsName;
use serde::{Deserialize, Serialize};

/// The prefix of a lab: 1 to 10 of `[a-z0-9]`, starting with a letter. It has no dash, so the
/// namespaces of lab `lq` (`lq-...`) never match those of lab `lq2` (`lq2-...`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Prefix(String);

/// A prefix that was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid lab prefix {0:?}: use 1 to 10 lowercase letters and digits, starting with a letter"
)]
pub struct InvalidPrefix(pub String);

impl FromStr for Prefix {
    type Err = InvalidPrefix;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = (1..=10).contains(&s.len())
            && s.starts_with(|c: char| c.is_ascii_lowercase())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if ok {
            Ok(Prefix(s.into()))
        } else {
            Err(InvalidPrefix(s.into()))
        }
    }
}

impl TryFrom<String> for Prefix {
    type Error = InvalidPrefix;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Prefix> for String {
    fn from(p: Prefix) -> String {
        p.0
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Prefix {
    /// The prefix as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `ns` belongs to a lab with this prefix.
    pub fn owns(&self, ns: &NetnsName) -> bool {
        ns.as_str()
            .strip_prefix(self.as_str())
            .is_some_and(|rest| rest.starts_with('-'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_validated_and_never_overlap() {
        assert!("lq".parse::<Prefix>().is_ok());
        for bad in ["", "Lq", "l-q", "1lq", "abcdefghijk"] {
            assert!(bad.parse::<Prefix>().is_err(), "{bad}");
        }
        let lq: Prefix = "lq".parse().unwrap();
        assert!(lq.owns(&"lq-rome-n0".parse().unwrap()));
        assert!(!lq.owns(&"lq2-rome-n0".parse().unwrap()));
        assert!(!lq.owns(&"lq".parse().unwrap()));
    }
}
