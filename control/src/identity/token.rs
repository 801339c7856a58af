//! The auth token: 64 random bytes written as 128 lowercase hex digits (upstream's
//! `auth-token` Secret), which a consumer presents to a provider's auth service.
//!
//! A token never appears in a `Debug` or `Display` output, nor in a parse error; only
//! [`AuthToken::expose`] (to write it into a Secret or a command line) and serialization show
//! it. Comparison runs in constant time.

use std::{fmt, hint::black_box, str::FromStr};

use serde::{Deserialize, Serialize};

/// The random bytes in a token.
pub const TOKEN_BYTES: usize = 64;
/// The length of a token: two lowercase hex digits per byte.
pub const TOKEN_LEN: usize = 2 * TOKEN_BYTES;

const REDACTED: &str = "<redacted>";

/// Why a string is not a token. Never carries the string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidToken {
    /// Empty.
    #[error("the auth token is empty")]
    Empty,
    /// Not 128 characters.
    #[error("the auth token has {0} characters (a token is {TOKEN_LEN} lowercase hex digits)")]
    Length(usize),
    /// A character other than `0-9a-f` (its position, counted from 0).
    #[error(
        "the auth token has a character other than 0-9 and a-f at position {0} (a token is \
         {TOKEN_LEN} lowercase hex digits)"
    )]
    NotLowercaseHex(usize),
}

/// The kernel's random source failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot read random bytes from the kernel for a new auth token")]
pub struct RandomUnavailable(#[source] getrandom::Error);

/// An auth token (validated).
#[derive(Clone, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AuthToken(String);

impl AuthToken {
    /// A new token from the kernel's random source (`getrandom(2)`).
    pub fn generate() -> Result<Self, RandomUnavailable> {
        let mut bytes = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes).map_err(RandomUnavailable)?;
        Ok(Self::from_bytes(&bytes))
    }

    /// The token of these bytes.
    pub fn from_bytes(bytes: &[u8; TOKEN_BYTES]) -> Self {
        Self(hex::encode(bytes))
    }

    /// The token's text, for a Secret's data or the printed peer command. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether a presented string is this token, in time independent of where they differ.
    pub fn matches(&self, presented: &str) -> bool {
        same_secret(&self.0, presented)
    }
}

/// Whether two secrets are equal, in time independent of where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    black_box(diff) == 0
}

impl FromStr for AuthToken {
    type Err = InvalidToken;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(InvalidToken::Empty);
        }
        if let Some(position) = s
            .chars()
            .position(|c| !(c.is_ascii_digit() || ('a'..='f').contains(&c)))
        {
            return Err(InvalidToken::NotLowercaseHex(position));
        }
        if s.len() != TOKEN_LEN {
            return Err(InvalidToken::Length(s.len()));
        }
        Ok(Self(s.to_owned()))
    }
}

impl TryFrom<String> for AuthToken {
    type Error = InvalidToken;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<AuthToken> for String {
    fn from(token: AuthToken) -> String {
        token.0
    }
}

impl PartialEq for AuthToken {
    fn eq(&self, other: &Self) -> bool {
        self.matches(&other.0)
    }
}

impl Eq for AuthToken {}

impl fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuthToken({REDACTED})")
    }
}

impl fmt::Display for AuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// A token as a request carries it: any string, unchecked until compared or parsed, and
/// redacted in `Debug` like a token.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PresentedToken(String);

/// Constant time too: a presented token may be ours.
impl PartialEq for PresentedToken {
    fn eq(&self, other: &Self) -> bool {
        same_secret(&self.0, &other.0)
    }
}

impl Eq for PresentedToken {}

/// How a presented token compares with ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCheck {
    /// It is our token.
    Match,
    /// No token was presented.
    Empty,
    /// Another string.
    Mismatch,
}

impl PresentedToken {
    /// No token.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Compares it with our token (constant time).
    pub fn check(&self, ours: &AuthToken) -> TokenCheck {
        if self.0.is_empty() {
            TokenCheck::Empty
        } else if ours.matches(&self.0) {
            TokenCheck::Match
        } else {
            TokenCheck::Mismatch
        }
    }

    /// The token it holds, if well formed (e.g. before storing a peer's token).
    pub fn parse(&self) -> Result<AuthToken, InvalidToken> {
        self.0.parse()
    }
}

impl From<&AuthToken> for PresentedToken {
    fn from(token: &AuthToken) -> Self {
        Self(token.0.clone())
    }
}

impl fmt::Debug for PresentedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("PresentedToken(<empty>)")
        } else {
            write!(f, "PresentedToken({REDACTED})")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(c: char) -> String {
        c.to_string().repeat(TOKEN_LEN)
    }

    #[test]
    fn generated_tokens_are_128_lowercase_hex_and_differ() {
        let a = AuthToken::generate().unwrap();
        let b = AuthToken::generate().unwrap();
        assert_eq!(a.expose().len(), TOKEN_LEN);
        assert!(
            a.expose()
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(a.expose().parse::<AuthToken>().unwrap(), a);
        assert_ne!(a, b, "two draws of 512 random bits");
    }

    #[test]
    fn from_bytes_is_hex() {
        let mut bytes = [0u8; TOKEN_BYTES];
        bytes[0] = 0xab;
        bytes[63] = 0x0f;
        let t = AuthToken::from_bytes(&bytes);
        assert!(t.expose().starts_with("ab00"));
        assert!(t.expose().ends_with("000f"));
    }

    #[test]
    fn parse_refuses_anything_else_without_printing_it() {
        let cases = [
            (String::new(), InvalidToken::Empty),
            ("a".repeat(127), InvalidToken::Length(127)),
            ("a".repeat(129), InvalidToken::Length(129)),
            (
                format!("{}A", "a".repeat(127)),
                InvalidToken::NotLowercaseHex(127),
            ),
            (
                format!("g{}", "a".repeat(127)),
                InvalidToken::NotLowercaseHex(0),
            ),
            (
                format!("{}\n", "a".repeat(128)),
                InvalidToken::NotLowercaseHex(128),
            ),
            (
                format!("{} ", "b".repeat(10)),
                InvalidToken::NotLowercaseHex(10),
            ),
        ];
        for (text, want) in cases {
            let err = text.parse::<AuthToken>().unwrap_err();
            assert_eq!(err, want);
            let shown = err.to_string();
            assert!(
                !shown.contains("aaaa") && !shown.contains("bbbb"),
                "{shown}"
            );
        }
        assert_eq!(
            InvalidToken::Length(12).to_string(),
            "the auth token has 12 characters (a token is 128 lowercase hex digits)"
        );
        // Through serde too: the error is ours, without the value.
        let err = serde_json::from_str::<AuthToken>(&format!("\"{}X\"", "c".repeat(127)))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("position 127") && !err.contains("cccc"),
            "{err}"
        );
    }

    #[test]
    fn debug_and_display_redact() {
        let t: AuthToken = token('e').parse().unwrap();
        assert_eq!(format!("{t:?}"), "AuthToken(<redacted>)");
        assert_eq!(t.to_string(), "<redacted>");
        let p = PresentedToken::from(&t);
        assert_eq!(format!("{p:?}"), "PresentedToken(<redacted>)");
        assert_eq!(
            format!("{:?}", PresentedToken::default()),
            "PresentedToken(<empty>)"
        );
        // Serialization is the one way out.
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            format!("\"{}\"", token('e'))
        );
    }

    #[test]
    fn presented_tokens_compare() {
        let ours: AuthToken = token('1').parse().unwrap();
        let same = PresentedToken(token('1'));
        let other = PresentedToken(token('2'));
        let short = PresentedToken("1".into());
        assert_eq!(same.check(&ours), TokenCheck::Match);
        assert_eq!(other.check(&ours), TokenCheck::Mismatch);
        assert_eq!(short.check(&ours), TokenCheck::Mismatch);
        assert_eq!(PresentedToken::default().check(&ours), TokenCheck::Empty);
        assert_eq!(same.parse().unwrap(), ours);
        assert_eq!(short.parse().unwrap_err(), InvalidToken::Length(1));
        assert!(!ours.matches(&token('1')[1..]));
    }
}
