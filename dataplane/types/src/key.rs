//! [`PublicKey`]: a WireGuard public key (32 bytes, written as 44 characters of base64).

use std::{fmt, str::FromStr};

use base64::{Engine, engine::general_purpose::STANDARD};
use serde::{Deserialize, Serialize};

/// A key that is not 32 bytes of standard base64.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a WireGuard key (44 characters of base64 encoding 32 bytes)")]
pub struct InvalidKey(pub String);

/// A WireGuard public key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PublicKey(pub [u8; 32]);

impl PublicKey {
    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl FromStr for PublicKey {
    type Err = InvalidKey;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = STANDARD
            .decode(s.trim())
            .map_err(|_| InvalidKey(s.into()))?;
        Ok(PublicKey(
            bytes.try_into().map_err(|_| InvalidKey(s.into()))?,
        ))
    }
}

impl TryFrom<String> for PublicKey {
    type Error = InvalidKey;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<PublicKey> for String {
    fn from(k: PublicKey) -> String {
        k.to_string()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&STANDARD.encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_bad_keys() {
        let text = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
        let k: PublicKey = text.parse().unwrap();
        assert_eq!(k.to_string(), text);
        assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{text}\""));
        for bad in [
            "",
            "nope",
            "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8D==",
            &text[..40],
        ] {
            assert!(bad.parse::<PublicKey>().is_err(), "{bad}");
        }
    }
}
