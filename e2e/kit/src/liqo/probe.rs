//! Whether a component serves ([`probe`]): an HTTP GET on the loopback, or HTTPS with any
//! certificate (the components' are self-signed), answered 200; else why not ([`ProbeError`]).

use std::{net::SocketAddr, time::Duration};

/// Why a component did not answer 200. Each message says the cause too (the text of a
/// failed probe is kept as the `why` of [`super::LiqoError::NotReady`]).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The address of an `http://` URL is not `ip:port`.
    #[error("{url}: {source}")]
    Address {
        /// The URL.
        url: String,
        /// The cause.
        #[source]
        source: std::net::AddrParseError,
    },
    /// An `https://` URL is not a URI.
    #[error("{url}: {source}")]
    Uri {
        /// The URL.
        url: String,
        /// The cause.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// The blocking task that asked did not finish.
    #[error(transparent)]
    Task(tokio::task::JoinError),
    /// The HTTP request failed, or the answer was not 200.
    #[error(transparent)]
    Http(std::io::Error),
    /// The HTTPS request could not be made.
    #[error(transparent)]
    Request(http::Error),
    /// The HTTPS client could not be made, the request failed, or the answer was not 200.
    #[error(transparent)]
    Https(kube::Error),
}

/// Whether `url` (`http://127.0.0.1:port/path`, or `https://...` with any certificate) answers
/// 200; else why not.
pub async fn probe(url: &str) -> Result<(), ProbeError> {
    if let Some(rest) = url.strip_prefix("http://") {
        let (addr, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let addr: SocketAddr = addr.parse().map_err(|source| ProbeError::Address {
            url: url.to_owned(),
            source,
        })?;
        let path = if path.is_empty() { "/" } else { path };
        return tokio::task::spawn_blocking({
            let path = path.to_owned();
            move || liqo_daemon::localhttp::get(addr, &path)
        })
        .await
        .map_err(ProbeError::Task)?
        .map(|_| ())
        .map_err(ProbeError::Http);
    }
    // HTTPS with a self-signed certificate: kube's client (rustls) told to accept any.
    let bad_uri = |source| ProbeError::Uri {
        url: url.to_owned(),
        source,
    };
    let uri: http::Uri = url.parse().map_err(bad_uri)?;
    let base: http::Uri = format!(
        "https://{}",
        uri.authority().map(|a| a.as_str()).unwrap_or_default()
    )
    .parse()
    .map_err(bad_uri)?;
    let mut cfg = kube::Config::new(base);
    cfg.accept_invalid_certs = true;
    cfg.connect_timeout = Some(Duration::from_secs(2));
    cfg.read_timeout = Some(Duration::from_secs(5));
    let client = kube::Client::try_from(cfg).map_err(ProbeError::Https)?;
    let req = http::Request::get(uri.path())
        .body(Vec::new())
        .map_err(ProbeError::Request)?;
    client
        .request_text(req)
        .await
        .map(|_| ())
        .map_err(ProbeError::Https)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_bad_url_is_named_with_its_cause() {
        let e = probe("http://localhost:1/x").await.unwrap_err();
        assert!(matches!(e, ProbeError::Address { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "http://localhost:1/x: invalid socket address syntax"
        );
        assert_eq!(liqo_types::chain(&e), e.to_string(), "said once");
    }
}
