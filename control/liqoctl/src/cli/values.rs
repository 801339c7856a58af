//! The values the flags take, each parsed and checked while parsing: `--timeout` (and its
//! default), the IPAM addresses, the auth URL and the auth token (whose errors never hold it).

use std::{fmt, str::FromStr, time::Duration};

use clap::{
    Arg, Command as ClapCommand,
    builder::TypedValueParser,
    error::{Error as ClapError, ErrorKind},
};
use control::identity::AuthToken;

/// The default of every `--timeout` but `offload namespace`'s (upstream's).
pub const DEFAULT_TIMEOUT: &str = "120s";

/// Why a `--timeout` was refused. clap prints only an error's own message, so each message
/// carries its cause (none is a `#[source]`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidTimeout {
    /// Not a duration.
    #[error("{0} (e.g. 120s, 2m, 1m30s)")]
    Syntax(humantime::DurationError),
    /// Zero.
    #[error("must be more than zero")]
    Zero,
}

/// A `--timeout` (`120s`, `2m`, `1m30s`); zero is refused.
pub fn parse_timeout(s: &str) -> Result<Duration, InvalidTimeout> {
    let d = humantime::parse_duration(s).map_err(InvalidTimeout::Syntax)?;
    if d.is_zero() {
        return Err(InvalidTimeout::Zero);
    }
    Ok(d)
}

/// Why an IPAM address was refused (as [`InvalidTimeout`], each message carries its cause).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidIpamAddress {
    /// Not a URL of the auth URL's shape.
    #[error("{0} (e.g. http://10.0.0.5:6000)")]
    Url(InvalidAuthUrl),
    /// No port.
    #[error("has no port (e.g. http://10.0.0.5:6000)")]
    NoPort,
}

/// An IPAM address: `http://host:port` or `https://host:port`.
pub fn parse_ipam_address(s: &str) -> Result<String, InvalidIpamAddress> {
    let url: AuthUrl = s.parse().map_err(InvalidIpamAddress::Url)?;
    let has_port = url
        .as_str()
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok());
    if !has_port {
        return Err(InvalidIpamAddress::NoPort);
    }
    Ok(url.as_str().to_owned())
}

/// An auth service's URL: `https://` (or `http://` for an auth service without TLS), a host,
/// an optional port and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthUrl(String);

impl AuthUrl {
    /// The URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AuthUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a string is not an auth URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidAuthUrl {
    /// Neither `https://` nor `http://`.
    #[error("does not start with https:// (or http://)")]
    Scheme,
    /// No host.
    #[error("has no host")]
    NoHost,
    /// A character a host cannot have.
    #[error("has {0:?} in its host")]
    HostChar(char),
    /// A port that is not 1..=65535.
    #[error("has port {0:?} (a port is 1 to 65535)")]
    Port(String),
    /// A path, query or fragment.
    #[error("has something after the host and port ({0:?}); an auth URL is scheme://host[:port]")]
    Trailing(String),
}

impl FromStr for AuthUrl {
    type Err = InvalidAuthUrl;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let rest = s
            .strip_prefix("https://")
            .or_else(|| s.strip_prefix("http://"))
            .ok_or(InvalidAuthUrl::Scheme)?;
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, trailing) = rest.split_at(end);
        if !trailing.is_empty() && trailing != "/" {
            return Err(InvalidAuthUrl::Trailing(trailing.to_owned()));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (addr, after) = v6.split_once(']').ok_or(InvalidAuthUrl::HostChar('['))?;
            if addr.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(InvalidAuthUrl::HostChar('['));
            }
            (addr, after.strip_prefix(':'))
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(InvalidAuthUrl::NoHost);
        }
        if !authority.starts_with('[')
            && let Some(c) = host
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '.'))
        {
            return Err(InvalidAuthUrl::HostChar(c));
        }
        if let Some(p) = port
            && !matches!(p.parse::<u16>(), Ok(1..))
        {
            return Err(InvalidAuthUrl::Port(p.to_owned()));
        }
        Ok(Self(s.trim_end_matches('/').to_owned()))
    }
}

/// Parses `--auth-token` without ever putting the token in the error (a mistyped token is
/// still most of a secret).
#[derive(Debug, Clone, Copy)]
pub struct TokenParser;

impl TypedValueParser for TokenParser {
    type Value = AuthToken;

    fn parse_ref(
        &self,
        cmd: &ClapCommand,
        arg: Option<&Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<AuthToken, ClapError> {
        let flag = arg.map_or_else(
            || "--auth-token".to_owned(),
            |a| format!("--{}", a.get_id()),
        );
        let bad = |why: String| {
            ClapError::raw(
                ErrorKind::ValueValidation,
                format!("invalid value for '{}': {why}\n", flag.replace('_', "-")),
            )
            .with_cmd(cmd)
        };
        let text = value.to_str().ok_or_else(|| bad("is not UTF-8".into()))?;
        AuthToken::from_str(text).map_err(|e| bad(e.to_string()))
    }
}
