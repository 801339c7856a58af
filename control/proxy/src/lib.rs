//! liqo-proxy: the HTTP CONNECT proxy of in-band peering (upstream's `liqo-proxy`, an Envoy
//! allowing CONNECT to `kubernetes.default:443`). A peer's controller-manager reaches this
//! cluster's API server through the tunnel by asking this proxy to CONNECT to the API server's
//! name, so the API server's TLS certificate still verifies against that name end to end.
//!
//! It owns the parsing of the request head and the decision ([`decide`], pure), and the
//! relay ([`serve`]). It opens a tunnel only to a target on its allow-list (each target may
//! name the address really dialled, for a name the proxy cannot resolve), refuses every other
//! method and target, never reads or logs what flows through a tunnel (TLS), and logs the
//! source address, the target and the decision of every request.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// The longest request head read (the request line and headers).
pub const MAX_HEAD: usize = 8192;

/// How long a client has to send its request head, and a target to accept the connection.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// One allowed CONNECT target: the `host:port` a client asks for, and where it is dialled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `host:port` as it must appear in the request (compared without case on the host).
    pub authority: String,
    /// `host:port` dialled (the authority itself when not given).
    pub dial: String,
}

/// Why an `--allow` value is not a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTarget {
    /// Not `host:port` with a port 1..=65535.
    #[error("{0:?} is not host:port (a port is 1 to 65535)")]
    NotHostPort(String),
}

fn host_port(s: &str) -> Result<(), InvalidTarget> {
    let bad = || InvalidTarget::NotHostPort(s.to_owned());
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty()
        || host
            .chars()
            .any(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':')))
        || !matches!(port.parse::<u16>(), Ok(1..))
    {
        return Err(bad());
    }
    Ok(())
}

impl std::str::FromStr for Target {
    type Err = InvalidTarget;

    /// `host:port` or `host:port=dialhost:dialport`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (authority, dial) = s.split_once('=').unwrap_or((s, s));
        host_port(authority)?;
        host_port(dial)?;
        Ok(Target {
            authority: authority.to_ascii_lowercase(),
            dial: dial.to_owned(),
        })
    }
}

/// What to answer a request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Tunnel to this address (`dial` of the allowed target).
    Connect {
        /// The target asked for.
        authority: String,
        /// The address dialled.
        dial: String,
    },
    /// Refused with this status line and why (for the log).
    Refuse {
        /// The HTTP status code.
        status: u16,
        /// Why.
        reason: String,
    },
}

fn refuse(status: u16, reason: impl Into<String>) -> Decision {
    Decision::Refuse {
        status,
        reason: reason.into(),
    }
}

/// The decision for a request head (the bytes up to the blank line): only `CONNECT` to an
/// allowed target.
pub fn decide(head: &[u8], allow: &[Target]) -> Decision {
    let Ok(text) = std::str::from_utf8(head) else {
        return refuse(400, "the request head is not UTF-8");
    };
    let line = text.split("\r\n").next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return refuse(400, format!("bad request line {line:?}"));
    };
    if !version.starts_with("HTTP/1.") {
        return refuse(400, format!("bad request line {line:?}"));
    }
    if method != "CONNECT" {
        return refuse(405, format!("method {method:?} (only CONNECT)"));
    }
    let wanted = target.to_ascii_lowercase();
    match allow.iter().find(|t| t.authority == wanted) {
        Some(t) => Decision::Connect {
            authority: t.authority.clone(),
            dial: t.dial.clone(),
        },
        None => refuse(403, format!("target {target:?} is not allowed")),
    }
}

/// The response line of a refusal.
pub fn refusal_response(status: u16) -> String {
    let text = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        502 => "Bad Gateway",
        _ => "Error",
    };
    format!("HTTP/1.1 {status} {text}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

/// The response of an open tunnel.
pub const ESTABLISHED: &str = "HTTP/1.1 200 Connection established\r\n\r\n";

/// How many clients are served at once by default (`--max-connections`); the next ones wait
/// in the listen backlog.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// How long `serve` waits after a failed accept (e.g. out of file descriptors) before the next.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A request head and what the client sent after it (the start of the tunnel).
#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    /// The bytes up to and including the blank line.
    pub head: Vec<u8>,
    /// The bytes read past the blank line, to be sent to the target first.
    pub rest: Vec<u8>,
}

/// Reads the request head from `stream`, a buffer at a time; `Ok(None)` when the connection
/// closed or sent over [`MAX_HEAD`] bytes without a blank line.
pub async fn read_head<R: tokio::io::AsyncRead + Unpin>(
    stream: &mut R,
) -> std::io::Result<Option<Head>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        // The blank line may straddle two reads: look from 3 bytes before the new ones.
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = from + at + 4;
            if end > MAX_HEAD {
                return Ok(None);
            }
            let rest = buf.split_off(end);
            return Ok(Some(Head { head: buf, rest }));
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
    }
}

/// Handles one client: reads its head, answers, relays.
pub async fn handle(mut client: TcpStream, from: SocketAddr, allow: &[Target]) {
    let Head { head, rest } = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await
    {
        Ok(Ok(Some(h))) => h,
        Ok(Ok(None)) => {
            tracing::info!(%from, "refused: no request head (closed, or over {MAX_HEAD} bytes)");
            // Best effort: the client may be gone already.
            let _ = client.write_all(refusal_response(400).as_bytes()).await;
            return;
        }
        Ok(Err(e)) => {
            tracing::info!(%from, error = %e, "reading the request head");
            return;
        }
        Err(_) => {
            tracing::info!(%from, "refused: no request head within {HEAD_TIMEOUT:?}");
            return;
        }
    };
    let (authority, dial) = match decide(&head, allow) {
        Decision::Refuse { status, reason } => {
            tracing::info!(%from, status, "refused: {reason}");
            // Best effort: the connection is closed right after.
            let _ = client.write_all(refusal_response(status).as_bytes()).await;
            return;
        }
        Decision::Connect { authority, dial } => (authority, dial),
    };
    let upstream = match tokio::time::timeout(HEAD_TIMEOUT, TcpStream::connect(&dial)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::warn!(%from, target = %authority, %dial, error = %e, "refused: dialling the target");
            // Best effort: the connection is closed right after.
            let _ = client.write_all(refusal_response(502).as_bytes()).await;
            return;
        }
        Err(_) => {
            tracing::warn!(%from, target = %authority, %dial, "refused: the target did not answer");
            // Best effort: the connection is closed right after.
            let _ = client.write_all(refusal_response(502).as_bytes()).await;
            return;
        }
    };
    tracing::info!(%from, target = %authority, %dial, "CONNECT");
    // The tunnel's small writes go at once on both sides (HTTP/2 frames, TLS records), as the
    // clients' own connections do: Nagle's algorithm would hold each behind a delayed ACK.
    for (side, stream) in [("client", &client), ("target", &upstream)] {
        if let Err(e) = stream.set_nodelay(true) {
            tracing::warn!(%from, side, error = %e, "setting TCP_NODELAY");
        }
    }
    if let Err(e) = client.write_all(ESTABLISHED.as_bytes()).await {
        tracing::info!(%from, error = %e, "answering CONNECT");
        return;
    }
    let mut upstream = upstream;
    // What the client sent right after its head belongs to the tunnel.
    if let Err(e) = upstream.write_all(&rest).await {
        tracing::info!(%from, target = %authority, error = %e, "tunnel ended");
        return;
    }
    match tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        Ok((up, down)) => tracing::debug!(%from, target = %authority, up, down, "closed"),
        Err(e) => tracing::debug!(%from, target = %authority, error = %e, "tunnel ended"),
    }
}

/// Serves CONNECT on `listener` until the task is dropped, at most `max_connections` clients
/// at once. A failed accept (out of file descriptors, a reset in the backlog) is logged and
/// retried after [`ACCEPT_BACKOFF`]: it never stops the proxy.
pub async fn serve(listener: TcpListener, allow: Vec<Target>, max_connections: usize) {
    let allow = Arc::new(allow);
    let slots = Arc::new(tokio::sync::Semaphore::new(max_connections.max(1)));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            unreachable!("the semaphore is never closed");
        };
        let (stream, from) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection (retrying)");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let allow = Arc::clone(&allow);
        tokio::spawn(async move {
            handle(stream, from, &allow).await;
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests;
