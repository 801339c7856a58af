//! The HTTP/1.1 server: accepts connections until told to stop, hands each request to the pure
//! core ([`crate::logic`]) with the peer address it saw, makes `/call`'s call, counts the
//! answers, logs each request; on stop, refuses new connections and lets those in flight
//! finish (at most [`DRAIN`]).

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use http::{Request, Response, header};
use http_body_util::Full;
use hyper::{
    body::{Bytes, Incoming},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::{rt::TokioIo, server::graceful::GracefulShutdown};
use tokio::net::TcpListener;

use crate::{
    client,
    logic::{
        reply::{self, Identity, Reply},
        route::{Route, route},
    },
};

/// How long the connections in flight may take to finish after the stop (a `/call` takes at
/// most 5 s).
pub(crate) const DRAIN: Duration = Duration::from_secs(10);

/// What every request shares: the pod's identity and the count of answers given.
#[derive(Debug)]
pub(crate) struct State {
    identity: Identity,
    served: AtomicU64,
}

impl State {
    pub(crate) fn new(identity: Identity) -> State {
        State {
            identity,
            served: AtomicU64::new(0),
        }
    }
}

/// Serves on `listener` until `stop` completes, then drains.
pub(crate) async fn serve(
    listener: TcpListener,
    state: Arc<State>,
    stop: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, a connection reset before accept: a short pause
                    // rather than a busy loop.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let state = state.clone();
        let service = service_fn(move |req| handle(state.clone(), peer, req));
        let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    let open = graceful.count();
    tokio::select! {
        () = graceful.shutdown() => tracing::info!(open, "stopped: every connection finished"),
        () = tokio::time::sleep(DRAIN) => {
            tracing::warn!(open, "stopped: connections still open after {} s", DRAIN.as_secs());
        }
    }
}

/// One request: its route, its answer (after the call, for `/call`), a log line.
async fn handle(
    state: Arc<State>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let route = route(req.method(), req.uri(), accept);
    let served = if route.counts() {
        state.served.fetch_add(1, Ordering::Relaxed) + 1
    } else {
        0
    };
    let id = &state.identity;
    let reply = match &route {
        Route::Call(target) => {
            let result = client::get(target).await;
            if let Err(e) = &result {
                tracing::warn!(%peer, error = %e, "call failed");
            }
            reply::called(reply::hello(id, peer, served), &target.url, result)
        }
        other => reply::answer(other, id, peer, served),
    };
    if !matches!(route, Route::Health) {
        tracing::info!(%peer, method = %req.method(), uri = %req.uri(), status = reply.status);
    }
    Ok(response(reply))
}

fn response(reply: Reply) -> Response<Full<Bytes>> {
    Response::builder()
        .status(reply.status)
        .header(header::CONTENT_TYPE, reply.content_type)
        .body(Full::new(Bytes::from(reply.body)))
        .expect("a status from 200 to 599 and a static content type make a valid response")
}
