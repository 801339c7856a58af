//! `liqo-bench tunnel`, the whole run: install, build the bed, measure every (repeat, profile,
//! variant) interleaved, tear everything down, summarize; and what the other benches share
//! with it (SIGINT and SIGTERM, progress lines, the installs).

use std::{collections::BTreeMap, time::Instant};

use e2e::{k8s, lab::Prefix};

use super::{
    BenchError, Options, Profile, TUNNEL_MTU, Variant,
    bed::Bed,
    install::{self, Peers},
    keys::Keys,
    measure::{self, LoadTracker},
    report::{self, ProfileReport, Report, Row, Sample, Setup},
    report_core::Header,
    variant,
};

/// Runs `liqo-bench tunnel`. Progress goes to stderr. A variant that passes no traffic is
/// recorded in the report ([`Report::failures`]), not returned as an error. Everything the bench
/// created is removed before this returns, also on error and on SIGINT or SIGTERM.
pub async fn tunnel(opts: Options) -> Result<Report, BenchError> {
    let opts = opts.validate()?;
    let header = Header::now();
    let cpus = header.machine.cpus;
    if opts.profiles.contains(&Profile::Split) && cpus < 2 {
        return Err(BenchError::Options(format!(
            "the split profile pins each side to its own CPU and needs 2; this machine has \
             {cpus} (use --profiles shared)"
        )));
    }
    interruptible(run(opts, header)).await
}

/// Runs `bench` until it ends or SIGINT or SIGTERM arrives; then it is dropped, and with it
/// everything it created (the bed removes itself on drop).
pub(crate) async fn interruptible<T>(
    bench: impl Future<Output = Result<T, BenchError>>,
) -> Result<T, BenchError> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| BenchError::step("watching SIGTERM", &e))?;
    tokio::select! {
        r = bench => r,
        _ = tokio::signal::ctrl_c() => Err(BenchError::Interrupted("SIGINT")),
        _ = term.recv() => Err(BenchError::Interrupted("SIGTERM")),
    }
}

/// The prefix of a bench's own set of the test kit's clusters: the lab's `prefix` and `suffix`
/// (`pb` for peering, `ob` for offload), so that a `liqo-lab k8s up` with the same prefix is
/// left alone.
pub(crate) fn cluster_prefix(prefix: &Prefix, suffix: &str) -> Result<Prefix, BenchError> {
    format!("{prefix}{suffix}").parse().map_err(|_| {
        BenchError::Options(format!(
            "--prefix {prefix} is too long for the bench's clusters ({prefix}{suffix} must be at \
             most 10 characters)"
        ))
    })
}

/// Runs `bench` on a set of the test kit's clusters of its own, `prefix`: a set left by a
/// crashed run (its processes and files) is removed first, and the set is stopped afterwards,
/// also when `bench` fails or SIGINT or SIGTERM arrives (the set stops itself when dropped;
/// this also catches what a failed start left).
pub(crate) async fn on_own_clusters<T>(
    prefix: &Prefix,
    bench: impl Future<Output = Result<T, BenchError>>,
) -> Result<T, BenchError> {
    let d = k8s::down(prefix).map_err(|e| BenchError::step("removing an earlier run", &e))?;
    if d.stopped > 0 {
        eprintln!(
            "bench: removed the clusters of an earlier run ({} processes)",
            d.stopped
        );
    }
    let r = interruptible(bench).await;
    if let Err(e) = k8s::down(prefix) {
        eprintln!("bench: stopping clusters {prefix}: {e}");
    }
    r
}

/// `header` completed with the tools and installs `prepared` found and the background load
/// seen.
pub(crate) fn finish(mut header: Header, prepared: Peers, load: LoadTracker) -> Header {
    header.tools = prepared.tools;
    header.installs = prepared.installs;
    header.load = load.seen();
    header
}

/// `opts`' repeats and seconds, and the tunnel MTU.
pub(crate) fn setup(opts: &Options) -> Setup {
    Setup {
        repeats: opts.repeats,
        seconds: opts.seconds,
        tunnel_mtu: TUNNEL_MTU,
    }
}

/// Finds, and unless told not to installs, what `opts` needs (on a blocking thread).
pub(crate) async fn prepare(opts: &Options) -> Result<Peers, BenchError> {
    let opts = opts.clone();
    tokio::task::spawn_blocking(move || install::prepare(&opts))
        .await
        .map_err(|e| BenchError::step("installing the peers", &e))?
}

async fn run(opts: Options, header: Header) -> Result<Report, BenchError> {
    let prepared = prepare(&opts).await?;
    let (samples, load) = measure_all(&opts, &prepared).await?;
    let profiles: Vec<ProfileReport> = opts
        .profiles
        .iter()
        .map(|p| {
            let rows = opts
                .variants
                .iter()
                .map(|v| Row::new(*v, samples.get(&(*p, *v)).cloned().unwrap_or_default()))
                .collect();
            ProfileReport::new(*p, rows)
        })
        .collect();
    let setup = setup(&opts);
    let notes = report::notes(&setup, &opts.variants, &opts.profiles);
    Ok(Report {
        header: finish(header, prepared, load),
        setup,
        profiles,
        notes,
    })
}

type Samples = BTreeMap<(Profile, Variant), Vec<Sample>>;

/// Counts the runs of a bench for its progress lines.
pub(crate) struct Progress {
    total: usize,
    done: usize,
    started: Instant,
}

impl Progress {
    /// Nothing done yet of `total` runs.
    pub(crate) fn new(total: usize) -> Progress {
        Progress {
            total,
            done: 0,
            started: Instant::now(),
        }
    }

    /// One more run done: `[  3/30  1:02, ~9:18 left]`.
    pub(crate) fn step(&mut self) -> String {
        self.done += 1;
        let elapsed = self.started.elapsed().as_secs();
        let left = elapsed * (self.total.saturating_sub(self.done)) as u64 / self.done as u64;
        format!(
            "[{:>3}/{} {:>2}:{:02}, ~{}:{:02} left]",
            self.done,
            self.total,
            elapsed / 60,
            elapsed % 60,
            left / 60,
            left % 60
        )
    }
}

fn summary(s: &Sample) -> String {
    if let Some(e) = &s.error {
        return format!("FAILED: {e}");
    }
    let f = |x: Option<f64>, d: usize| x.map_or_else(|| "-".into(), |x| format!("{x:.d$}"));
    format!(
        "{} / {} Gbit/s, ping {} µs, {} µs/packet, background {:.0}%",
        f(s.gbps_1, 2),
        f(s.gbps_4, 2),
        f(s.rtt_us, 0),
        f(s.cpu_us_per_packet, 2),
        s.background_load_pct
    )
}

/// Every (repeat, profile, variant), interleaved; the bed is removed before this returns.
async fn measure_all(opts: &Options, peers: &Peers) -> Result<(Samples, LoadTracker), BenchError> {
    let bed = Bed::build(opts.prefix.clone()).await?;
    let keys = Keys::create(&bed)?;
    let ctx = measure::Ctx {
        bed: &bed,
        peers,
        secs: opts.seconds,
        hz: measure::clock_ticks(),
    };
    let mut load = LoadTracker::default();
    let mut samples = Samples::new();
    let total = opts.repeats as usize * opts.profiles.len() * opts.variants.len();
    let mut progress = Progress::new(total);
    eprintln!(
        "bench: {total} runs ({} repeats x {} profiles x {} variants), {} s per iperf3 test",
        opts.repeats,
        opts.profiles.len(),
        opts.variants.len(),
        opts.seconds
    );
    for repeat in 1..=opts.repeats {
        for &profile in &opts.profiles {
            for &v in &opts.variants {
                let s = match variant::up(&bed, peers, &keys, v, profile).await {
                    Ok(leg) => {
                        let s = ctx.sample(&leg, profile, repeat, &mut load).await;
                        variant::down(&bed, leg).await;
                        s
                    }
                    Err(e) => Sample {
                        repeat,
                        error: Some(e.to_string()),
                        ..Sample::default()
                    },
                };
                eprintln!(
                    "{} {profile} {v} #{repeat}: {}",
                    progress.step(),
                    summary(&s)
                );
                samples.entry((profile, v)).or_default().push(s);
            }
        }
    }
    drop(bed);
    Ok((samples, load))
}
