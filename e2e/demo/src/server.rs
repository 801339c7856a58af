//! The HTTP/1.1 server: accepts connections until told to stop, hands each request to the pure
//! core ([`crate::logic`]) with the peer address it saw, makes `/call`'s call and `/append`'s
//! and `/log`'s file operations ([`crate::store`]), counts the answers, logs each request; on
//! stop, refuses new connections and lets those in flight finish (at most [`DRAIN`]).

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
        entry,
        reply::{self, Identity, Reply},
        route::{Route, route},
    },
    store::Store,
};

/// How long the connections in flight may take to finish after the stop (a `/call` takes at
/// most 5 s).
pub(crate) const DRAIN: Duration = Duration::from_secs(10);

/// What every request shares: the pod's identity, the count of answers given, the data
/// directory's store when there is one.
#[derive(Debug)]
pub(crate) struct State {
    identity: Identity,
    served: AtomicU64,
    store: Option<Arc<Store>>,
}

impl State {
    pub(crate) fn new(identity: Identity, store: Option<Store>) -> State {
        State {
            identity,
            served: AtomicU64::new(0),
            store: store.map(Arc::new),
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

/// One request: its route, its answer (after the call, for `/call`; after the file operation,
/// for `/append` and `/log`), a log line.
async fn handle(
    state: Arc<State>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let route = route(req.method(), req.uri(), accept, state.store.is_some());
    let served = if route.counts() {
        state.served.fetch_add(1, Ordering::Relaxed) + 1
    } else {
        0
    };
    let id = &state.identity;
    let reply = match (&route, &state.store) {
        (Route::Call(target), _) => {
            let result = client::get(target).await;
            if let Err(e) = &result {
                tracing::warn!(%peer, error = %e, "call failed");
            }
            reply::called(reply::hello(id, peer, served), &target.url, result)
        }
        (Route::Append(entry), Some(store)) => {
            let line = entry::line(entry, &id.pod, &id.cluster);
            let result = store.clone().append(line.clone()).await;
            match &result {
                Ok(lines) => tracing::info!(%peer, %line, lines, "appended"),
                Err(e) => tracing::warn!(%peer, error = %e, "append failed"),
            }
            reply::appended(reply::hello(id, peer, served), &line, result)
        }
        (Route::Log, Some(store)) => {
            let result = store.clone().read().await;
            if let Err(e) = &result {
                tracing::warn!(%peer, error = %e, "reading the log failed");
            }
            reply::log(result)
        }
        (other, _) => reply::answer(other, id, peer, served),
    };
    if !matches!(route, Route::Health) {
        tracing::info!(%peer, method = %req.method(), uri = %req.uri(), status = reply.status);
    }
    let allow = match route {
        Route::MethodNotAllowed(allow) => Some(allow),
        _ => None,
    };
    Ok(response(reply, allow))
}

/// The response; `allow`: the `Allow` header of a 405.
fn response(reply: Reply, allow: Option<&'static str>) -> Response<Full<Bytes>> {
    let mut builder = Response::builder()
        .status(reply.status)
        .header(header::CONTENT_TYPE, reply.content_type);
    if let Some(allow) = allow {
        builder = builder.header(header::ALLOW, allow);
    }
    builder
        .body(Full::new(Bytes::from(reply.body)))
        .expect("a status from 200 to 599 and static headers make a valid response")
}
