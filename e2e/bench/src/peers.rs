//! `liqo-bench peers`: one gateway with many peers, on `liqo-bench tunnel`'s bed and with its
//! `ours` leg:
//!
//! ```text
//!   <p>-bench-podA --veth-- <p>-bench-gwA ==veth (underlay)== <p>-bench-gwB --veth-- <p>-bench-podB
//!   iperf3 client          liqo-gateway, N peers     liqo-gateway, 1 peer           iperf3 server
//! ```
//!
//! gwA's peers are the real one (gwB) and N-1 stand-ins with their own ranges and keys and no
//! endpoint ([`config`]). For every count (1, 100 and 1,000 by default) it measures how long the
//! gateway takes to apply 1 -> N peers, one peer more and less at N, and N -> 1; the rules and
//! routes in gwA's host and gateway namespaces; and one TCP stream and 64-byte UDP packets/s
//! through the real peer. Repeats are interleaved (repeat > count); the report gives medians,
//! each as a ratio to the 1-peer figure, and whether the issue's targets hold at the largest
//! count. A missed target is a result, not an error.
//!
//! Everything lives under `<prefix>-bench-*` and is removed at the end, on failure, on Ctrl-C,
//! and at the start of the next run after a crash ([`super::bed`]).

mod config;
pub mod render;
pub mod report;
mod sample;

use std::collections::BTreeMap;

pub use config::{MAX_PEERS, STAND_IN_RANGE};
pub use render::render;
pub use report::{Metric, PeersReport, Row, Sample, UdpLoad};

use super::{
    BenchError, Options, Profile, Variant,
    bed::Bed,
    keys::Keys,
    measure::LoadTracker,
    report_core::Header,
    run::{self, Progress},
};

/// The fewest repeats a real run may use.
pub const MIN_REPEATS: u32 = 3;
/// The peer counts measured by default.
pub const DEFAULT_COUNTS: [u32; 3] = [1, 100, 1000];
/// The UDP test: 64-byte datagrams, offered as fast as iperf3 sends them.
pub const UDP: UdpLoad = UdpLoad {
    payload_bytes: 64,
    offered_mbps: 0,
};

/// What to run.
#[derive(Debug, Clone)]
pub struct PeersOptions {
    /// Prefix, repeats, seconds, installing and the cache; variants and profiles are set here
    /// (our gateway, unpinned).
    pub bench: Options,
    /// Peer counts of gwA (1 is always measured: every figure is a ratio to it).
    pub counts: Vec<u32>,
}

impl PeersOptions {
    /// Checks the numbers; sorts the counts, adds 1 and removes duplicates.
    pub fn validate(self) -> Result<PeersOptions, BenchError> {
        let bench = Options {
            variants: vec![Variant::Ours],
            profiles: vec![Profile::Shared],
            ..self.bench
        }
        .validate_with(MIN_REPEATS)?;
        let mut counts = self.counts;
        counts.push(1);
        counts.sort_unstable();
        counts.dedup();
        if let Some(c) = counts.iter().find(|c| !(1..=MAX_PEERS).contains(*c)) {
            return Err(BenchError::Options(format!(
                "--peers {c} is outside 1..={MAX_PEERS}"
            )));
        }
        if counts.len() < 2 {
            return Err(BenchError::Options(
                "--peers needs a count above 1 (every figure is a ratio to the 1-peer figure)"
                    .into(),
            ));
        }
        Ok(PeersOptions { bench, counts })
    }
}

/// Runs `liqo-bench peers`. Progress goes to stderr. A failed sample is recorded in the
/// report ([`PeersReport::failures`]), a missed target in its targets; neither is an error.
/// Everything the bench created is removed before this returns, also on error and on SIGINT or
/// SIGTERM.
pub async fn peers(opts: PeersOptions) -> Result<PeersReport, BenchError> {
    let opts = opts.validate()?;
    run::interruptible(bench(opts, Header::now())).await
}

async fn bench(opts: PeersOptions, header: Header) -> Result<PeersReport, BenchError> {
    let prepared = run::prepare(&opts.bench).await?;
    let bed = Bed::build(opts.bench.prefix.clone()).await?;
    let keys = Keys::create(&bed)?;
    let ctx = sample::Ctx {
        bed: &bed,
        peers: &prepared,
        keys: &keys,
        secs: opts.bench.seconds,
        udp: UDP,
    };
    let mut load = LoadTracker::default();
    let mut samples: BTreeMap<u32, Vec<Sample>> = BTreeMap::new();
    let repeats = opts.bench.repeats;
    let mut progress = Progress::new(repeats as usize * opts.counts.len());
    eprintln!(
        "bench: {repeats} repeats x {} peer counts ({}), {} s per iperf3 test",
        opts.counts.len(),
        opts.counts
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        opts.bench.seconds
    );
    for repeat in 1..=repeats {
        for &n in &opts.counts {
            let s = ctx.sample(n, repeat, &mut load).await;
            eprintln!("{} {n} peers #{repeat}: {}", progress.step(), summary(&s));
            samples.entry(n).or_default().push(s);
        }
    }
    drop(bed);
    let setup = run::setup(&opts.bench);
    Ok(PeersReport::new(
        run::finish(header, prepared, load),
        setup,
        UDP,
        samples,
    ))
}

/// One progress line.
fn summary(s: &Sample) -> String {
    let f = |m: Metric, d: usize| m.of(s).map_or_else(|| "-".into(), |x| format!("{x:.d$}"));
    let figures = format!(
        "apply {} ms, +1 {} ms, -1 {} ms, back {} ms, rules {}/{}, routes {}/{}, {} Gbit/s, \
         {} packets/s, background {:.0}%",
        f(Metric::FullApplyMs, 2),
        f(Metric::AddOneMs, 2),
        f(Metric::RemoveOneMs, 2),
        f(Metric::BackToOneMs, 2),
        f(Metric::HostRules, 0),
        f(Metric::GatewayRules, 0),
        f(Metric::HostRoutes, 0),
        f(Metric::GatewayRoutes, 0),
        f(Metric::TcpGbps, 2),
        f(Metric::UdpPps, 0),
        s.background_load_pct
    );
    match &s.error {
        Some(e) => format!("FAILED: {e} ({figures})"),
        None => figures,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DEFAULT_CACHE;

    fn opts(repeats: u32, quick: bool, counts: &[u32]) -> PeersOptions {
        PeersOptions {
            bench: Options {
                prefix: "lq".parse().unwrap(),
                repeats,
                seconds: 5,
                variants: vec![],
                profiles: vec![],
                skip_install: false,
                quick,
                cache: DEFAULT_CACHE.into(),
            },
            counts: counts.to_vec(),
        }
    }

    #[test]
    fn three_repeats_our_gateway_unpinned_and_counts_from_one() {
        let o = opts(3, false, &[1000, 100, 100]).validate().unwrap();
        assert_eq!(o.counts, [1, 100, 1000], "1 added, sorted, deduplicated");
        assert_eq!(o.bench.variants, [Variant::Ours]);
        assert_eq!(o.bench.profiles, [Profile::Shared]);
        let e = opts(2, false, &[10]).validate().unwrap_err().to_string();
        assert!(e.contains("--repeats 2 is below 3"), "{e}");
        assert_eq!(opts(1, true, &[10]).validate().unwrap().counts, [1, 10]);
    }

    #[test]
    fn counts_above_one_and_within_the_stand_in_range() {
        let e = opts(3, false, &[1]).validate().unwrap_err().to_string();
        assert!(e.contains("needs a count above 1"), "{e}");
        let e = opts(3, false, &[MAX_PEERS + 1])
            .validate()
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--peers 4001 is outside 1..=4000");
        assert!(opts(3, false, &[0, 5]).validate().is_err());
        assert!(opts(3, false, &[MAX_PEERS]).validate().is_ok());
    }

    #[test]
    fn a_progress_line_shows_every_figure_or_the_failure() {
        let mut s = report::tests::sample(100, 1, 1.0);
        assert_eq!(
            summary(&s),
            "apply 20.00 ms, +1 1.00 ms, -1 0.80 ms, back 15.00 ms, rules 4/4, routes 104/102, \
             4.00 Gbit/s, 32000 packets/s, background 2%"
        );
        s.udp_pps = None;
        s.error = Some("iperf3: no data received".into());
        assert!(
            summary(&s).starts_with("FAILED: iperf3: no data received (apply 20.00 ms,"),
            "{}",
            summary(&s)
        );
    }
}
