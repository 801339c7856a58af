//! Handshake retries, keepalives and session expiry of every peer with an endpoint; and the
//! first handshake initiations to new peers, a hub's hundreds paced over the timer's ticks.

use std::{sync::atomic::Ordering, thread, time::Duration};

use boringtun::noise::{TunnResult, errors::WireGuardError};

use super::{
    state::Device,
    tuning::{BUF, INITIATIONS_PER_TICK},
};

impl Device {
    /// Sends a handshake initiation to each of these peers (those still in the table and with an
    /// endpoint).
    pub(super) fn initiate(&self, ids: &[String]) {
        let table = self.table();
        let mut out = vec![0u8; 256];
        for peer in ids.iter().filter_map(|id| table.by_id.get(id)) {
            // A paced peer may have called us meanwhile: its session is up, nothing to start.
            let handshaken = peer.tunn.started().is_some_and(|t| {
                t.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .stats()
                    .0
                    .is_some()
            });
            if peer.endpoint().is_none() || handshaken {
                continue;
            }
            let r = peer
                .tunn
                .lock()
                .format_handshake_initiation(&mut out, false);
            if let TunnResult::WriteToNetwork(init) = r {
                self.send(peer, init);
            }
        }
    }

    /// Up to [`INITIATIONS_PER_TICK`] of the peers still waiting for their first initiation.
    pub(super) fn next_calls(&self) -> Vec<String> {
        let mut q = self.pending_calls.lock().unwrap_or_else(|p| p.into_inner());
        let n = q.len().min(INITIATIONS_PER_TICK);
        q.drain(..n).collect()
    }

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
