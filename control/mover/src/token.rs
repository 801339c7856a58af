//! The shared secret: only from the environment variable [`TOKEN_ENV`], at least
//! [`MIN_TOKEN_CHARS`] characters, compared in constant time. Neither its [`Debug`] nor any
//! error shows it.

use std::fmt;

use crate::wire::MAX_TOKEN;

/// The environment variable holding the token.
pub const TOKEN_ENV: &str = "LIQO_MOVER_TOKEN";
/// The fewest characters a token has.
pub const MIN_TOKEN_CHARS: usize = 32;

/// Why the token was refused (never showing it).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    /// Unset or empty.
    #[error(
        "the environment variable {TOKEN_ENV} is not set (the secret sender and receiver share)"
    )]
    Missing,
    /// Not UTF-8.
    #[error("the environment variable {TOKEN_ENV} is not UTF-8 text")]
    NotText,
    /// Too short.
    #[error(
        "the environment variable {TOKEN_ENV} is too short: at least {MIN_TOKEN_CHARS} characters"
    )]
    TooShort,
    /// Too long.
    #[error("the environment variable {TOKEN_ENV} is too long: at most {MAX_TOKEN} bytes")]
    TooLong,
}

/// The shared secret.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// The token in [`TOKEN_ENV`].
    pub fn from_env() -> Result<Self, TokenError> {
        match std::env::var(TOKEN_ENV) {
            Ok(t) => Self::new(t),
            Err(std::env::VarError::NotPresent) => Err(TokenError::Missing),
            Err(std::env::VarError::NotUnicode(_)) => Err(TokenError::NotText),
        }
    }

    /// Validates a token.
    pub fn new(token: String) -> Result<Self, TokenError> {
        match token.chars().count() {
            0 => Err(TokenError::Missing),
            n if n < MIN_TOKEN_CHARS => Err(TokenError::TooShort),
            _ if token.len() > MAX_TOKEN => Err(TokenError::TooLong),
            _ => Ok(Self(token.into_bytes())),
        }
    }

    /// Its bytes (for the hello only).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Whether a peer presented this token; in time independent of where they differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(&self.0, presented)
    }
}

/// `a == b` in a time that depends on the lengths only: an xor-fold over every byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let len = a.len().max(b.len());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..len {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_every_byte_and_the_length() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"bbc"));
        assert!(!constant_time_eq(b"abc", b"abc\0"));
        assert!(!constant_time_eq(b"abc\0", b"abc"));
        assert!(!constant_time_eq(b"", b"\0"));
    }

    #[test]
    fn validates_and_never_shows_the_token() {
        let secret = "s".repeat(31);
        assert_eq!(
            Token::new(secret.clone()).unwrap_err(),
            TokenError::TooShort
        );
        assert_eq!(Token::new(String::new()).unwrap_err(), TokenError::Missing);
        // Characters, not bytes: 16 two-byte characters are too short.
        assert_eq!(
            Token::new("é".repeat(16)).unwrap_err(),
            TokenError::TooShort
        );
        assert_eq!(
            Token::new("x".repeat(MAX_TOKEN + 1)).unwrap_err(),
            TokenError::TooLong
        );
        let t = Token::new(format!("{secret}!")).unwrap();
        assert!(t.matches(format!("{secret}!").as_bytes()));
        assert!(!t.matches(secret.as_bytes()));
        assert!(!format!("{t:?}").contains("sss"));
        for e in [
            TokenError::Missing,
            TokenError::TooShort,
            TokenError::NotText,
        ] {
            assert!(e.to_string().contains(TOKEN_ENV), "{e}");
        }
    }
}
