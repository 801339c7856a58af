//! The webhooks' keeper: every period it sets the caBundle again (a reset is undone), and every
//! renew period it checks the Secret's certificates, serving a renewed one (a new CA only once its
//! bundle is read back and [`CA_SETTLE`] has passed, see the parent module). It never makes
//! certificates itself ([`super::setup::ensure_certs`] does) and logs a repeated failure at most
//! once per [`LOG_EVERY`].

use std::sync::Arc;

use kube::Client;

use super::{
    cabundle, certs,
    setup::{CA_SETTLE, Config, LOG_EVERY, WebhookError, ensure_certs, tls_parts},
};

/// Rate-limits a repeated log line: the same message at most once per [`LOG_EVERY`], a new one
/// at once (time as input).
#[derive(Debug, Default)]
struct Throttle(Option<(String, tokio::time::Instant)>);

impl Throttle {
    fn should_log(&mut self, msg: &str, now: tokio::time::Instant) -> bool {
        let log = match &self.0 {
            Some((last, at)) => last != msg || now.duration_since(*at) >= LOG_EVERY,
            None => true,
        };
        if log {
            self.0 = Some((msg.to_owned(), now));
        }
        log
    }

    /// Forgets the last message (after a success, the next failure is logged at once).
    fn clear(&mut self) {
        self.0 = None;
    }
}

/// A renewed certificate whose new CA is in the bundle but not yet served.
struct Pending {
    new: certs::Material,
    /// When the bundle holding the new CA was first read back from both configurations.
    read_back: Option<tokio::time::Instant>,
}

/// A pending new CA at a tick where [`cabundle::set`] found `outcome`: when its bundle was first
/// read back from both configurations (`read_back`, reset by a patch: something had changed it)
/// and whether its certificate may be served now (read back at least [`CA_SETTLE`] ago, so at
/// least one tick after the first read-back).
fn settle(
    read_back: Option<tokio::time::Instant>,
    outcome: cabundle::Outcome,
    now: tokio::time::Instant,
) -> (Option<tokio::time::Instant>, bool) {
    match (outcome, read_back) {
        (cabundle::Outcome::Patched, _) => (None, false),
        (cabundle::Outcome::ReadBack, None) => (Some(now), false),
        (cabundle::Outcome::ReadBack, Some(at)) => (Some(at), now.duration_since(at) >= CA_SETTLE),
    }
}

/// Keeps the caBundle (every `ca_check_period`) and the serving certificate (every
/// `renew_check_period` the Secret is checked as at start: a renewed certificate with the same
/// CA is served from then on; a new CA is added to the caBundle, next to the old one, and its
/// certificate served once the bundle is read back and [`CA_SETTLE`] has passed).
pub(super) async fn keep(
    client: Client,
    config: Config,
    cert: Arc<liqo_auth::https::Replaceable>,
    mut m: certs::Material,
) {
    let serve = |new: &certs::Material| {
        tls_parts(new).and_then(|(chain, key)| cert.replace(chain, key).map_err(WebhookError::Tls))
    };
    let mut bundle = m.ca_cert.clone();
    let mut pending: Option<Pending> = None;
    let mut checked = tokio::time::Instant::now();
    let mut failures = Throttle::default();
    loop {
        tokio::time::sleep(config.ca_check_period).await;
        if pending.is_none() && checked.elapsed() >= config.renew_check_period {
            checked = tokio::time::Instant::now();
            match ensure_certs(&client, &config).await {
                Ok(new) if new.ca_cert != m.ca_cert => {
                    tracing::info!("a new webhook CA: adding it to the caBundle before serving");
                    bundle = format!("{}{}", new.ca_cert, m.ca_cert);
                    pending = Some(Pending {
                        new,
                        read_back: None,
                    });
                }
                Ok(new) if new != m => match serve(&new) {
                    Ok(()) => {
                        tracing::info!("serving the renewed webhook certificate");
                        m = new;
                    }
                    Err(e) => {
                        tracing::warn!(error = %liqo_types::chain(&e), "the renewed webhook certificate")
                    }
                },
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %liqo_types::chain(&e), "checking the webhook certificates")
                }
            }
        }
        let now = tokio::time::Instant::now();
        match cabundle::set(&client, bundle.as_bytes()).await {
            Ok(outcome) => {
                failures.clear();
                if let Some(p) = pending.as_mut() {
                    let ready;
                    (p.read_back, ready) = settle(p.read_back, outcome, now);
                    if ready {
                        match serve(&p.new) {
                            Ok(()) => {
                                tracing::info!("serving the certificate of the new webhook CA");
                                m = p.new.clone();
                            }
                            Err(e) => tracing::warn!(
                                error = %liqo_types::chain(&e),
                                "the certificate of the new webhook CA"
                            ),
                        }
                        pending = None;
                    }
                }
            }
            Err(e) => {
                let msg = liqo_types::chain(&e);
                if failures.should_log(&msg, now) {
                    tracing::warn!(error = %msg, "caBundle not set (tried again every period)");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_same_failure_is_logged_once_per_period_a_new_one_at_once() {
        let t0 = tokio::time::Instant::now();
        let mut t = Throttle::default();
        assert!(t.should_log("a", t0));
        assert!(!t.should_log("a", t0 + Duration::from_secs(5)));
        assert!(!t.should_log("a", t0 + LOG_EVERY - Duration::from_secs(1)));
        assert!(t.should_log("b", t0 + Duration::from_secs(10)));
        assert!(!t.should_log("b", t0 + Duration::from_secs(15)));
        assert!(t.should_log("b", t0 + Duration::from_secs(10) + LOG_EVERY));
        t.clear();
        assert!(t.should_log("b", t0 + Duration::from_secs(10) + LOG_EVERY));
    }

    #[test]
    fn a_new_ca_is_served_only_after_its_bundle_is_read_back_and_settled() {
        use cabundle::Outcome::{Patched, ReadBack};
        let t0 = tokio::time::Instant::now();
        let tick = Duration::from_secs(5);
        // Patched: not yet read back.
        assert_eq!(settle(None, Patched, t0), (None, false));
        // First read back: not served at once.
        assert_eq!(settle(None, ReadBack, t0 + tick), (Some(t0 + tick), false));
        // One tick later, before CA_SETTLE: still not.
        assert_eq!(
            settle(Some(t0 + tick), ReadBack, t0 + 2 * tick),
            (Some(t0 + tick), false)
        );
        // Something reset the bundle (patched again): start over.
        assert_eq!(
            settle(Some(t0 + tick), Patched, t0 + 3 * tick),
            (None, false)
        );
        // Read back CA_SETTLE ago: served.
        assert_eq!(settle(Some(t0), ReadBack, t0 + CA_SETTLE), (Some(t0), true));
    }
}
