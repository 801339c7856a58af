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
    let date = parse::utc_date(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| BenchError::step("watching SIGTERM", &e))?;
    tokio::select! {
        r = run(opts, date, cpus) => r,
        _ = tokio::signal::ctrl_c() => Err(BenchError::Interrupted("SIGINT")),
        _ = term.recv() => Err(BenchError::Interrupted("SIGTERM")),
    }
}

async fn run(opts: Options, date: String, cpus: usize) -> Result<Report, BenchError> {
    let prepared = {
        let opts = opts.clone();
        tokio::task::spawn_blocking(move || install::prepare(&opts))
            .await
            .map_err(|e| BenchError::step("installing the peers", &e))??
    };
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
    let header = Header {
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
    };
    let notes = report::notes(&header, &opts.variants, &opts.profiles);
    Ok(Report {
        header,
        profiles,
        notes,
    })
}

type Samples = BTreeMap<(Profile, Variant), Vec<Sample>>;

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
    let started = Instant::now();
    let mut done = 0;
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
                done += 1;
                let elapsed = started.elapsed().as_secs();
                let left = elapsed * (total - done) as u64 / done as u64;
                eprintln!(
                    "[{done:>3}/{total} {:>2}:{:02}, ~{}:{:02} left] {profile} {v} #{repeat}: {}",
                    elapsed / 60,
                    elapsed % 60,
                    left / 60,
                    left % 60,
                    summary(&s)
                );
                samples.entry((profile, v)).or_default().push(s);
            }
        }
    }
    drop(bed);
    Ok((samples, load))
}
