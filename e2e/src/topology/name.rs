//! [`Name`]: the validated name of a cluster or node.

use std::fmt;
use std::str::FromStr;

/// Longest allowed name.
const MAX_LEN: usize = 12;

/// The name of a cluster or node: 1 to 12 characters `[a-z0-9]`, starting with a letter.
///
/// There is no dash, because names are joined with `-` into namespace names (`lq-rome-n0-p1`).
/// It (de)serialises as a string and validates on deserialisation.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct Name(String);

/// Why a string is not a valid [`Name`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} is not a valid name: {reason}")]
pub struct NameError {
    /// The rejected text.
    pub name: String,
    /// Which rule it breaks.
    pub reason: &'static str,
}

impl Name {
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Name {
    type Err = NameError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let reason = if text.is_empty() {
            Some("it is empty")
        } else if text.len() > MAX_LEN {
            Some("it is longer than 12 characters")
        } else if !text.starts_with(|c: char| c.is_ascii_lowercase()) {
            Some("it must start with a letter a-z")
        } else if !text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            Some(
                "only letters a-z and digits 0-9 are allowed (no dashes: names are joined with '-')",
            )
        } else {
            None
        };
        match reason {
            Some(reason) => Err(NameError {
                name: text.to_owned(),
                reason,
            }),
            None => Ok(Name(text.to_owned())),
        }
    }
}

impl TryFrom<String> for Name {
    type Error = NameError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<Name> for String {
    fn from(name: Name) -> String {
        name.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}
