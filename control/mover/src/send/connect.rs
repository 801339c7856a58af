//! The sender's connection: the name resolved again at every try, each of its addresses tried,
//! once a second until the connect timeout (the receiver's Service and its DNS name may come
//! after the sender starts).

use std::{
    io,
    net::{TcpStream, ToSocketAddrs},
    time::{Duration, Instant},
};

/// No connection to the receiver within the connect timeout.
#[derive(Debug, thiserror::Error)]
#[error("connecting to {to} for {secs} s")]
pub struct ConnectError {
    /// The receiver.
    pub to: String,
    /// The connect timeout.
    pub secs: u64,
    /// The last failure.
    #[source]
    pub source: io::Error,
}

/// Connects to `to` (`host:port`), resolving it again and retrying every second until
/// `timeout` passed.
pub(super) fn connect(to: &str, timeout: Duration) -> Result<TcpStream, ConnectError> {
    let deadline = Instant::now() + timeout;
    let mut attempt = 0u64;
    loop {
        attempt += 1;
        let err = match to.to_socket_addrs() {
            Ok(addrs) => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, "no address for the name");
                for addr in addrs {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let wait = left.clamp(Duration::from_millis(200), Duration::from_secs(10));
                    match TcpStream::connect_timeout(&addr, wait) {
                        Ok(s) => return Ok(s),
                        Err(e) => last = e,
                    }
                }
                last
            }
            Err(e) => e,
        };
        if Instant::now() + Duration::from_secs(1) > deadline {
            return Err(ConnectError {
                to: to.to_owned(),
                secs: timeout.as_secs(),
                source: err,
            });
        }
        if attempt == 1 || attempt.is_multiple_of(10) {
            tracing::info!(to, attempt, error = %err, "not connected yet; retrying every second");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Whether `s` is a `host:port` (for the command line).
pub fn parse_target(s: &str) -> Result<String, String> {
    match s.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {
            Ok(s.to_owned())
        }
        _ => Err(format!("{s:?} is not HOST:PORT")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_needs_a_host_and_a_port() {
        for ok in ["liqo-mover.ns.svc:7000", "10.0.0.1:1", "[::1]:80"] {
            assert_eq!(parse_target(ok).as_deref(), Ok(ok));
        }
        for bad in ["host", "host:", ":80", "host:0", "host:65536", "host:http"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn gives_up_at_the_connect_timeout_naming_the_target() {
        // A port nothing listens on (bound, then closed).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let to = format!("127.0.0.1:{port}");
        let t0 = Instant::now();
        let err = connect(&to, Duration::from_secs(2)).unwrap_err();
        assert!(t0.elapsed() >= Duration::from_secs(1), "{:?}", t0.elapsed());
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        assert!(
            matches!(&err, ConnectError { to: t, secs: 2, .. } if *t == to),
            "{err:?}"
        );
    }
}
