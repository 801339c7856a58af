//! Measuring an interruption: a TCP probe every 50 ms from one pod to another (the target runs
//! the echo server), recording the longest time without a successful answer.

use std::{
    net::Ipv4Addr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use dataplane::{Netns, NetnsName};

use super::{LabError, check};

const INTERVAL: Duration = Duration::from_millis(50);
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);

/// A running prober; dropping it without [`Prober::finish`] stops its threads too.
///
/// The client stops first and the server only once the client's last probe has returned: a
/// server stopped under an in-flight probe would reset it and count as an outage.
pub struct Prober {
    stop: Arc<AtomicBool>,
    stop_server: Arc<AtomicBool>,
    /// When the last answered probe was sent (none answered yet: `None`).
    last_up: Arc<Mutex<Option<Instant>>>,
    server: Option<thread::JoinHandle<()>>,
    client: Option<thread::JoinHandle<Result<Outage, LabError>>>,
}

/// What the prober saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outage {
    /// Probes sent.
    pub probes: u32,
    /// Probes answered.
    pub answered: u32,
    /// The longest time between two answered probes (or from the start to the first answer).
    pub longest_gap: Duration,
    /// Whether the last probe was answered.
    pub up_at_end: bool,
}

impl Prober {
    /// Starts probing `addr` (where `dst` is reached from `src`).
    pub fn start(src: &NetnsName, dst: &NetnsName, addr: Ipv4Addr) -> Result<Prober, LabError> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop_server = Arc::new(AtomicBool::new(false));
        let server = check::echo_server(dst, Arc::clone(&stop_server))?;
        let ns = match Netns::open(src) {
            Ok(ns) => ns,
            Err(e) => {
                stop_server.store(true, Ordering::Relaxed);
                // The namespace error is what matters here; the server returns nothing, and a
                // panic in it has been printed by the panic hook already.
                let _ = server.join();
                return Err(e.into());
            }
        };
        let flag = Arc::clone(&stop);
        let last_up = Arc::new(Mutex::new(None));
        let seen = Arc::clone(&last_up);
        let client = thread::spawn(move || {
            ns.run(move || {
                let (mut probes, mut answered, mut up) = (0, 0, false);
                let mut last_ok = Instant::now();
                let mut longest = Duration::ZERO;
                while !flag.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    probes += 1;
                    up = check::tcp_probe_within(addr, PROBE_TIMEOUT).is_ok();
                    if up {
                        *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(sent);
                        answered += 1;
                        longest = longest.max(sent.saturating_duration_since(last_ok));
                        last_ok = Instant::now();
                    }
                    thread::sleep(INTERVAL.saturating_sub(sent.elapsed()));
                }
                if !up {
                    longest = longest.max(last_ok.elapsed());
                }
                Outage {
                    probes,
                    answered,
                    longest_gap: longest,
                    up_at_end: up,
                }
            })
            .map_err(LabError::from)
        });
        Ok(Prober {
            stop,
            stop_server,
            last_up,
            server: Some(server),
            client: Some(client),
        })
    }

    /// Whether a probe sent at `t` or later was answered.
    pub fn up_since(&self, t: Instant) -> bool {
        self.last_up
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| at >= t)
    }

    /// Stops probing and returns what was seen.
    pub fn finish(mut self) -> Result<Outage, LabError> {
        self.stop.store(true, Ordering::Relaxed);
        let (Some(client), Some(server)) = (self.client.take(), self.server.take()) else {
            unreachable!("taken only here and in drop");
        };
        let out = client.join().map_err(|_| LabError::Build {
            what: "the outage prober".into(),
            source: "its thread panicked".into(),
        });
        self.stop_server.store(true, Ordering::Relaxed);
        // The server returns nothing; a panic in it shows as unanswered probes, already counted
        // (and printed by the panic hook).
        let _ = server.join();
        out?
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropped without `finish`: nobody wants the outage any more, but a failed prober is
        // logged. A panicked thread has been reported by the panic hook already.
        if let Some(c) = self.client.take()
            && let Ok(Err(e)) = c.join()
        {
            tracing::warn!(error = %liqo_types::chain(&e), "outage prober");
        }
        self.stop_server.store(true, Ordering::Relaxed);
        if let Some(s) = self.server.take() {
            // The server returns nothing; a panic in it was printed by the panic hook.
            let _ = s.join();
        }
    }
}

/// A pod of `cluster` on none of the nodes in `avoid` (if it has one), a pod of its first peer
/// on a node not running that peer's gateway, and the address the first reaches the second at;
/// with a description for people.
pub fn pair_across(
    lab: &super::Lab,
    cluster: &str,
    avoid: &[&str],
) -> Result<Option<(NetnsName, NetnsName, Ipv4Addr, String)>, LabError> {
    pair_across_views(lab, &super::cluster::peerings(lab)?, cluster, avoid)
}

/// [`pair_across`] over the given peerings `(cluster, peer, view)` (with control planes: the
/// TunnelEndpoints').
pub fn pair_across_views(
    lab: &super::Lab,
    views: &[(String, String, liqo_types::PeerView)],
    cluster: &str,
    avoid: &[&str],
) -> Result<Option<(NetnsName, NetnsName, Ipv4Addr, String)>, LabError> {
    let Some((_, peer, view)) = views.iter().find(|(c, _, _)| c == cluster).cloned() else {
        return Ok(None);
    };
    let op = format!("probing from {cluster}");
    let c = super::cluster::find(lab, cluster, &op)?;
    let p = super::cluster::find(lab, &peer, &op)?;
    let peer_gw = super::cluster::gateway_node(lab, p)?;
    let pick = |c: &crate::topology::Cluster, avoid: &[&str]| {
        c.pods()
            .find(|(n, _)| !avoid.contains(&n.name.as_str()))
            .or_else(|| c.pods().next())
            .map(|(_, pod)| pod.clone())
    };
    let (Some(src), Some(dst)) = (pick(c, avoid), pick(p, &[peer_gw.as_str()])) else {
        return Ok(None);
    };
    let addr = view.remote_pod(&super::cluster::pod_cidr(p), dst.addr.addr());
    Ok(Some((
        lab.pod_netns(cluster, &src.name),
        lab.pod_netns(&peer, &dst.name),
        addr,
        format!("{cluster}/{} -> {peer}/{} at {addr}", src.name, dst.name),
    )))
}
