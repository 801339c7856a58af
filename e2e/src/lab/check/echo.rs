//! The TCP half of a probe: an echo server in the target pod that writes back the client
//! address it sees ([`echo_server`]), and the client that dials it ([`tcp_probe_within`]).

use std::{
    io::{Read, Write},
    net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::Duration,
};

use dataplane::{Netns, NetnsName};

use crate::lab::LabError;

/// TCP port of the echo server inside each probed pod.
pub const ECHO_PORT: u16 = 7777;
const TIMEOUT: Duration = Duration::from_secs(2);

/// Why a TCP probe failed (the causes are shared, so that a [`super::Probe`] stays cheap to
/// clone).
#[derive(Debug, Clone, thiserror::Error)]
pub enum TcpProbeError {
    /// The source pod's namespace could not be opened or entered.
    #[error(transparent)]
    Netns(Arc<dataplane::netns::Error>),
    /// Connecting to the server or reading its answer failed.
    #[error(transparent)]
    Io(Arc<std::io::Error>),
    /// The server answered something that is not an address.
    #[error("bad echo reply {0:?}")]
    BadReply(String),
}

/// Connects to the echo server at `addr` (from the calling thread's namespace) and returns the
/// client address the server saw.
pub(super) fn tcp_probe(addr: Ipv4Addr) -> Result<Ipv4Addr, TcpProbeError> {
    tcp_probe_within(addr, TIMEOUT)
}

/// [`tcp_probe`] with its own timeout.
pub(crate) fn tcp_probe_within(
    addr: Ipv4Addr,
    timeout: Duration,
) -> Result<Ipv4Addr, TcpProbeError> {
    let io = |e| TcpProbeError::Io(Arc::new(e));
    let mut s =
        TcpStream::connect_timeout(&SocketAddr::from((addr, ECHO_PORT)), timeout).map_err(io)?;
    s.set_read_timeout(Some(timeout)).map_err(io)?;
    let mut seen = String::new();
    s.read_to_string(&mut seen).map_err(io)?;
    seen.trim()
        .parse()
        .map_err(|_| TcpProbeError::BadReply(seen))
}

/// A TCP server in `ns` that writes each client's address back, until `stop` is set.
pub(crate) fn echo_server(
    ns_name: &NetnsName,
    stop: Arc<AtomicBool>,
) -> Result<thread::JoinHandle<()>, LabError> {
    let ns = Netns::open(ns_name)?;
    let listener = ns
        .run(|| bind_echo(ns_name))?
        .map_err(|e| LabError::Build {
            what: format!("echo server in {ns_name}"),
            source: Box::new(e),
        })?;
    Ok(thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut conn, peer)) => {
                    // A failed answer shows as a failed probe on the client's side.
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.write_all(peer.ip().to_string().as_bytes());
                }
                Err(_) => thread::sleep(Duration::from_millis(5)),
            }
        }
    }))
}

/// Binds the echo port in the calling thread's namespace.
///
/// A port still in use is retried for up to 3 s. The previous check's server in this pod has
/// closed its listener by then (joined), yet CI once saw the next bind refused (EADDRINUSE; std
/// sets SO_REUSEADDR, so only another listener refuses it). The likely holder is a child forked
/// by this test binary (`Netns::command`) between its fork and exec, holding a copy of the
/// closed listener for that moment. The retry is written to stderr past the test harness's
/// capture, with the sockets and their processes, so a passing run shows it too. A retry
/// counts in what a caller times: `k8s::peer`'s first-packet time starts its server after its
/// clock.
fn bind_echo(ns_name: &NetnsName) -> std::io::Result<TcpListener> {
    const PATIENCE: Duration = Duration::from_secs(3);
    let start = std::time::Instant::now();
    let mut busy = false;
    loop {
        match TcpListener::bind(("0.0.0.0", ECHO_PORT)) {
            Ok(l) => {
                l.set_nonblocking(true)?;
                if busy {
                    say(&format!(
                        "echo port :{ECHO_PORT} in {ns_name} bound after {:?}",
                        start.elapsed()
                    ));
                }
                return Ok(l);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && start.elapsed() < PATIENCE => {
                if !busy {
                    busy = true;
                    say(&format!(
                        "echo port :{ECHO_PORT} busy in {ns_name}, retrying for up to {PATIENCE:?}; its sockets: {}",
                        echo_port_sockets()
                    ));
                }
                thread::sleep(Duration::from_millis(100));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                let held = echo_port_sockets();
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("{e}; its sockets: {held}"),
                ));
            }
            Err(e) => return Err(e),
        }
    }
}

/// A line on the process's stderr itself, not through the test harness's capture of
/// `eprintln!` (which shows only a failed test's output).
fn say(line: &str) {
    // Nowhere else to report a failed write to stderr.
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The sockets on the echo port in the calling thread's namespace, with their processes, as
/// `ss` lists them.
fn echo_port_sockets() -> String {
    match std::process::Command::new("ss")
        .args(["-tanopH", "sport", "=", &format!(":{ECHO_PORT}")])
        .output()
    {
        Ok(o) if o.status.success() => format!("{:?}", String::from_utf8_lossy(&o.stdout)),
        Ok(o) => format!("(ss failed: {})", String::from_utf8_lossy(&o.stderr).trim()),
        Err(e) => format!("(ss: {e})"),
    }
}
