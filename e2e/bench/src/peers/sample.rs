//! One sample at one peer count: our gateway on both sides of the bed, gwA's configuration
//! rewritten from 1 peer to N (timed), the rules and routes counted, one TCP stream and 64-byte
//! UDP through the real peer, one peer added and removed (timed), and back to 1 peer (timed).

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    time::{Duration, Instant},
};

use dataplane::{Netlink, Netns};
use gateway::{config::File as GatewayFile, status::Status};
use ipnet::IpNet;

use super::{
    config::with_peers,
    report::{Apply, Counts, Sample, UdpLoad},
};
use crate::{
    BenchError, Profile, Variant,
    bed::{Bed, Node},
    install::Peers,
    keys::Keys,
    measure::{self, Flow, LoadTracker},
    options::fail,
    variant::{self, Leg, OURS_STATUS},
};

/// How long the gateway may take to run a rewritten configuration.
const APPLY_TIMEOUT: Duration = Duration::from_secs(60);
/// How often its `/status` is read meanwhile.
const APPLY_POLL: Duration = Duration::from_millis(2);

/// What every sample of a run shares.
pub(crate) struct Ctx<'a> {
    pub(crate) bed: &'a Bed,
    pub(crate) peers: &'a Peers,
    pub(crate) keys: &'a Keys,
    /// Seconds per iperf3 test.
    pub(crate) secs: u32,
    /// The UDP test's load.
    pub(crate) udp: UdpLoad,
}

impl Ctx<'_> {
    /// Measures `n` peers once, from a fresh pair of gateways; a failure is recorded in the
    /// sample, with what was measured before it.
    pub(crate) async fn sample(&self, n: u32, repeat: u32, load: &mut LoadTracker) -> Sample {
        let mut s = Sample {
            repeat,
            ..Sample::default()
        };
        let up = async {
            // gwA starts with its one real peer, whatever an earlier failed sample left.
            self.keys.write_ours(true, self.keys.ours_file(true))?;
            variant::up(
                self.bed,
                self.peers,
                self.keys,
                Variant::Ours,
                Profile::Shared,
            )
            .await
        };
        match up.await {
            Ok(mut leg) => {
                if let Err(e) = self.measure(&mut leg, n, load, &mut s).await {
                    s.error = Some(e.to_string());
                }
                variant::down(self.bed, leg).await;
            }
            Err(e) => s.error = Some(e.to_string()),
        }
        s
    }

    async fn measure(
        &self,
        leg: &mut Leg,
        n: u32,
        load: &mut LoadTracker,
        s: &mut Sample,
    ) -> Result<(), BenchError> {
        let (bed, peers) = (self.bed, self.peers);
        let one = self.keys.ours_file(true);
        if n > 1 {
            quiet(load, s).await?;
            s.full_apply = Some(self.apply(&with_peers(one, n)).await?);
        }
        // The real peer's session survived the rewrite.
        variant::connected(bed, peers, leg).await?;
        s.host = Some(count(bed.nl(Node::GwA), "gwA").await?);
        let name = bed.names.gateway_netns(true);
        let gw_nl = Netlink::connect_in(&Netns::open(&name)?)
            .map_err(|e| BenchError::step(format!("netlink in {name}"), &e))?;
        s.gateway = Some(count(&gw_nl, name.as_str()).await?);

        let server = measure::server(bed, peers, Profile::Shared).await?;
        quiet(load, s).await?;
        let tcp = measure::iperf(bed, peers, Profile::Shared, self.secs, Flow::Tcp(1)).await?;
        s.tcp_gbps = Some(tcp.bits_per_second / 1e9);
        quiet(load, s).await?;
        let (len, mbps) = (self.udp.payload_bytes, self.udp.offered_mbps);
        let udp = measure::iperf(
            bed,
            peers,
            Profile::Shared,
            self.secs,
            Flow::Udp { len, mbps },
        );
        let udp = udp.await?;
        s.udp_pps = udp.received_pps(len);
        s.udp_sent_pps = udp.sent_pps(len);
        drop(server);

        quiet(load, s).await?;
        s.add_one = Some(self.apply(&with_peers(one, n + 1)).await?);
        s.remove_one = Some(self.apply(&with_peers(one, n)).await?);
        if n > 1 {
            quiet(load, s).await?;
            s.back_to_one = Some(self.apply(one).await?);
        }
        Ok(())
    }

    /// Writes `file` as gwA's configuration and waits until its gateway runs it.
    async fn apply(&self, file: &GatewayFile) -> Result<Apply, BenchError> {
        let want = self.keys.write_ours(true, file)?;
        let written = Instant::now();
        let what = format!("gwA's gateway with {} peers", file.peers.len());
        loop {
            let r = status(self.bed)?.reload;
            if let Some(x) = r.refused.as_ref().filter(|x| x.digest == want) {
                return Err(fail(
                    format!("{what}: configuration refused"),
                    format!("{}: {}", x.field, x.problem),
                ));
            }
            if let Some(a) = r.applied.as_ref().filter(|a| a.digest == want) {
                return Ok(Apply {
                    micros: gateway_micros(a),
                    seen_us: u64::try_from(written.elapsed().as_micros()).unwrap_or(u64::MAX),
                });
            }
            if written.elapsed() > APPLY_TIMEOUT {
                return Err(fail(
                    format!("{what}: not applied after {} s", APPLY_TIMEOUT.as_secs()),
                    r.problem()
                        .unwrap_or_else(|| "it still runs an earlier text".into()),
                ));
            }
            tokio::time::sleep(APPLY_POLL).await;
        }
    }
}

/// Waits for the machine to be quiet (see [`LoadTracker::quiet`]) and records the load.
async fn quiet(load: &mut LoadTracker, s: &mut Sample) -> Result<(), BenchError> {
    s.background_load_pct = s.background_load_pct.max(load.quiet().await?);
    Ok(())
}

/// How long the gateway says its apply took: `applied.micros`, which an older gateway does not
/// report (it reads as 0, as for the text a gateway started with).
fn gateway_micros(a: &liqo_daemon::status::Applied) -> Option<u64> {
    (a.micros > 0).then_some(a.micros)
}

/// What gwA's gateway reports (typed: a body that lacks a field is an error).
fn status(bed: &Bed) -> Result<Status, BenchError> {
    let addr: SocketAddr = OURS_STATUS.parse().expect("a valid constant");
    let body = bed
        .ns(Node::GwA)
        .run(|| liqo_daemon::localhttp::get(addr, "/status"))?
        .map_err(|e| BenchError::step("asking gwA's gateway for /status", &e))?;
    serde_json::from_str(&body).map_err(|e| BenchError::step("decoding gwA's gateway status", &e))
}

/// The IPv4 rules of the namespace `nl` speaks to, and the unicast IPv4 routes of every table
/// they look up.
async fn count(nl: &Netlink, ns: &str) -> Result<Counts, BenchError> {
    let err = |e: dataplane::netlink::Error| BenchError::step(format!("counting in {ns}"), &e);
    let rules: Vec<_> = nl
        .rules()
        .await
        .map_err(err)?
        .into_iter()
        .filter(|r| !r.v6)
        .collect();
    let tables: BTreeSet<u32> = rules.iter().map(|r| r.table).collect();
    let mut routes = 0;
    for t in tables {
        routes += nl
            .routes(t)
            .await
            .map_err(err)?
            .iter()
            .filter(|r| matches!(r.dst, IpNet::V4(_)))
            .count() as u64;
    }
    Ok(Counts {
        rules: rules.len() as u64,
        routes,
    })
}
