//! Who may call the service: the bearer token (read from a file, compared in constant time, never
//! logged) and the check every request passes before it reaches a handler.

use std::{
    fmt,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use tonic::{Request, Status, metadata::MetadataValue};

use super::metrics::Metrics;

/// The metadata key carrying the token.
const AUTHORIZATION: &str = "authorization";
/// A token file larger than this is not a token.
const MAX_TOKEN_LEN: u64 = 4096;

/// Why a token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read.
    #[error("reading the token file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file holds nothing but whitespace.
    #[error("the token file {} is empty", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file is larger than a token can be.
    #[error("the token file {} is larger than {MAX_TOKEN_LEN} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The token has characters an HTTP header cannot carry (only visible ASCII can).
    #[error("the token in {} has characters other than visible ASCII", path.display())]
    NotPrintable {
        /// The file.
        path: PathBuf,
    },
    /// Anyone else may replace the token.
    #[error(
        "the token file {} is writable by group or others (mode {mode:o}); make it 0600 or 0400",
        path.display()
    )]
    Writable {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

/// A bearer token. Its `Debug` does not show it; nothing in this crate logs it.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// Reads a token file (as a Kubernetes Secret is mounted): surrounding whitespace, such as
    /// the final newline, is not part of the token. An empty file, one writable by group or
    /// others, or one with characters a header cannot carry is refused; one readable by others
    /// is used with a warning (readable by group is how a pod's fsGroup reads a Secret).
    pub fn from_file(path: &Path) -> Result<Token, TokenError> {
        let read = |source| TokenError::Read {
            path: path.to_owned(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read)?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o022 != 0 {
            return Err(TokenError::Writable {
                path: path.to_owned(),
                mode,
            });
        }
        // Group-readable is how a pod's non-root user reads a Secret volume (fsGroup).
        if mode & 0o004 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{mode:o}"),
                "the token file is readable by others; make it 0600, 0400 or 0440 \
                 (defaultMode on a Secret volume, with the pod's fsGroup)"
            );
        }
        if meta.len() > MAX_TOKEN_LEN {
            return Err(TokenError::TooLarge {
                path: path.to_owned(),
            });
        }
        let text = std::fs::read(path).map_err(read)?;
        Token::parse(&text).map_err(|e| match e {
            ParseError::Empty => TokenError::Empty {
                path: path.to_owned(),
            },
            ParseError::NotPrintable => TokenError::NotPrintable {
                path: path.to_owned(),
            },
        })
    }

    /// The token in `bytes` (e.g. a Secret's value), if usable: surrounding whitespace is not
    /// part of it; nothing but whitespace, or characters a header cannot carry, are not a token.
    pub fn from_bytes(bytes: &[u8]) -> Option<Token> {
        Token::parse(bytes).ok()
    }

    /// The token in a file's bytes.
    fn parse(bytes: &[u8]) -> Result<Token, ParseError> {
        let t = bytes.trim_ascii();
        if t.is_empty() {
            return Err(ParseError::Empty);
        }
        if !t.iter().all(u8::is_ascii_graphic) {
            return Err(ParseError::NotPrintable);
        }
        let s = std::str::from_utf8(t).map_err(|_| ParseError::NotPrintable)?;
        Ok(Token(s.into()))
    }

    /// Whether `candidate` is this token, in time independent of where they differ.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        constant_time_eq(self.0.as_bytes(), candidate)
    }

    /// The `authorization` header value a client sends.
    pub(crate) fn header(&self) -> MetadataValue<tonic::metadata::Ascii> {
        let mut v: MetadataValue<_> = format!("Bearer {}", self.0)
            .parse()
            .expect("a token is visible ASCII (checked when read)");
        v.set_sensitive(true);
        v
    }
}

enum ParseError {
    Empty,
    NotPrintable,
}

/// Byte-wise equality whose time depends only on the lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The server's check of every request: the bearer token and/or a client certificate, as
/// configured (each one configured is required). Failing calls get `Unauthenticated` before
/// any handler runs and are counted in the metrics.
#[derive(Clone)]
pub struct Authenticator {
    token: Option<Token>,
    client_cert: bool,
    metrics: Arc<Metrics>,
}

impl Authenticator {
    /// Requires `token` when given, and a client certificate when `client_cert` (the TLS layer
    /// has already verified it against the client CA).
    pub fn new(token: Option<Token>, client_cert: bool, metrics: Arc<Metrics>) -> Self {
        Authenticator {
            token,
            client_cert,
            metrics,
        }
    }

    fn check<T>(&self, req: &Request<T>) -> Result<(), Status> {
        if self.client_cert && req.peer_certs().is_none_or(|c| c.is_empty()) {
            return Err(Status::unauthenticated("a client certificate is required"));
        }
        if let Some(token) = &self.token {
            let given = req
                .metadata()
                .get(AUTHORIZATION)
                .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
            if !given.is_some_and(|g| token.matches(g)) {
                return Err(Status::unauthenticated("missing or wrong bearer token"));
            }
        }
        Ok(())
    }
}

impl tonic::service::Interceptor for Authenticator {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        match self.check(&req) {
            Ok(()) => Ok(req),
            Err(status) => {
                self.metrics.unauthenticated();
                tracing::debug!(peer = ?req.remote_addr(), reason = status.message(), "refused an unauthenticated call");
                Err(status)
            }
        }
    }
}

/// The client's side: adds the bearer token, if any, to every request.
#[derive(Clone, Debug, Default)]
pub struct BearerToken(pub Option<Token>);

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(t) = &self.0 {
            req.metadata_mut().insert(AUTHORIZATION, t.header());
        }
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn token(s: &str) -> Token {
        Token::parse(s.as_bytes()).ok().unwrap()
    }

    fn file(text: &[u8], mode: u32) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text).unwrap();
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        f
    }

    #[test]
    fn compares_whole_tokens() {
        let t = token("s3cret-Token");
        assert!(t.matches(b"s3cret-Token"));
        for wrong in [
            &b""[..],
            b"s3cret-Toke",
            b"s3cret-Token2",
            b"S3cret-Token",
            b"x",
        ] {
            assert!(!t.matches(wrong), "{wrong:?}");
        }
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"a", b"b"));
    }

    #[test]
    fn reads_a_mounted_secret() {
        let f = file(b"  abc.DEF-123\n", 0o600);
        let t = Token::from_file(f.path()).unwrap();
        assert!(t.matches(b"abc.DEF-123"));
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
        // Readable by others: used (with a warning).
        let f = file(b"abc\n", 0o644);
        assert!(Token::from_file(f.path()).unwrap().matches(b"abc"));
    }

    #[test]
    fn refuses_unusable_token_files() {
        for (text, mode, want) in [
            (&b""[..], 0o600, "is empty"),
            (b" \n\t\n", 0o600, "is empty"),
            (b"two words", 0o600, "visible ASCII"),
            ("caf\u{e9}".as_bytes(), 0o600, "visible ASCII"),
            (b"abc", 0o620, "writable by group or others (mode 620)"),
            (b"abc", 0o606, "writable by group or others"),
        ] {
            let f = file(text, mode);
            let e = Token::from_file(f.path()).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?} {mode:o}: {e}");
            assert!(!e.contains("abc"), "the token is never shown: {e}");
        }
        let big = file(&[b'a'; 5000], 0o600);
        assert!(matches!(
            Token::from_file(big.path()),
            Err(TokenError::TooLarge { .. })
        ));
        let e = Token::from_file(Path::new("/nonexistent/token")).unwrap_err();
        assert!(matches!(e, TokenError::Read { .. }), "{e}");
    }

    #[test]
    fn checks_the_authorization_header() {
        let metrics = Arc::new(Metrics::default());
        let auth = Authenticator::new(Some(token("abc")), false, Arc::clone(&metrics));
        let with = |h: Option<&str>| {
            let mut r = Request::new(());
            if let Some(h) = h {
                r.metadata_mut().insert(AUTHORIZATION, h.parse().unwrap());
            }
            auth.check(&r).map_err(|s| s.code())
        };
        assert_eq!(with(Some("Bearer abc")), Ok(()));
        for bad in [
            None,
            Some("Bearer abd"),
            Some("abc"),
            Some("Basic abc"),
            Some("Bearer abc "),
        ] {
            assert_eq!(with(bad), Err(tonic::Code::Unauthenticated), "{bad:?}");
        }
        // A client certificate is required and a plain request has none.
        let mtls = Authenticator::new(None, true, metrics);
        assert_eq!(
            mtls.check(&Request::new(())).map_err(|s| s.code()),
            Err(tonic::Code::Unauthenticated)
        );
        // The client side adds exactly what the server expects.
        let r = tonic::service::Interceptor::call(
            &mut BearerToken(Some(token("abc"))),
            Request::new(()),
        )
        .unwrap();
        assert_eq!(auth.check(&r).map_err(|s| s.code()), Ok(()));
    }
}
