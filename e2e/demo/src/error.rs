//! The demo's errors: a `/call` refused before any I/O (a missing or bad URL: 400), a call that
//! failed (502), an `/append` refused before any I/O (a missing or bad entry: 400), and the
//! listener's failure at start. Each names the URL, the entry or the address. The data
//! directory's I/O errors are [`crate::store::StoreError`]'s.

use std::net::SocketAddr;

/// What went wrong; [`Error::status`] is the HTTP status of the answer that reports it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// `/call` without a `url` parameter.
    #[error("/call needs a url parameter, e.g. /call?url=http://svc.ns:8080/")]
    MissingUrl,
    /// The `url` parameter is not an `http://host[:port][/path]` URL (or not percent-decodable).
    #[error("bad url {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    /// The TCP connection (name resolution included) failed: refused, unreachable, no such name.
    #[error("calling {url}: cannot connect: {source}")]
    Connect {
        url: String,
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange failed after the connection (closed early, not HTTP).
    #[error("calling {url}: {source}")]
    Http {
        url: String,
        #[source]
        source: hyper::Error,
    },
    /// No complete answer (connection, headers and body) within the call's time limit.
    #[error("calling {url}: no complete answer within {secs} s")]
    Timeout { url: String, secs: u64 },
    /// The answer's body is larger than the call accepts.
    #[error("calling {url}: the answer's body exceeds {limit} bytes")]
    TooLarge { url: String, limit: usize },
    /// `/append` without an `entry` parameter.
    #[error("/append needs an entry parameter, e.g. POST /append?entry=hello")]
    MissingEntry,
    /// The `entry` parameter breaks a rule (its length, a control character) or is not
    /// percent-decodable.
    #[error("bad entry {entry:?}: {reason}")]
    BadEntry { entry: String, reason: String },
    /// The server could not listen.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The HTTP status of an answer reporting this error: 400 for the caller's mistake, 502 for
    /// the called service's failure, 500 otherwise.
    pub(crate) fn status(&self) -> u16 {
        match self {
            Error::MissingUrl
            | Error::BadUrl { .. }
            | Error::MissingEntry
            | Error::BadEntry { .. } => 400,
            Error::Connect { .. }
            | Error::Http { .. }
            | Error::Timeout { .. }
            | Error::TooLarge { .. } => 502,
            Error::Listen { .. } => 500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_s_mistakes_are_400_and_the_called_service_s_failures_502() {
        assert_eq!(Error::MissingUrl.status(), 400);
        let bad = Error::BadUrl {
            url: "ftp://x/".into(),
            reason: "only http:// URLs".into(),
        };
        assert_eq!(bad.status(), 400);
        assert_eq!(bad.to_string(), r#"bad url "ftp://x/": only http:// URLs"#);
        let refused = Error::Connect {
            url: "http://a:1/".into(),
            source: std::io::ErrorKind::ConnectionRefused.into(),
        };
        assert_eq!(refused.status(), 502);
        assert!(
            refused
                .to_string()
                .starts_with("calling http://a:1/: cannot connect: ")
        );
        let timeout = Error::Timeout {
            url: "http://a/".into(),
            secs: 5,
        };
        assert_eq!(timeout.status(), 502);
        assert_eq!(Error::MissingEntry.status(), 400);
        let bad = Error::BadEntry {
            entry: "a\nb".into(),
            reason: "no control character".into(),
        };
        assert_eq!(bad.status(), 400);
        assert_eq!(bad.to_string(), r#"bad entry "a\nb": no control character"#);
    }
}
