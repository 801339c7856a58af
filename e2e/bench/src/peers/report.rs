//! The results of `liqo-bench peers`: samples, their medians per peer count, every figure as a
//! ratio to the 1-peer figure, and whether the targets hold, on the report core
//! ([`crate::report_core`]) with `liqo-bench tunnel`'s setup. Pure: built from samples, serialized for
//! `-o json`, rendered by [`super::render`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::config::STAND_IN_RANGE as STAND_IN;
use crate::{
    report::Setup,
    report_core::{Header, Spread, Target, ratio},
};

/// The lowest ratio to the 1-peer figure the per-packet cost may fall to (TCP and UDP).
pub const PER_PACKET_RATIO_MIN: f64 = 0.95;
/// The longest full apply of the largest count, milliseconds.
pub const FULL_APPLY_MAX_MS: f64 = 50.0;
/// The longest one-peer change at the largest count, milliseconds.
pub const ONE_PEER_MAX_MS: f64 = 5.0;
/// The count the targets are set for.
pub const TARGET_PEERS: u32 = 1000;

/// One apply of a rewritten configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Apply {
    /// How long the gateway says the apply took (`reload.applied.micros`), if it says.
    pub micros: Option<u64>,
    /// From the file's rename until the bench saw the gateway run it, microseconds (includes
    /// noticing the file and polling `/status`).
    pub seen_us: u64,
}

impl Apply {
    /// The apply's duration, milliseconds: the gateway's own figure, else what the bench saw.
    pub fn ms(&self) -> f64 {
        self.micros.unwrap_or(self.seen_us) as f64 / 1000.0
    }
}

/// `ip rule` entries and unicast routes in one namespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// IPv4 rules.
    pub rules: u64,
    /// Unicast routes in every table an IPv4 rule looks up.
    pub routes: u64,
}

/// One measurement of one peer count (one repeat).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// Which repeat (1-based).
    pub repeat: u32,
    /// From 1 peer to this count (none for 1).
    pub full_apply: Option<Apply>,
    /// One more peer at this count.
    pub add_one: Option<Apply>,
    /// That peer removed again.
    pub remove_one: Option<Apply>,
    /// From this count back to 1 peer (none for 1).
    pub back_to_one: Option<Apply>,
    /// gwA's host namespace (the node) at this count.
    pub host: Option<Counts>,
    /// gwA's gateway namespace at this count.
    pub gateway: Option<Counts>,
    /// One TCP stream through the real peer, Gbit/s.
    pub tcp_gbps: Option<f64>,
    /// UDP datagrams delivered to podB per second.
    pub udp_pps: Option<f64>,
    /// UDP datagrams podA sent per second (the offered load actually reached).
    pub udp_sent_pps: Option<f64>,
    /// The highest background CPU load seen when a traffic test of this sample started, %.
    pub background_load_pct: f64,
    /// Why this sample failed, with what was measured before it kept.
    pub error: Option<String>,
}

/// One figure of a sample, a column of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Metric {
    /// [`Sample::full_apply`], ms.
    FullApplyMs,
    /// [`Sample::add_one`], ms.
    AddOneMs,
    /// [`Sample::remove_one`], ms.
    RemoveOneMs,
    /// [`Sample::back_to_one`], ms.
    BackToOneMs,
    /// Rules in the host namespace.
    HostRules,
    /// Routes in the host namespace.
    HostRoutes,
    /// Rules in the gateway namespace.
    GatewayRules,
    /// Routes in the gateway namespace.
    GatewayRoutes,
    /// [`Sample::tcp_gbps`].
    TcpGbps,
    /// [`Sample::udp_pps`].
    UdpPps,
}

impl Metric {
    /// Every metric, in table order.
    pub const ALL: [Metric; 10] = [
        Metric::FullApplyMs,
        Metric::AddOneMs,
        Metric::RemoveOneMs,
        Metric::BackToOneMs,
        Metric::HostRules,
        Metric::HostRoutes,
        Metric::GatewayRules,
        Metric::GatewayRoutes,
        Metric::TcpGbps,
        Metric::UdpPps,
    ];

    /// This figure of `s`, if measured.
    pub fn of(self, s: &Sample) -> Option<f64> {
        let ms = |a: Option<Apply>| a.map(|a| a.ms());
        let n = |c: Option<Counts>, f: fn(Counts) -> u64| c.map(|c| f(c) as f64);
        match self {
            Metric::FullApplyMs => ms(s.full_apply),
            Metric::AddOneMs => ms(s.add_one),
            Metric::RemoveOneMs => ms(s.remove_one),
            Metric::BackToOneMs => ms(s.back_to_one),
            Metric::HostRules => n(s.host, |c| c.rules),
            Metric::HostRoutes => n(s.host, |c| c.routes),
            Metric::GatewayRules => n(s.gateway, |c| c.rules),
            Metric::GatewayRoutes => n(s.gateway, |c| c.routes),
            Metric::TcpGbps => s.tcp_gbps,
            Metric::UdpPps => s.udp_pps,
        }
    }
}

/// The summary of one peer count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// Peers of gwA (the real one included).
    pub peers: u32,
    /// Every repeat, in order.
    pub samples: Vec<Sample>,
    /// Median and range of every figure measured.
    pub figures: BTreeMap<Metric, Spread>,
    /// Every median over the 1-peer row's median (1.0 for that row).
    pub vs_one_peer: BTreeMap<Metric, f64>,
}

impl Row {
    /// The samples that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Sample> {
        self.samples.iter().filter(|s| s.error.is_some())
    }

    /// The median of `m`.
    pub fn median(&self, m: Metric) -> Option<f64> {
        self.figures.get(&m).map(|s| s.median)
    }
}

/// The UDP load of the packets/s test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UdpLoad {
    /// Payload bytes per datagram.
    pub payload_bytes: u32,
    /// Offered payload rate, Mbit/s (0: as fast as iperf3 can send).
    pub offered_mbps: u32,
}

/// Everything one `liqo-bench peers` run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeersReport {
    /// How and on what.
    pub header: Header,
    /// The repeats, the seconds per test and the tunnel MTU.
    pub setup: Setup,
    /// The UDP test's load.
    pub udp: UdpLoad,
    /// One row per peer count, ascending, the 1-peer row first.
    pub rows: Vec<Row>,
    /// The targets, at the largest count.
    pub targets: Vec<Target>,
    /// The peer count the targets were checked at (the largest).
    pub targets_at: Option<u32>,
    /// How to read the tables.
    pub notes: Vec<String>,
}

impl PeersReport {
    /// Summarizes the samples of every count (which must include 1) and checks the targets at
    /// the largest count.
    pub fn new(
        header: Header,
        setup: Setup,
        udp: UdpLoad,
        samples: BTreeMap<u32, Vec<Sample>>,
    ) -> PeersReport {
        let notes = notes(&setup, udp, &samples);
        let one: BTreeMap<Metric, f64> = samples
            .get(&1)
            .map(|s| medians(s).map(|(m, s)| (m, s.median)).collect())
            .unwrap_or_default();
        let rows: Vec<Row> = samples
            .into_iter()
            .map(|(peers, samples)| {
                let figures: BTreeMap<Metric, Spread> = medians(&samples).collect();
                let vs_one_peer = figures
                    .iter()
                    .filter_map(|(m, s)| Some((*m, ratio(Some(s.median), one.get(m).copied())?)))
                    .collect();
                Row {
                    peers,
                    samples,
                    figures,
                    vs_one_peer,
                }
            })
            .collect();
        let targets = rows.last().map(targets).unwrap_or_default();
        let rows_last_peers = rows.last().map(|r| r.peers);
        PeersReport {
            header,
            setup,
            udp,
            rows,
            targets,
            targets_at: rows_last_peers,
            notes,
        }
    }

    /// `N peers repeat R: error` for every failed sample.
    pub fn failures(&self) -> Vec<String> {
        self.rows
            .iter()
            .flat_map(|r| {
                r.failures().map(|s| {
                    format!(
                        "{} peers repeat {}: {}",
                        r.peers,
                        s.repeat,
                        s.error.as_deref().unwrap_or_default()
                    )
                })
            })
            .collect()
    }
}

/// The notes printed under the tables.
fn notes(h: &Setup, udp: UdpLoad, samples: &BTreeMap<u32, Vec<Sample>>) -> Vec<String> {
    let all = || samples.values().flatten();
    let applies: Vec<Apply> = all()
        .flat_map(|s| [s.full_apply, s.add_one, s.remove_one, s.back_to_one])
        .flatten()
        .collect();
    let unreported = applies.iter().filter(|a| a.micros.is_none()).count();
    let sent = Spread::of(all().filter_map(|s| s.udp_sent_pps));
    let delivered = Spread::of(all().filter_map(|s| s.udp_pps));
    let rate = match udp.offered_mbps {
        0 => "as fast as iperf3 can send (-b 0)".to_owned(),
        m => format!("at {m} Mbit/s of payload (-b {m}M)"),
    };
    let mut n = vec![
        format!(
            "Topology: podA -veth- gwA -veth (underlay)- gwB -veth- podB, one network namespace \
             each, with our gateway (liqo-gateway run, in its own namespace joined to the node by \
             a veth, as liqo-bench tunnel's ours) in gwA and gwB. gwA has N peers: the real one (gwB) \
             and N-1 stand-ins, each with its own /24 from {STAND_IN}, its own public key and no \
             endpoint. Every (repeat, count) starts both gateways afresh with one peer each; \
             repeats are interleaved (repeat > count) and every figure is the median of {} \
             (throughput: median (min-max)).",
            h.repeats
        ),
        "Apply times: gwA's configuration file is rewritten (a new file renamed over it) and \
         the time is the one the gateway reports for applying that text (reload.applied.micros \
         of its /status: the apply alone, not reading and validating the file). full apply: 1 peer -> N; +1 peer and -1 peer: N -> N+1 -> N; back \
         to 1: N -> 1 peer."
            .into(),
    ];
    if unreported > 0 {
        n.push(format!(
            "This gateway reported no applied.micros for {unreported} of {} applies: those \
             figures are the time from the rename until its /status showed the new text (read \
             every 2 ms), which includes noticing the file.",
            applies.len()
        ));
    }
    n.push(
        "ip rules: IPv4 policy-routing rules in gwA's host namespace (the node) / in its \
         gateway namespace; routes: unicast IPv4 routes in every table those rules look up \
         (the bed's own few routes included)."
            .into(),
    );
    n.push(format!(
        "Traffic goes from podA to podB through the real peer, unpinned. 1 TCP stream: iperf3 \
         -t {secs} -O 1 (1 s warm-up left out). UDP: iperf3 -u -l {len} -t {secs}, offered \
         {rate}; packets/s = bytes the server received / {len} / seconds. podA sent {} \
         kpackets/s and podB got {} (medians over every sample): the offered load is {}.",
        sent.map_or("-".into(), |s| format!("{:.1}", s.median / 1000.0)),
        delivered.map_or("-".into(), |s| format!("{:.1}", s.median / 1000.0)),
        match (sent, delivered) {
            (Some(s), Some(d)) if s.median > d.median * 1.05 => "above what passes (saturated)",
            (Some(_), Some(_)) => "NOT above what passes: raise the offered rate",
            _ => "unknown",
        },
        secs = h.seconds,
        len = udp.payload_bytes,
    ));
    n.push(format!(
        "Targets (set for {TARGET_PEERS} peers, checked at the largest count): per-packet cost \
         within 5% (TCP and UDP ratios to 1 peer >= {PER_PACKET_RATIO_MIN}), full apply <= \
         {FULL_APPLY_MAX_MS} ms, one-peer change <= {ONE_PEER_MAX_MS} ms. A missed target is a \
         result: the bench still exits 0."
    ));
    n.push(
        "Background CPU load (other users of this machine; the header gives the worst and the \
         time spent waiting): sampled for 0.5 s before each test and apply, waiting up to 20 s \
         while above 15%."
            .into(),
    );
    n
}

fn medians(samples: &[Sample]) -> impl Iterator<Item = (Metric, Spread)> + '_ {
    Metric::ALL
        .into_iter()
        .filter_map(|m| Some((m, Spread::of(samples.iter().filter_map(|s| m.of(s)))?)))
}

/// The targets, checked on the row of the largest count.
fn targets(r: &Row) -> Vec<Target> {
    let n = r.peers;
    let vs = |m| r.vs_one_peer.get(&m).copied();
    let change = match (r.median(Metric::AddOneMs), r.median(Metric::RemoveOneMs)) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    };
    vec![
        Target::at_least(
            format!("one TCP stream through the real peer, {n} peers / 1 peer"),
            vs(Metric::TcpGbps),
            Some(PER_PACKET_RATIO_MIN),
            "",
        ),
        Target::at_least(
            format!("64-byte UDP packets/s delivered, {n} peers / 1 peer"),
            vs(Metric::UdpPps),
            Some(PER_PACKET_RATIO_MIN),
            "",
        ),
        Target::at_most(
            format!("full apply of {n} peers (from 1)"),
            r.median(Metric::FullApplyMs),
            Some(FULL_APPLY_MAX_MS),
            "ms",
        ),
        Target::at_most(
            format!("one-peer change at {n} peers (the slower of add and remove)"),
            change,
            Some(ONE_PEER_MAX_MS),
            "ms",
        ),
    ]
}

#[cfg(test)]
pub(crate) mod tests;
