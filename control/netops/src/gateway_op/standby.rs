//! Active/standby gateways (`--leader-elect`): each replica's operator elects on the Lease
//! `liqo-gateway` (its identity the node's name, which the route operators route to) with
//! [`liqo_lease::Elector`] and [`TIMING`] ([`Replica`]). A replica stands for election only
//! once its own gateway answers; a standby's gateway runs [`config`] (the key, no peer), so a
//! gateway that comes back after a crash never answers beside the active one. Once elected, a
//! replica unmarks any other pod still marked active and marks its own (the gateway Service
//! selects the mark, [`crate::kube::pod`]). The active one steps down when its gateway stops
//! answering ([`until_gone`]), when it loses the Lease, or on a clean stop: its gateway's file
//! goes back to the standby's first (local, no API call), then its pod is unmarked and the
//! Lease given back (unless lost), each bounded by [`STEP_DOWN`], so the standby takes over at
//! its next try instead of at the Lease's expiry. It decides nothing about peers: once elected,
//! the operator reconciles as a single gateway's does.

use std::{path::PathBuf, time::Duration};

use control::{consts::net, leader::Timing, network::gateway};
use kube::Client;
use liqo_gateway_api::config::File;
use liqo_lease::{Elector, LeaderError};
use prometheus_client::metrics::gauge::Gauge;

use super::MANAGER;
use crate::{
    error::OpError,
    files::{self, StatusUrl},
    kube::pod,
    runner::Dataplane,
};

/// The gateways' election: a standby takes over 5 s after it last saw a silent active renew
/// (a crashed node), at its next try (0.5 s) after an active gave the Lease back. The active
/// one has 4 s to renew: with 2 s, a busy API server (the moment of a failover on a loaded
/// machine) made a new active one step down and drop its peers, again and again.
pub const TIMING: Timing = Timing {
    lease_duration: Duration::from_secs(5),
    renew_deadline: Duration::from_secs(4),
    retry_period: Duration::from_millis(500),
};

/// How often the active operator looks at its gateway, and how many looks in a row may fail
/// before it counts as gone (one failed look can be a busy gateway).
pub const WATCH: (Duration, u32) = (Duration::from_millis(250), 3);

/// How long each API call of a step down may take: within the time between the renew deadline
/// and the Lease's expiry, after which the standby takes over anyway.
pub const STEP_DOWN: Duration = Duration::from_secs(1);

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

/// Returns once the gateway at `url` fails `misses` looks in a row (one every `every`): the
/// last failure. Called once the gateway answered (a replica stands for election only then).
pub async fn until_gone(url: &StatusUrl, every: Duration, misses: u32) -> String {
    let mut failed = 0;
    loop {
        tokio::time::sleep(every).await;
        match files::fetch_async::<serde_json::Value>(url).await {
            Ok(_) => failed = 0,
            Err(e) => {
                failed += 1;
                if failed >= misses {
                    return liqo_types::chain(&e);
                }
            }
        }
    }
}

/// Returns once the gateway at `url` answers (every `every`).
pub async fn until_answering(url: &StatusUrl, every: Duration) {
    let mut said = false;
    while files::fetch_async::<serde_json::Value>(url).await.is_err() {
        if !said {
            tracing::info!(%url, "standby: waiting for the gateway to answer before standing for election");
            said = true;
        }
        tokio::time::sleep(every).await;
    }
}

/// Why an active replica stopped being the active one.
#[derive(Debug, thiserror::Error)]
pub enum SteppedDown {
    /// The Lease was lost (another holds it, or it could not be renewed in time).
    #[error("the gateway Lease was lost")]
    Lost(#[source] LeaderError),
    /// Its gateway stopped answering.
    #[error("the gateway stopped answering ({0}); the Lease is given back to a standby")]
    GatewayGone(String),
}

/// One replica of active/standby gateways.
pub struct Replica {
    client: Client,
    namespace: String,
    node: String,
    pod: Option<String>,
    /// The gateway's file and the standby's text for it (none without a data plane).
    file: Option<(PathBuf, String)>,
    status: Option<StatusUrl>,
}

impl Replica {
    /// The replica on `node` (its pod `pod`, if marked) of the gateway `dataplane` runs over
    /// `base`.
    pub fn new(
        client: Client,
        namespace: &str,
        node: &str,
        pod: Option<String>,
        base: &File,
        dataplane: &Dataplane,
    ) -> Result<Replica, OpError> {
        let (file, status) = match dataplane {
            Dataplane::Files {
                config: path,
                status,
                private_key_file,
            } => {
                let key = private_key_file.as_ref().map(|p| p.display().to_string());
                (
                    Some((path.clone(), config(base, key.as_deref())?)),
                    Some(status.clone()),
                )
            }
            Dataplane::Fake => (None, None),
        };
        Ok(Replica {
            client,
            namespace: namespace.to_owned(),
            node: node.to_owned(),
            pod,
            file,
            status,
        })
    }

    /// Puts the standby's config in the gateway's file (local: no API call).
    pub fn standby_file(&self) -> Result<(), OpError> {
        if let Some((path, text)) = &self.file {
            files::ensure_config(path, text)?;
        }
        Ok(())
    }

    /// As a standby until elected: the pod unmarked, the standby's file, the gateway answering;
    /// then elected, other pods unmarked and this one marked (a failure to mark gives the Lease
    /// back: unreachable through the Service, another replica must take over).
    pub async fn elect(&self, leading: Gauge) -> Result<Elector, OpError> {
        // The pod first: a bad --pod-name fails before the gateway's file is touched.
        if let Some(p) = &self.pod {
            pod::mark(&self.client, &self.namespace, p, false).await?;
        }
        self.standby_file()?;
        if let Some(url) = &self.status {
            until_answering(url, WATCH.0).await;
        }
        let mut elector = Elector::new(
            self.client.clone(),
            &self.namespace,
            net::GATEWAY_LEASE,
            self.node.clone(),
            TIMING,
            leading,
            MANAGER,
        );
        tracing::info!(node = %self.node, "standby: waiting to be elected on the gateway Lease");
        elector.acquire().await;
        if let Some(p) = &self.pod {
            let marked = async {
                pod::unmark_others(&self.client, &self.namespace, p).await?;
                pod::mark(&self.client, &self.namespace, p, true).await
            };
            if let Err(e) = marked.await {
                self.step_down(&mut elector, false).await;
                return Err(e.into());
            }
        }
        Ok(elector)
    }

    /// Renews the Lease while the gateway answers; why the replica stops being the active one.
    pub async fn hold(&self, elector: &mut Elector) -> SteppedDown {
        let gone = async {
            match &self.status {
                Some(url) => until_gone(url, WATCH.0, WATCH.1).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            e = elector.keep() => SteppedDown::Lost(e),
            why = gone => SteppedDown::GatewayGone(why),
        }
    }

    /// No longer active: the standby's file first, then the pod unmarked and the Lease given
    /// back (not when `lost`: it is not ours), each call bounded by [`STEP_DOWN`].
    pub async fn step_down(&self, elector: &mut Elector, lost: bool) {
        if let Err(e) = self.standby_file() {
            tracing::warn!(error = %liqo_types::chain(&e), "writing the standby's gateway file");
        }
        if let Some(p) = &self.pod {
            match tokio::time::timeout(
                STEP_DOWN,
                pod::mark(&self.client, &self.namespace, p, false),
            )
            .await
            {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %liqo_types::chain(&e), "unmarking the pod: the next active replica unmarks it")
                }
                Err(_) => tracing::warn!(
                    "unmarking the pod: no answer in time; the next active replica unmarks it"
                ),
            }
        }
        if !lost
            && tokio::time::timeout(STEP_DOWN, elector.release())
                .await
                .is_err()
        {
            tracing::warn!("giving the Lease back: no answer in time; it expires on its own");
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
    async fn a_gateway_that_does_not_answer_is_gone_and_one_that_answers_is_not_until_it_stops() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let url = StatusUrl {
            addr,
            path: "/status".into(),
        };
        // Nothing listens: not answering.
        let why = tokio::time::timeout(
            Duration::from_secs(5),
            until_gone(&url, Duration::from_millis(20), 2),
        )
        .await
        .expect("gone while nothing answers");
        assert!(why.contains(&addr.to_string()), "{why}");

        // A status that answers until told to stop, then its listener is closed: not gone
        // while it answers, gone once it stops. (It answers as long as asked: a probe timed
        // out under load is retried.)
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let url = StatusUrl {
            addr,
            path: "/status".into(),
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let server = std::thread::spawn({
            let stop = stop.clone();
            move || {
                use std::io::{Read, Write};
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((mut s, _)) => {
                            s.set_nonblocking(false).unwrap();
                            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                            let mut buf = [0u8; 1024];
                            if s.read(&mut buf).is_ok() {
                                // A client gone meanwhile is the client's business.
                                let _written = s.write_all(
                                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{}",
                                );
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        Err(e) => panic!("accept: {e}"),
                    }
                }
            }
        });
        tokio::time::timeout(
            Duration::from_secs(30),
            until_answering(&url, Duration::from_millis(20)),
        )
        .await
        .expect("answering");
        let gone = tokio::spawn({
            let url = url.clone();
            async move { until_gone(&url, Duration::from_millis(20), 2).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!gone.is_finished(), "gone while its status answers");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let why = tokio::time::timeout(Duration::from_secs(30), gone)
            .await
            .expect("gone once its status stops answering")
            .unwrap();
        server.join().unwrap();
        assert!(why.contains(&addr.to_string()), "{why}");
    }
}
