//! Handshake retries, keepalives and session expiry of every peer with an endpoint.

use std::{sync::atomic::Ordering, thread, time::Duration};

use boringtun::noise::{TunnResult, errors::WireGuardError};

use super::{device::Device, rx::BUF};

impl Device {
    /// Handshake retries, keepalives, expiry, every 100 ms.
    /// Peers with no endpoint are skipped: they wait to be called, and their timers start once
    /// an authenticated packet taught us where they are.
    pub(super) fn timer_loop(&self) {
        let mut out = vec![0u8; BUF];
        // boringtun logs every retry of every peer without naming it (a warning each 5 s, an
        // error after 90 s); we log the peer's transitions ourselves, once each, instead.
        let quiet = tracing::Dispatch::none();
        while !self.stopped() {
            thread::sleep(Duration::from_millis(100));
            self.initiate(&self.next_calls());
            let table = self.table();
            for peer in table.by_id.values() {
                if peer.endpoint().is_none() {
                    continue;
                }
                let mut tunn = peer.tunn.lock();
                let r = tracing::dispatcher::with_default(&quiet, || tunn.update_timers(&mut out));
                let expired = matches!(r, TunnResult::Err(WireGuardError::ConnectionExpired));
                if expired != peer.expired.swap(expired, Ordering::Relaxed) {
                    if expired {
                        tracing::warn!(peer = %peer.cfg.id, "no handshake answered; retrying when traffic for the peer or the peer itself arrives");
                    } else {
                        tracing::info!(peer = %peer.cfg.id, "handshaking again");
                    }
                }
                // Sent with the lock released: the data path may need it.
                drop(tunn);
                match r {
                    TunnResult::WriteToNetwork(p) => self.send(peer, p),
                    TunnResult::Err(WireGuardError::ConnectionExpired) | TunnResult::Done => {}
                    TunnResult::Err(e) => {
                        tracing::debug!(peer = %peer.cfg.id, error = ?e, "timers")
                    }
                    _ => {}
                }
            }
        }
    }
}
