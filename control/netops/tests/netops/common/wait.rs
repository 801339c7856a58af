//! Waiting for what the operators do: a check polled until it holds or time is up.

use std::time::{Duration, Instant};

/// Waits until `f` is Ok, up to `secs`.
pub(crate) async fn eventually<F, Fut>(secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match f().await {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("{what} after {secs} s: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
