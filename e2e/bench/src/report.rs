//! The results of `liqo-bench tunnel`: samples, their summary (median, min-max, ratio to ours)
//! and the notes that say how to read them, on the report core ([`crate::report_core`]). Pure: built
//! from samples, serialized for `-o json`, rendered by [`super::render`].

use serde::{Deserialize, Serialize};

use crate::{
    Profile, Variant,
    report_core::{Header, Spread, ratio},
};

/// One measurement of one variant in one profile (one repeat).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// Which repeat (1-based).
    pub repeat: u32,
    /// TCP goodput with 1 stream, Gbit/s.
    pub gbps_1: Option<f64>,
    /// TCP goodput with 4 streams, Gbit/s.
    pub gbps_4: Option<f64>,
    /// Retransmissions in the 1-stream test.
    pub retransmits_1: Option<u64>,
    /// Retransmissions in the 4-stream test.
    pub retransmits_4: Option<u64>,
    /// Average ping round trip, microseconds.
    pub rtt_us: Option<f64>,
    /// CPU time (user + system) of both tunnel daemons during the 1-stream test, microseconds.
    pub daemon_cpu_us: Option<f64>,
    /// Bytes on gwA's underlay veth (both directions) during the 1-stream test.
    pub underlay_bytes: Option<u64>,
    /// `daemon_cpu_us` per full-size packet moved.
    pub cpu_us_per_packet: Option<f64>,
    /// The highest background CPU load seen when a test of this sample started, percent.
    pub background_load_pct: f64,
    /// Why this sample failed (the variant passed no traffic, or a test failed).
    pub error: Option<String>,
}

/// The summary of one variant in one profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// The variant.
    pub variant: Variant,
    /// Every repeat, in order.
    pub samples: Vec<Sample>,
    /// 1-stream throughput, Gbit/s.
    pub one_stream_gbps: Option<Spread>,
    /// 4-stream throughput, Gbit/s.
    pub four_streams_gbps: Option<Spread>,
    /// Ping round trip, microseconds.
    pub rtt_us: Option<Spread>,
    /// CPU microseconds per full-size packet (both daemons); none for `plain`.
    pub cpu_us_per_packet: Option<Spread>,
    /// Ours' median 1-stream throughput divided by this variant's.
    pub ours_over_this: Option<f64>,
}

impl Row {
    /// Summarizes the samples of `variant`; the ratio is filled in by [`ProfileReport::new`].
    pub fn new(variant: Variant, samples: Vec<Sample>) -> Row {
        let of = |f: fn(&Sample) -> Option<f64>| Spread::of(samples.iter().filter_map(f));
        Row {
            variant,
            one_stream_gbps: of(|s| s.gbps_1),
            four_streams_gbps: of(|s| s.gbps_4),
            rtt_us: of(|s| s.rtt_us),
            cpu_us_per_packet: of(|s| s.cpu_us_per_packet),
            ours_over_this: None,
            samples,
        }
    }

    /// The samples that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Sample> {
        self.samples.iter().filter(|s| s.error.is_some())
    }
}

/// The rows of one CPU profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileReport {
    /// The profile.
    pub profile: Profile,
    /// One row per variant, in the order given.
    pub rows: Vec<Row>,
}

impl ProfileReport {
    /// The rows of `profile`, with every row's ratio to ours (when ours was measured).
    pub fn new(profile: Profile, mut rows: Vec<Row>) -> ProfileReport {
        let ours = rows
            .iter()
            .find(|r| r.variant == Variant::Ours)
            .and_then(|r| r.one_stream_gbps)
            .map(|s| s.median);
        for r in &mut rows {
            r.ours_over_this = ratio(ours, r.one_stream_gbps.map(|s| s.median));
        }
        ProfileReport { profile, rows }
    }
}

/// How `liqo-bench tunnel` and `liqo-bench peers` ran, besides the core header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Setup {
    /// Interleaved repeats.
    pub repeats: u32,
    /// Seconds per iperf3 test (after a 1 s warm-up that is left out).
    pub seconds: u32,
    /// MTU of every tunnel, and of the pods' routes when a tunnel is measured.
    pub tunnel_mtu: u32,
}

impl Setup {
    /// `5 repeats x 5 s, tunnel MTU 1420`: the end of the report's first line.
    pub fn describe(&self) -> String {
        format!(
            "{} repeats x {} s, tunnel MTU {}",
            self.repeats, self.seconds, self.tunnel_mtu
        )
    }
}

/// Everything one `liqo-bench tunnel` run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// How and on what.
    pub header: Header,
    /// The repeats, the seconds per test and the tunnel MTU.
    pub setup: Setup,
    /// One table per CPU profile.
    pub profiles: Vec<ProfileReport>,
    /// How to read the tables.
    pub notes: Vec<String>,
}

impl Report {
    /// `profile/variant repeat N: error` for every failed sample.
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.profiles {
            for r in &p.rows {
                for s in r.failures() {
                    out.push(format!(
                        "{}/{} repeat {}: {}",
                        p.profile,
                        r.variant,
                        s.repeat,
                        s.error.as_deref().unwrap_or_default()
                    ));
                }
            }
        }
        out
    }

    /// The variants that failed at least once (in any profile), each named once.
    pub fn failed_variants(&self) -> Vec<Variant> {
        let mut v: Vec<Variant> = self
            .profiles
            .iter()
            .flat_map(|p| p.rows.iter())
            .filter(|r| r.failures().next().is_some())
            .map(|r| r.variant)
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

/// Bytes one full-size tunnelled packet takes on the underlay veth: the tunnel MTU plus
/// WireGuard (32), UDP (8), IPv4 (20) and Ethernet (14) headers.
pub const FULL_PACKET_BYTES: u64 = 1420 + 32 + 8 + 20 + 14;

/// The notes printed under the tables.
pub fn notes(h: &Setup, variants: &[Variant], profiles: &[Profile]) -> Vec<String> {
    let mut n = vec![
        format!(
            "Topology: podA -veth- gwA -veth (underlay)- gwB -veth- podB, one network namespace \
             each; only the gwA-gwB leg changes. iperf3 server in podB, client in podA: \
             -t {} -O 1 (1 s warm-up left out), 1 stream and -P 4; ping: 200 echo requests every \
             5 ms. Median of {} repeats, interleaved (repeat > profile > variant); 1-stream and \
             4-stream columns show median (min-max).",
            h.seconds, h.repeats
        ),
        format!(
            "Every tunnel has MTU {mtu}; while one is measured the pods' routes carry MTU {mtu} \
             (no path-MTU discovery inside a test), and the route caches are flushed between \
             variants.",
            mtu = h.tunnel_mtu
        ),
    ];
    if variants.contains(&Variant::Ours) {
        n.push(
            "ours: liqo-gateway in gwA and gwB, as in the product: it runs its own namespace \
             joined to the node by the veth liqo.host <-> liqo.gateway, so every packet crosses \
             one more veth on each side than with the other tunnels (part of the real path, kept \
             on purpose); its prefix NAT is an identity here."
                .into(),
        );
    }
    if variants.contains(&Variant::Boringtun) {
        n.push("boringtun-cli runs with --threads 1 (its best setting on this box).".into());
    }
    if variants
        .iter()
        .any(|v| matches!(v, Variant::WgGoDebian | Variant::WgGoLatest))
    {
        n.push("wireguard-go runs with its defaults, configured with wg setconf.".into());
    }
    n.push(format!(
        "CPU µs/packet: user + system CPU time of both tunnel daemons (all threads, \
         /proc/<pid>/stat) during the 1-stream test, divided by the full-size packets moved = \
         bytes on gwA's underlay veth (both directions) / {FULL_PACKET_BYTES} (a {} B inner \
         packet + WireGuard, UDP, IPv4 and Ethernet headers): one packet's encryption at one end \
         plus its decryption at the other. Packet counters would mislead with GSO/GRO (one \
         super-packet counts once). Softirq work of the kernel is not included. '-' for plain.",
        h.tunnel_mtu
    ));
    n.push(
        "ours / this: ours' median 1-stream throughput divided by this row's (3.70x: ours moves \
         3.7 times as much; below 1x: less)."
            .into(),
    );
    if profiles.contains(&Profile::Split) {
        n.push(
            "split: gwA's daemon, the iperf3 client and ping pinned to CPU 0, gwB's daemon and \
             the iperf3 server to CPU 1 (whole processes, every thread); shared: no pinning."
                .into(),
        );
    }
    n.push(
        "Background CPU load (other users of this machine; the header gives the worst and the \
         time spent waiting): sampled for 0.5 s before each test, waiting up to 20 s while \
         above 15%."
            .into(),
    );
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(repeat: u32, g1: f64) -> Sample {
        Sample {
            repeat,
            gbps_1: Some(g1),
            gbps_4: Some(g1 * 1.5),
            rtt_us: Some(100.0 + f64::from(repeat)),
            cpu_us_per_packet: Some(2.0),
            ..Sample::default()
        }
    }

    #[test]
    fn ratios_to_ours_use_one_stream_medians() {
        let rows = vec![
            Row::new(Variant::Plain, (1..=5).map(|r| sample(r, 20.0)).collect()),
            Row::new(
                Variant::Ours,
                [2.0, 3.0, 2.9, 2.5, 2.7]
                    .iter()
                    .zip(1..)
                    .map(|(g, r)| sample(r, *g))
                    .collect(),
            ),
            Row::new(
                Variant::Boringtun,
                (1..=5).map(|r| sample(r, 0.75)).collect(),
            ),
        ];
        let p = ProfileReport::new(Profile::Shared, rows);
        let r: Vec<Option<f64>> = p.rows.iter().map(|r| r.ours_over_this).collect();
        assert_eq!(r[0], Some(2.7 / 20.0));
        assert_eq!(r[1], Some(1.0));
        assert!((r[2].unwrap() - 3.6).abs() < 1e-12);
        let ours = p.rows[1].one_stream_gbps.unwrap();
        assert_eq!((ours.median, ours.min, ours.max), (2.7, 2.0, 3.0));
    }

    #[test]
    fn no_ratio_without_ours_and_failures_are_named() {
        let mut bad = sample(2, 0.0);
        bad.gbps_1 = None;
        bad.error = Some("no connectivity".into());
        let rows = vec![Row::new(Variant::WgGoDebian, vec![sample(1, 0.5), bad])];
        let p = ProfileReport::new(Profile::Split, rows);
        assert_eq!(p.rows[0].ours_over_this, None);
        assert_eq!(p.rows[0].one_stream_gbps.unwrap().median, 0.5);
        let report = Report {
            header: crate::report_core::tests::header(),
            setup: crate::render::tests::setup(),
            profiles: vec![p],
            notes: vec![],
        };
        assert_eq!(
            report.failures(),
            vec!["split/wireguard-go-debian repeat 2: no connectivity".to_owned()]
        );
        assert_eq!(report.failed_variants(), vec![Variant::WgGoDebian]);
    }
}
