//! `/exec` and `/attach`: the home API server's WebSocket (`v5.channel.k8s.io` or
//! `v4.channel.k8s.io`; it proxies the client's stream as it is to a node that declares
//! `ExtendWebSocketsToKubelet` in `status.declaredFeatures`) bridged to the provider's
//! `pods/exec` or `pods/attach` of the same pod (kube-rs, WebSocket too).
//!
//! Channels, one byte before each binary frame: 0 stdin, 1 stdout, 2 stderr, 3 error (the
//! final `Status`), 4 resize (`{"Width":…,"Height":…}`); with v5, `[255, 0]` closes stdin.
//! The remote pod is checked (ours) and the remote exec opened before answering 101, so that
//! every failure up to there is a plain HTTP error the API server relays. SPDY (the API
//! server's transport to a node that does not declare WebSockets) is refused with 400.

use std::{pin::Pin, sync::Arc};

use futures::{SinkExt as _, StreamExt as _};
use hyper::{
    Request, Response, StatusCode,
    header::{self, HeaderMap, HeaderValue},
};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{AttachedProcess, TerminalSize};
use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _},
    task::JoinSet,
};
use tokio_tungstenite::{
    WebSocketStream,
    tungstenite::{
        Message,
        handshake::derive_accept_key,
        protocol::{CloseFrame, Role, frame::coding::CloseCode},
    },
};

use super::{
    common::{Body, Bridges, lock, relay, text},
    lookup::{check_uid, remote_namespace},
    query::{self, Target},
};
use crate::VkConfig;

/// The stream protocols served, preferred first.
const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];
/// The channel bytes.
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// The protocol to answer with: the first of [`PROTOCOLS`] the client offers.
pub(super) fn protocol(headers: &HeaderMap) -> Option<&'static str> {
    let offered: Vec<String> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_owned())
        .collect();
    PROTOCOLS
        .into_iter()
        .find(|p| offered.iter().any(|o| o == p))
}

/// Whether the request asks for a WebSocket.
fn is_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Answers `/exec` (`exec`) or `/attach` for `t`.
pub(super) async fn handle(
    cfg: Arc<VkConfig>,
    t: Target,
    pairs: &[(String, String)],
    exec: bool,
    bridges: &Bridges,
    req: Request<hyper::body::Incoming>,
) -> Response<Body> {
    let headers = req.headers();
    if !is_websocket(headers) {
        let upgrade = headers
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        return text(
            StatusCode::BAD_REQUEST,
            format!(
                "this virtual kubelet serves exec and attach over WebSocket only (v5/v4.channel.k8s.io), not over {upgrade:?}: the node must declare ExtendWebSocketsToKubelet"
            ),
        );
    }
    let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY).cloned() else {
        return text(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key");
    };
    let Some(proto) = protocol(headers) else {
        return text(
            StatusCode::BAD_REQUEST,
            format!(
                "none of the offered stream protocols is served (want one of {})",
                PROTOCOLS.join(", ")
            ),
        );
    };
    let (ap, command) = match query::attach_params(pairs, &t.container, exec) {
        Ok(p) => p,
        Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
    };
    if let Err(r) = check_uid(&cfg, &t).await {
        return r;
    }
    let remote_ns = match remote_namespace(&cfg, &t).await {
        Ok(ns) => ns,
        Err(r) => return r,
    };
    // An interactive session may stay silent for long: the watch client's long read timeout.
    let pods: kube::Api<Pod> = kube::Api::namespaced(cfg.remote.watch.clone(), &remote_ns);
    let attached = if exec {
        pods.exec(&t.pod, command, &ap).await
    } else {
        pods.attach(&t.pod, &ap).await
    };
    let attached = match attached {
        Ok(a) => a,
        Err(e) => return relay("opening the provider's stream", &e),
    };
    let upgrade = hyper::upgrade::on(req);
    let v5 = proto == PROTOCOLS[0];
    lock(bridges).spawn(async move {
        match upgrade.await {
            Ok(io) => {
                let ws =
                    WebSocketStream::from_raw_socket(TokioIo::new(io), Role::Server, None).await;
                bridge(ws, attached, v5).await;
            }
            Err(e) => tracing::debug!(error = %e, "kubelet API: the exec upgrade failed"),
        }
    });
    let mut r = text(StatusCode::SWITCHING_PROTOCOLS, "");
    let h = r.headers_mut();
    h.remove(header::CONTENT_TYPE);
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(proto),
    );
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    r
}

/// Copies `r` into frames of `channel` until its end.
async fn pump(mut r: impl AsyncRead + Unpin, channel: u8, out: tokio::sync::mpsc::Sender<Vec<u8>>) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut frame = Vec::with_capacity(n + 1);
                frame.push(channel);
                frame.extend_from_slice(&buf[..n]);
                if out.send(frame).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The size in a resize frame.
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Size {
    width: u16,
    height: u16,
}

/// The Status sent last on the error channel: the provider's, or a failure when it ended the
/// stream without one.
fn final_status(status: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>) -> Vec<u8> {
    let body = match status {
        Some(s) => serde_json::to_value(&s).ok(),
        None => None,
    }
    .unwrap_or_else(|| {
        serde_json::json!({
            "metadata": {}, "status": "Failure",
            "message": "the provider ended the stream without a status",
        })
    });
    let mut frame = vec![ERROR];
    frame.extend_from_slice(body.to_string().as_bytes());
    frame
}

/// Writes the chunks of `chunks` to the remote stdin `w` until the channel closes (the client
/// closed its stdin, or the bridge ended), then closes it. Its own task: a remote stdin that
/// does not take more never stops the bridge from relaying the outputs.
async fn feed_stdin(
    mut w: impl tokio::io::AsyncWrite + Unpin,
    mut chunks: tokio::sync::mpsc::Receiver<Vec<u8>>,
) {
    while let Some(chunk) = chunks.recv().await {
        if let Err(e) = w.write_all(&chunk).await {
            tracing::debug!(error = %e, "kubelet API: the remote stdin is closed");
            return;
        }
    }
    if let Err(e) = w.shutdown().await {
        // The remote end may be gone already: nothing left to close then.
        tracing::debug!(error = %e, "kubelet API: closing the remote stdin");
    }
}

/// Relays between the home API server's WebSocket and the provider's process until the
/// process ends (its output drained, then its Status sent) or the home side goes away.
/// The client's stdin is handed to [`feed_stdin`] through a bounded channel; while that is
/// full the client is not read (back-pressure), but the outputs keep flowing, so neither side
/// waits on the other. Its tasks (output pumps, stdin) end with it.
async fn bridge<S>(ws: WebSocketStream<S>, mut proc: AttachedProcess, v5: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut tx, mut rx) = ws.split();
    let mut tasks = JoinSet::new();
    let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    if let Some(r) = proc.stdout() {
        tasks.spawn(pump(r, STDOUT, out_tx.clone()));
    }
    if let Some(r) = proc.stderr() {
        tasks.spawn(pump(r, STDERR, out_tx.clone()));
    }
    drop(out_tx);
    let mut stdin = proc.stdin().map(|w| {
        let (chunks_tx, chunks_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
        tasks.spawn(feed_stdin(w, chunks_rx));
        chunks_tx
    });
    // A stdin chunk read from the client, waiting for room in the stdin channel.
    let mut pending: Option<Vec<u8>> = None;
    let mut resize = proc.terminal_size();
    let mut status: Option<
        Pin<
            Box<
                dyn Future<Output = Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>>
                    + Send,
            >,
        >,
    > = proc.take_status().map(|f| Box::pin(f) as _);
    let mut outputs_open = true;
    let final_frame = loop {
        tokio::select! {
            room = async {
                match stdin.clone() {
                    Some(s) => s.reserve_owned().await.ok(),
                    None => None,
                }
            }, if pending.is_some() => {
                if let (Some(room), Some(chunk)) = (room, pending.take()) {
                    room.send(chunk);
                } else {
                    // The stdin task ended (the remote stdin is closed): the rest is dropped.
                    stdin = None;
                }
            },
            m = rx.next(), if pending.is_none() => match m {
                Some(Ok(Message::Binary(b))) => match b.first().copied() {
                    Some(STDIN) if stdin.is_some() && b.len() > 1 => {
                        pending = Some(b[1..].to_vec());
                    }
                    Some(RESIZE) => {
                        if let (Some(tx), Ok(s)) =
                            (resize.as_mut(), serde_json::from_slice::<Size>(&b[1..]))
                        {
                            // A full queue of resizes: this one is dropped, a later one wins.
                            let _ = tx.try_send(TerminalSize { width: s.width, height: s.height });
                        }
                    }
                    // Closing the channel: the stdin task writes what it holds, then closes.
                    Some(CLOSE) if v5 && b.get(1) == Some(&STDIN) => stdin = None,
                    _ => {}
                },
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break None,
                Some(Ok(_)) => {}
            },
            o = out_rx.recv(), if outputs_open => match o {
                Some(frame) => {
                    if tx.send(Message::binary(frame)).await.is_err() {
                        break None;
                    }
                }
                None => outputs_open = false,
            },
            s = async { match status.as_mut() { Some(f) => f.await, None => None } }, if !outputs_open => {
                status = None;
                break Some(final_status(s));
            },
        }
    };
    if let Some(frame) = final_frame {
        // A failed send means the home side has gone meanwhile: there is no one to tell.
        let _ = tx.send(Message::binary(frame)).await;
        // A normal close (1000): the client reads it as the end of every stream, where a
        // close without a code is an error that hides the status just sent. A failure: the
        // home side has gone, as above.
        let _ = tx
            .send(Message::Close(Some(CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            })))
            .await;
        // Flushing and closing the socket; a failure: the home side has gone, as above.
        let _ = tx.close().await;
    }
    drop(status);
    proc.abort();
    // Dropping `tasks` aborts a stdin task still blocked on the remote (the process is over).
    drop(tasks);
}
