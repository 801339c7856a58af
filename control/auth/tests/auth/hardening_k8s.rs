//! liqo-auth's limits against a real apiserver (the `testkit::k8s` harness, one cluster): a
//! request failing its checks and `GET /ids` make no apiserver call (counted by a wrapper of
//! the service's kube client); a client that never finishes the TLS handshake is cut off after
//! the handshake timeout; connections over the limit are closed at once; a body over the
//! limit is answered 413.

#[allow(
    dead_code,
    reason = "helpers shared with the other test files, not all used here"
)]
use crate::common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use control::{consts::auth, identity::AuthToken};
use kube::Client;
use liqo_auth::{client::AuthClient, metrics::Metrics, server};
use testkit::k8s;
use tokio::io::AsyncReadExt;

use common::*;

/// A client that counts the requests it sends to the apiserver.
fn counting(real: Client) -> (Client, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        seen.fetch_add(1, Ordering::SeqCst);
        let real = real.clone();
        async move { real.send(req).await }
    });
    (Client::new(service, "default"), count)
}

/// Waits for the server to close `stream` (read gives end of file or an error) and says how
/// long it took.
async fn closed_after(stream: &mut tokio::net::TcpStream, limit: Duration) -> Duration {
    let t = Instant::now();
    let mut buf = [0u8; 64];
    match tokio::time::timeout(limit, stream.read(&mut buf)).await {
        Ok(Ok(0) | Err(_)) => t.elapsed(),
        Ok(Ok(n)) => panic!("the server sent {n} bytes to a silent client"),
        Err(_) => panic!("connection still open after {limit:?}"),
    }
}

/// The TLS handshake timeout of the service under test: the two silent clients are cut off
/// after it, the third connection must have been refused well before it.
const HANDSHAKE: Duration = Duration::from_secs(24);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_make_no_apiserver_call_and_slow_or_excess_clients_are_cut_off() {
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, ONE).await.unwrap();
    let cluster = &set.clusters[0];
    let admin = cluster.client().await.unwrap();
    let ca = cluster_ca(&cluster.kubeconfig);
    install(&admin).await;

    let (client, calls) = counting(admin.clone());
    let metrics = Metrics::default();
    let mut config = server::Config::new(
        "127.0.0.1:0".parse().unwrap(),
        "liqo",
        cluster.server.clone(),
        Some(ca.clone()),
    );
    // The keeper's first check happens at start; no other during the test.
    config.token_check_period = Duration::from_secs(3600);
    // Long enough that a loaded machine still sees the two silent clients hold their slots
    // (the gauge is polled every 100 ms, for up to 12 s) and refuses the third (within 8 s of
    // its connect) before they are cut off.
    config.handshake_timeout = HANDSHAKE;
    config.max_connections = 2;
    config.metrics = metrics.clone();
    let bound = server::bind(config, client).await.unwrap();
    let addr = bound.local_addr();
    let url = format!("https://{addr}");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(bound.run(async move {
        // A dropped sender stops the server too.
        let _ = stopped.await;
    }));
    let http = AuthClient::new(true);
    let ids = eventually(10, "GET /ids", || {
        let (http, url) = (http.clone(), url.clone());
        async move { http.ids(&url).await.ok() }
    })
    .await;
    assert_eq!(ids.cluster_id.as_str(), MILAN_ID);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // No apiserver call for GET /ids nor for requests failing their checks.
    let before = calls.load(Ordering::SeqCst);
    assert!(
        before >= 2,
        "bind read the identity and the token ({before} calls)"
    );
    let consumer = identity(ROME_ID, "rome");
    let theirs = AuthToken::generate().unwrap();
    let (_, good) = csr(ROME_ID, auth::CSR_ORGANIZATION);
    let wrong = AuthToken::generate().unwrap();
    for _ in 0..3 {
        assert_eq!(http.ids(&url).await.unwrap(), ids);
        let e = http
            .certificate(&url, &request(&consumer, &theirs, Some(&wrong), &good))
            .await
            .unwrap_err();
        assert_eq!(e.http_status(), Some(403), "{e}");
    }
    let e = http
        .certificate(&url, &request(&consumer, &theirs, None, &good))
        .await
        .unwrap_err();
    assert_eq!(e.http_status(), Some(401), "{e}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before,
        "refused requests and GET /ids called the apiserver"
    );
    let text = metrics.encode();
    for line in [
        r#"liqo_auth_requests_total{path="certificate",outcome="wrong_token"} 3"#,
        r#"liqo_auth_requests_total{path="certificate",outcome="no_token"} 1"#,
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }

    // A body over 64 KiB: 413, nothing read further, no apiserver call.
    let ours = liqo_auth::tokens::local_token(&admin, "liqo")
        .await
        .unwrap();
    let before = calls.load(Ordering::SeqCst);
    let huge = "x".repeat(70 * 1024);
    let e = http
        .certificate(&url, &request(&consumer, &theirs, Some(&ours), &huge))
        .await
        .unwrap_err();
    assert_eq!(e.http_status(), Some(413), "{e}");
    assert_eq!(calls.load(Ordering::SeqCst), before);

    // Two silent clients (no TLS handshake) hold the two connection slots (once the service
    // has taken them: its gauge says so, on a loaded machine later than one would guess): a
    // third connection is closed at once and counted; the silent ones are closed after the
    // handshake timeout; then the service answers again.
    let connected = Instant::now();
    let mut a = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut b = tokio::net::TcpStream::connect(addr).await.unwrap();
    // The gauge's values seen while waiting (each change, with its time), for the failure's
    // message: a loaded machine has been seen to miss the window.
    let waited = Instant::now();
    let mut seen = Vec::<(Duration, String)>::new();
    loop {
        let text = metrics.encode();
        let line = text
            .lines()
            .find(|l| l.starts_with("liqo_auth_connections "))
            .unwrap_or("no gauge")
            .to_owned();
        if line == "liqo_auth_connections 2" {
            break;
        }
        if seen.last().map(|(_, l)| l) != Some(&line) {
            seen.push((waited.elapsed(), line));
        }
        // Later, the handshake timeout may cut them off before the third is refused.
        assert!(
            waited.elapsed() < Duration::from_secs(12),
            "both silent connections never held a slot in 12 s; the gauge: {seen:?}; {text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    // Closed by the refusal (counted below), not by the handshake timeout: well before it,
    // even when a loaded machine accepts late (CI runs took over 1 s, once over 4 s).
    let excess = closed_after(&mut c, Duration::from_secs(8)).await;
    assert!(excess < Duration::from_secs(8), "{excess:?}");
    let text = metrics.encode();
    assert!(
        text.lines()
            .any(|l| l == "liqo_auth_connections_refused_total 1"),
        "{text}"
    );
    // Cut off by the handshake timeout, counted from its accept. This wait may start only
    // milliseconds after the accept: allowing the timeout alone, it ended as the server's close
    // came due, and a loaded CI machine closed a little late. The bound here is the margin; the
    // assertion below checks the cut-off did not come early.
    closed_after(&mut a, HANDSHAKE + Duration::from_secs(10)).await;
    let slow = connected.elapsed();
    assert!(
        slow >= HANDSHAKE - Duration::from_secs(1),
        "closed early: {slow:?}"
    );
    closed_after(&mut b, Duration::from_secs(5)).await;
    assert_eq!(http.ids(&url).await.unwrap(), ids);

    stop.send(()).unwrap();
    task.await.unwrap();
    set.release().await.unwrap();
}
