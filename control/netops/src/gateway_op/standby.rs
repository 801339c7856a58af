//! Active/standby gateways (`--leader-elect`): each replica's operator elects on the Lease
//! `liqo-gateway` (its identity the node's name, which the route operators route to) with
//! [`liqo_lease::Elector`] and [`TIMING`]. A standby's gateway runs [`config`] (the key, no
//! peer), so a gateway that comes back after a crash never answers beside the active one; the
//! active operator gives the Lease back as soon as its gateway stops answering
//! ([`until_gone`]), so the standby takes over at its next try instead of at the Lease's
//! expiry. It decides nothing about peers: once elected, the operator reconciles as a single
//! gateway's does.

use std::time::Duration;

use control::{leader::Timing, network::gateway};
use liqo_gateway_api::config::File;

use crate::{
    error::OpError,
    files::{self, StatusUrl},
};

/// The gateways' election: a standby takes over 3 s after it last saw a silent active renew
/// (a crashed node), at its next try (0.5 s) after an active gave the Lease back.
pub const TIMING: Timing = Timing {
    lease_duration: Duration::from_secs(3),
    renew_deadline: Duration::from_secs(2),
    retry_period: Duration::from_millis(500),
};

/// How often the active operator looks at its gateway, and how many looks in a row may fail
/// before it counts as gone (one failed look can be a busy gateway).
pub const WATCH: (Duration, u32) = (Duration::from_millis(250), 3);

/// The standby's gateway config: the base with the key file, without any peer.
pub fn config(base: &File, key_file: Option<&str>) -> Result<String, OpError> {
    Ok(gateway::render(
        base,
        key_file,
        None,
        &Default::default(),
        &Default::default(),
    )?
    .text)
}

/// Returns once the gateway at `url`, having answered at least once, fails `misses` looks in a
/// row (one every `every`): the last failure.
pub async fn until_gone(url: &StatusUrl, every: Duration, misses: u32) -> String {
    let mut answered = false;
    let mut failed = 0;
    loop {
        tokio::time::sleep(every).await;
        match files::fetch_async::<serde_json::Value>(url).await {
            Ok(_) => {
                answered = true;
                failed = 0;
            }
            Err(e) if answered => {
                failed += 1;
                if failed >= misses {
                    return liqo_types::chain(&e);
                }
            }
            // Not up yet: a gateway that never answered is not gone.
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timing_is_one_the_election_accepts() {
        let t = Timing::new(
            TIMING.lease_duration,
            TIMING.renew_deadline,
            TIMING.retry_period,
        )
        .unwrap();
        assert_eq!(t, TIMING);
    }

    #[test]
    fn a_standby_config_has_no_peer_and_keeps_the_key_file() {
        let base = File::parse("localPodCIDR: 10.200.0.0/16\n").unwrap();
        let text = config(&base, Some("/run/liqo/gateway.key")).unwrap();
        let f = File::parse(&text).unwrap();
        assert!(f.peers.is_empty(), "{text}");
        assert_eq!(f.private_key_file.as_deref(), Some("/run/liqo/gateway.key"));
    }

    #[tokio::test]
    async fn a_gateway_that_never_answered_is_not_gone_and_one_that_stops_is() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let url = StatusUrl {
            addr,
            path: "/status".into(),
        };
        // Nothing listens: never answered, so never gone.
        let waited = tokio::time::timeout(
            Duration::from_millis(300),
            until_gone(&url, Duration::from_millis(20), 2),
        )
        .await;
        assert!(waited.is_err(), "gone without ever answering");

        // A status that answers twice, then its listener is closed: gone.
        let listener = std::net::TcpListener::bind(addr).unwrap();
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            for _ in 0..2 {
                let (mut s, _) = listener.accept().unwrap();
                let mut buf = [0u8; 1024];
                let _read = s.read(&mut buf).unwrap();
                s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{}")
                    .unwrap();
            }
        });
        let why = tokio::time::timeout(
            Duration::from_secs(5),
            until_gone(&url, Duration::from_millis(20), 2),
        )
        .await
        .expect("gone once its status stops answering");
        server.join().unwrap();
        assert!(why.contains(&addr.to_string()), "{why}");
    }
}
