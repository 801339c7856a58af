//! How the controllers retry: a failed reconcile again after [`RETRY`]; the network manager's
//! reconciles back off from it, doubling up to [`MAX_BACKOFF`].

use std::time::Duration;

/// How soon a failed reconcile is retried.
pub const RETRY: Duration = Duration::from_secs(2);

/// The longest wait between retries of a failing reconcile.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The delay after `n` consecutive failures.
pub fn backoff(n: u32) -> Duration {
    let base = RETRY;
    base.saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    #[test]
    fn retries_back_off_to_a_minute() {
        let s: Vec<u64> = (1..=8).map(|n| super::backoff(n).as_secs()).collect();
        assert_eq!(s, [2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(super::backoff(u32::MAX).as_secs(), 60);
    }
}
