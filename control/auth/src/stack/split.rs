//! Which connection a request to a Kubernetes API server takes ([`Split`]): a stream that may
//! stay open for long (a watch, a followed log, an upgrade to exec or attach) takes an
//! HTTP/1.1 connection of its own, as before; every other request takes the HTTP/2 connection
//! shared by all of them, when the server agrees to HTTP/2.
//!
//! Why not every request over HTTP/2: a kube-apiserver lets a connection carry 100 streams at
//! once (it says so in its SETTINGS; `--http2-max-streams-per-connection`; 100 by default since
//! the 2023 fix of HTTP/2's rapid reset, 250 before), and hyper's client
//! queues further streams on that connection instead of opening another (Go's does open
//! another). A virtual kubelet watches each reflected kind in each offloaded namespace: past
//! 100 streams its watches, and the requests queued behind them, would wait for ever. A
//! request ends on its own, so the ones on the shared connection only wait their turn; and
//! an upgrade needs HTTP/1.1 anyway.

use std::task::{Context, Poll};

/// Two services: `streams` for a request whose answer may stay open ([`streams`]), `requests`
/// for every other.
#[derive(Clone, Debug)]
pub struct Split<S> {
    /// For watches, followed logs and upgrades.
    pub streams: S,
    /// For every other request.
    pub requests: S,
}

/// Whether `request`'s answer may stay open for long: it asks for an upgrade (exec, attach,
/// port-forward), or its query has `watch` or `follow` set to anything but `false` or `0` (as
/// the API server reads them). The deprecated `/api/v1/watch/...` paths are not recognised:
/// kube never asks for them.
pub fn streams<B>(request: &http::Request<B>) -> bool {
    if request.headers().contains_key(http::header::UPGRADE) {
        return true;
    }
    request.uri().query().is_some_and(|q| {
        q.split('&').any(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            matches!(name, "watch" | "follow")
                && !value.eq_ignore_ascii_case("false")
                && value != "0"
        })
    })
}

impl<S, B> tower::Service<http::Request<B>> for Split<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    /// Ready when both are (hyper's client always is): the one a request does not take keeps
    /// whatever its readiness reserved.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        match self.streams.poll_ready(cx) {
            Poll::Ready(Ok(())) => self.requests.poll_ready(cx),
            other => other,
        }
    }

    fn call(&mut self, request: http::Request<B>) -> S::Future {
        if streams(&request) {
            self.streams.call(request)
        } else {
            self.requests.call(request)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        convert::Infallible,
        future::{Ready, ready},
    };

    use tower::{Service, ServiceExt};

    use super::*;

    fn get(uri: &str) -> http::Request<()> {
        http::Request::get(uri).body(()).unwrap()
    }

    #[test]
    fn watches_followed_logs_and_upgrades_are_streams() {
        assert!(streams(&get("/api/v1/pods?watch=true")));
        assert!(streams(&get(
            "/api/v1/namespaces/a/pods?labelSelector=x%3Dy&watch=1&resourceVersion=5"
        )));
        assert!(streams(&get("/api/v1/namespaces/a/pods/p/log?follow=true")));
        let mut exec = get("/api/v1/namespaces/a/pods/p/exec?command=sh");
        exec.headers_mut()
            .insert(http::header::UPGRADE, "websocket".parse().unwrap());
        assert!(streams(&exec));
        // As the API server reads a boolean: anything but false or 0.
        assert!(streams(&get("/api/v1/pods?watch=True")));
        assert!(streams(&get("/api/v1/pods?watch=")));
        assert!(streams(&get("/api/v1/pods?watch")));
        assert!(!streams(&get("/api/v1/pods?watch=FALSE")));
        // Plain requests, and the parameters said false.
        assert!(!streams(&get("/api/v1/pods")));
        assert!(!streams(&get("/api/v1/pods?limit=500&watch=false")));
        assert!(!streams(&get(
            "/api/v1/namespaces/a/pods/p/log?follow=false"
        )));
        assert!(!streams(&get(
            "/api/v1/namespaces/watch/pods?fieldSelector=watch"
        )));
    }

    /// Answers with its own name.
    #[derive(Clone)]
    struct Named(&'static str);

    impl Service<http::Request<()>> for Named {
        type Response = &'static str;
        type Error = Infallible;
        type Future = Ready<Result<&'static str, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            ready(Ok(self.0))
        }
    }

    #[tokio::test]
    async fn a_stream_takes_the_streams_service_and_a_request_the_other() {
        let split = Split {
            streams: Named("streams"),
            requests: Named("requests"),
        };
        let watch = split.clone().oneshot(get("/api/v1/pods?watch=true")).await;
        assert_eq!(watch, Ok("streams"));
        let list = split.oneshot(get("/api/v1/pods")).await;
        assert_eq!(list, Ok("requests"));
    }
}
