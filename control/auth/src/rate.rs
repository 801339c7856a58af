//! Client-side rate limits of the components' Kubernetes clients ([`Limits`]): a token bucket
//! of `qps` requests a second that holds up to `burst` ([`Bucket`], pure: time is an input),
//! and the tower layer that puts it in front of a client ([`RateLimitLayer`]: a request waits
//! for its token before it is sent, in order). A watch takes one token when it starts.
//!
//! The virtual kubelet has one per API server (`--home-api-server-qps/-burst`,
//! `--foreign-api-server-qps/-burst`), the controller-manager one for its own
//! (`--api-server-qps/-burst`): a burst of ten thousand pods is paced at a rate an operator
//! chose, not at whatever the API server takes.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll, ready},
    time::{Duration, Instant},
};

/// A client's rate limits: `qps` requests a second on average, `burst` at once; `qps` 0 is no
/// limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Requests a second (0: unlimited).
    pub qps: f64,
    /// Requests at once (at least 1 when limited).
    pub burst: u32,
}

/// The default of the components' clients: 500 requests a second, 1,000 at once (a virtual
/// kubelet makes two writes per pod at home under kwok, the status carrying its label and the
/// delete: about 250 new pods a second).
pub const DEFAULT: Limits = Limits {
    qps: 500.0,
    burst: 1000,
};

/// The lowest rate a limited client may have: a request waits at most `burst` / this long.
pub const MIN_QPS: f64 = 0.01;

/// Limits that do not hold (named in the error).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LimitsError {
    /// `qps` is negative, not a number, or below [`MIN_QPS`] but not 0.
    #[error("{flag} {qps}: requests a second must be 0 (unlimited) or at least {MIN_QPS}")]
    Qps {
        /// The flag.
        flag: String,
        /// Its value.
        qps: f64,
    },
    /// `burst` is 0 while `qps` limits.
    #[error("{flag} 0: a limited client needs a burst of at least 1")]
    Burst {
        /// The flag.
        flag: String,
    },
}

impl Limits {
    /// Checked limits; `flags` names the two flags they came from (`--home-api-server`: its
    /// `-qps` and `-burst`).
    pub fn new(flags: &str, qps: f64, burst: u32) -> Result<Self, LimitsError> {
        if !qps.is_finite() || qps < 0.0 || (qps > 0.0 && qps < MIN_QPS) {
            return Err(LimitsError::Qps {
                flag: format!("{flags}-qps"),
                qps,
            });
        }
        if qps > 0.0 && burst == 0 {
            return Err(LimitsError::Burst {
                flag: format!("{flags}-burst"),
            });
        }
        Ok(Self { qps, burst })
    }

    /// Whether requests are limited at all.
    pub fn limited(&self) -> bool {
        self.qps > 0.0
    }
}

/// A token bucket: tokens come at `qps` a second up to `burst`; each request takes one, and
/// one that finds none waits until its token comes (tokens go below zero: later requests
/// queue behind it, in order).
#[derive(Debug, Clone)]
pub struct Bucket {
    limits: Limits,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn new(limits: Limits, now: Instant) -> Self {
        Self {
            limits,
            tokens: f64::from(limits.burst),
            at: now,
        }
    }

    /// Takes a token for a request made at `now`: how long it waits before it is sent.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if !self.limits.limited() {
            return Duration::ZERO;
        }
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = self.at.max(now);
        self.tokens = (self.tokens + elapsed * self.limits.qps).min(f64::from(self.limits.burst));
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.limits.qps)
        }
    }
}

/// The layer that holds each request until the bucket gives it a token; its clones (and the
/// services it makes) share one bucket.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Option<Arc<Mutex<Bucket>>>,
}

impl RateLimitLayer {
    /// A layer with `limits` (unlimited: requests pass at once).
    pub fn new(limits: Limits) -> Self {
        Self {
            bucket: limits
                .limited()
                .then(|| Arc::new(Mutex::new(Bucket::new(limits, Instant::now())))),
        }
    }
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            reserved: false,
            wait: None,
        }
    }
}

/// A service whose requests wait for their token ([`RateLimitLayer`]). The wait is in
/// `poll_ready`: a caller (kube's client: one buffer in front of it) sends the next request
/// only once this one may go.
pub struct RateLimited<S> {
    inner: S,
    bucket: Option<Arc<Mutex<Bucket>>>,
    reserved: bool,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S, R> tower::Service<R> for RateLimited<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if let Some(bucket) = &self.bucket
            && !self.reserved
        {
            self.reserved = true;
            let wait = bucket
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .reserve(Instant::now());
            if !wait.is_zero() {
                self.wait = Some(Box::pin(tokio::time::sleep(wait)));
            }
        }
        if let Some(wait) = &mut self.wait {
            ready!(wait.as_mut().poll(cx));
            self.wait = None;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.reserved = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(qps: f64, burst: u32) -> Limits {
        Limits::new("--x", qps, burst).unwrap()
    }

    #[test]
    fn a_burst_goes_at_once_then_requests_queue_at_the_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::new(limits(10.0, 3), t0);
        let waits: Vec<u128> = (0..6).map(|_| b.reserve(t0).as_millis()).collect();
        assert_eq!(waits, [0, 0, 0, 100, 200, 300]);
        // A second later the queue has drained and 7 tokens came: 3 fit (the burst).
        let t1 = t0 + Duration::from_millis(1300);
        let waits: Vec<u128> = (0..4).map(|_| b.reserve(t1).as_millis()).collect();
        assert_eq!(waits, [0, 0, 0, 100]);
    }

    #[test]
    fn unlimited_never_waits_and_bad_limits_are_named() {
        let t0 = Instant::now();
        let mut b = Bucket::new(limits(0.0, 0), t0);
        assert!((0..10_000).all(|_| b.reserve(t0).is_zero()));
        assert_eq!(
            Limits::new("--home-api-server", -1.0, 5)
                .unwrap_err()
                .to_string(),
            "--home-api-server-qps -1: requests a second must be 0 (unlimited) or at least 0.01"
        );
        assert_eq!(
            Limits::new("--home-api-server", 5.0, 0)
                .unwrap_err()
                .to_string(),
            "--home-api-server-burst 0: a limited client needs a burst of at least 1"
        );
        assert!(Limits::new("--x", f64::NAN, 5).is_err());
        assert!(Limits::new("--x", 1e-30, 5).is_err());
    }

    #[tokio::test]
    async fn the_layer_holds_requests_until_their_token() {
        use tower::{Service, ServiceExt};
        let layer = RateLimitLayer::new(limits(100.0, 2));
        let mut svc = tower::Layer::layer(
            &layer,
            tower::service_fn(|r: u32| async move { Ok::<_, std::convert::Infallible>(r) }),
        );
        let start = Instant::now();
        let mut sent = Vec::new();
        for i in 0..5 {
            sent.push(svc.ready().await.unwrap().call(i).await.unwrap());
        }
        assert_eq!(sent, [0, 1, 2, 3, 4]);
        // Two at once, then one each 10 ms: the fifth waited at least 30 ms.
        assert!(
            start.elapsed() >= Duration::from_millis(30),
            "{:?}",
            start.elapsed()
        );
        // Two services of one layer share its bucket: one token a second, taken by the first.
        let slow = RateLimitLayer::new(limits(1.0, 1));
        let echo =
            || tower::service_fn(|r: u32| async move { Ok::<_, std::convert::Infallible>(r) });
        let (mut a, mut b) = (
            tower::Layer::layer(&slow, echo()),
            tower::Layer::layer(&slow, echo()),
        );
        a.ready().await.unwrap().call(0).await.unwrap();
        let before = Instant::now();
        b.ready().await.unwrap().call(1).await.unwrap();
        assert!(
            before.elapsed() >= Duration::from_millis(900),
            "{:?}",
            before.elapsed()
        );
    }
}
