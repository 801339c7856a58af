//! `/call`'s client: one HTTP/1.1 GET to a checked [`Target`], on a connection of its own,
//! within [`TIMEOUT`] for everything (name resolution, connection, answer) and with a body of
//! at most [`BODY_LIMIT`] bytes.

use std::time::Duration;

use http::{Request, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::error::Error;
use crate::logic::{reply::Called, target::Target};

/// The time a call may take, from resolving the host to the body's last byte.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest body a call accepts.
pub(crate) const BODY_LIMIT: usize = 64 * 1024;

/// GETs `target`, asking for JSON.
pub(crate) async fn get(target: &Target) -> Result<Called, Error> {
    tokio::time::timeout(TIMEOUT, exchange(target))
        .await
        .unwrap_or_else(|_| {
            Err(Error::Timeout {
                url: target.url.clone(),
                secs: TIMEOUT.as_secs(),
            })
        })
}

async fn exchange(target: &Target) -> Result<Called, Error> {
    let url = || target.url.clone();
    let stream = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|source| Error::Connect { url: url(), source })?;
    let http = |source| Error::Http { url: url(), source };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(http)?;
    // The connection is driven beside the exchange and stopped with it, also when the time
    // limit drops this future (one request on it).
    let _driver = AbortOnDrop(tokio::spawn(conn));

    let request = Request::get(target.path_and_query.as_str())
        .header(header::HOST, target.authority.as_str())
        .header(header::ACCEPT, "application/json")
        .header(
            header::USER_AGENT,
            concat!("liqo-demo/", env!("CARGO_PKG_VERSION")),
        )
        .header(header::CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .expect("a checked target makes a valid request");
    let response = sender.send_request(request).await.map_err(http)?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(http)?.into_data() {
            if bytes.len() + data.len() > BODY_LIMIT {
                return Err(Error::TooLarge {
                    url: url(),
                    limit: BODY_LIMIT,
                });
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(Called {
        status,
        body: bytes,
    })
}

/// Stops a task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
