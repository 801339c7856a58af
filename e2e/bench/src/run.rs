//! The whole run: install, build the bed, measure every (repeat, profile, variant) interleaved,
//! tear everything down, summarize.

use std::{
    collections::BTreeMap,
    fs,
    time::{Instant, SystemTime, UNIX_EPOCH},
};

use super::{
    BenchError, Options, Profile, TUNNEL_MTU, Variant,
    bed::Bed,
    install::{self, Peers},
    keys::Keys,
    measure::{self, LoadTracker},
    parse,
    report::{self, Header, ProfileReport, Report, Row, Sample},
    variant,
};

/// Runs `liqo-lab bench tunnel`. Progress goes to stderr. A variant that passes no traffic is
/// recorded in the report ([`Report::failures`]), not returned as an error. Everything the bench
/// created is removed before this returns, also on error and on SIGINT or SIGTERM.
pub async fn tunnel(opts: Options) -> Result<Report, BenchError> {
    let opts = opts.validate()?;
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if opts.profiles.contains(&Profile::Split) && cpus < 2 {
        return Err(BenchError::Options(format!(
            "the split profile pins each side to its own CPU and needs 2; this machine has \
             {cpus} (use --profiles shared)"
        )));
    }
    interruptible(run(opts, now(), cpus)).await
}

/// The current time, as the header shows it.
pub(crate) fn now() -> String {
    parse::utc_date(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
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

/// How and on what a run was done: the machine, `opts`' numbers, the tools `prepared` found and
/// the background load seen.
pub(crate) fn header(
    opts: &Options,
    date: String,
    cpus: usize,
    prepared: Peers,
    load: LoadTracker,
) -> Header {
    Header {
        date,
        kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default(),
        cpus,
        cpu_model: fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, m)| m.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".into()),
        repeats: opts.repeats,
        seconds: opts.seconds,
        tunnel_mtu: TUNNEL_MTU,
        tools: prepared.tools,
        installs: prepared.installs,
        background_load_max_pct: load.max_pct,
        background_wait_secs: load.waited.as_secs_f64(),
    }
}

/// Finds, and unless told not to installs, what `opts` needs (on a blocking thread).
pub(crate) async fn prepare(opts: &Options) -> Result<Peers, BenchError> {
    let opts = opts.clone();
    tokio::task::spawn_blocking(move || install::prepare(&opts))
        .await
        .map_err(|e| BenchError::step("installing the peers", &e))?
}

async fn run(opts: Options, date: String, cpus: usize) -> Result<Report, BenchError> {
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
    let header = header(&opts, date, cpus, prepared, load);
    let notes = report::notes(&header, &opts.variants, &opts.profiles);
    Ok(Report {
        header,
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
