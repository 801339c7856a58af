//! The webhooks' keeper: every period it sets the caBundle again (a reset is undone), and every
//! renew period it checks the Secret's certificates, serving a renewed one (a new CA only once
//! its bundle is read back and [`CA_SETTLE`] has passed, see the parent module). It never makes
//! certificates itself ([`super::ensure_certs`] does) and logs a repeated failure at most once
//! per [`LOG_EVERY`].

use std::sync::Arc;

use kube::Client;

use super::{CA_SETTLE, Config, LOG_EVERY, WebhookError, cabundle, certs, ensure_certs, tls_parts};

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

/// An error and its causes, one line.
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// A renewed certificate whose new CA is in the bundle but not yet served.
struct Pending {
    new: certs::Material,
    /// When the bundle holding the new CA was first read back from both configurations.
    read_back: Option<tokio::time::Instant>,
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
                    Err(e) => tracing::warn!(error = %chain(&e), "the renewed webhook certificate"),
                },
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %chain(&e), "checking the webhook certificates"),
            }
        }
        let now = tokio::time::Instant::now();
        match cabundle::set(&client, bundle.as_bytes()).await {
            Ok(outcome) => {
                failures.clear();
                if let Some(p) = pending.as_mut() {
                    if outcome != cabundle::Outcome::ReadBack {
                        p.read_back = None;
                    } else if let Some(at) = p.read_back {
                        if now.duration_since(at) >= CA_SETTLE {
                            match serve(&p.new) {
                                Ok(()) => {
                                    tracing::info!("serving the certificate of the new webhook CA");
                                    m = p.new.clone();
                                }
                                Err(e) => tracing::warn!(
                                    error = %chain(&e),
                                    "the certificate of the new webhook CA"
                                ),
                            }
                            pending = None;
                        }
                    } else {
                        p.read_back = Some(now);
                    }
                }
            }
            Err(e) => {
                let msg = chain(&e);
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
}
