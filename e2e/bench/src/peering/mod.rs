//! `liqo-bench peering`: seconds from `liqoctl peer` to `OutgoingPeering=Established` on
//! two harness clusters with Liqo ([`e2e::k8s`], [`e2e::liqo`]), and the
//! liqo-controller-managers' memory and CPU.
//!
//! ```text
//!   milan: liqoctl generate peer-command --only-command          (once, not timed)
//!   rome:  liqoctl peer out-of-band milan ...   -> rome Auth/Outgoing, milan Incoming Established
//!   rome:  liqoctl unpeer out-of-band milan     -> rome Outgoing None, milan Incoming None
//!   both:  VmRSS/VmHWM of liqo-controller-manager; the apiserver floor on rome   (x repeats)
//! ```
//!
//! The floor (`probe::floor_sample`) is measured on the same clusters in the same run: every
//! time is also given as a multiple of it. The clusters are named `<prefix>pb` (a set of their
//! own: a `liqo-lab k8s up` with the same prefix is left alone); they are stopped at the end,
//! on failure and on Ctrl-C, and a set left by a crashed run is removed first.

pub(crate) mod probe;
pub mod render;
pub mod report;
mod round;

use std::time::Instant;

pub use render::render;
pub use report::{Metric, PeeringReport, Round};

use super::{
    BenchError,
    measure::LoadTracker,
    report_core::{Header, liqo_tools},
    run,
};
use e2e::{
    k8s::{self, Clusters},
    lab::Prefix,
    liqo,
};

/// The fewest rounds a real run may use.
pub const MIN_REPEATS: u32 = 3;
/// Rounds by default (the issue asks for the median of 5).
pub const DEFAULT_REPEATS: u32 = 5;
/// Floor samples per round by default.
pub const DEFAULT_FLOOR_SAMPLES: u32 = 10;

/// What to run.
#[derive(Debug, Clone)]
pub struct PeeringOptions {
    /// The bench's clusters are `<prefix>pb`.
    pub prefix: Prefix,
    /// Rounds (at least [`MIN_REPEATS`] unless `quick`).
    pub repeats: u32,
    /// Floor samples per round.
    pub floor_samples: u32,
    /// Seconds to wait for each event before failing.
    pub timeout_secs: u64,
    /// Allow fewer rounds (smoke tests, not numbers).
    pub quick: bool,
}

impl PeeringOptions {
    /// Checks the numbers.
    pub fn validate(self) -> Result<PeeringOptions, BenchError> {
        let bad = |s: String| Err(BenchError::Options(s));
        if self.repeats < MIN_REPEATS && !self.quick {
            return bad(format!(
                "--repeats {} is below {MIN_REPEATS}; medians need at least {MIN_REPEATS} \
                 (add --quick for a smoke test)",
                self.repeats
            ));
        }
        if !(1..=100).contains(&self.repeats) {
            return bad(format!("--repeats {} is outside 1..=100", self.repeats));
        }
        if !(1..=1000).contains(&self.floor_samples) {
            return bad(format!(
                "--floor-samples {} is outside 1..=1000",
                self.floor_samples
            ));
        }
        if !(5..=3600).contains(&self.timeout_secs) {
            return bad(format!(
                "--timeout {} is outside 5..=3600 seconds",
                self.timeout_secs
            ));
        }
        self.cluster_prefix()?;
        Ok(self)
    }

    /// The prefix of the bench's clusters.
    pub fn cluster_prefix(&self) -> Result<Prefix, BenchError> {
        run::cluster_prefix(&self.prefix, "pb")
    }
}

/// Runs `liqo-bench peering`. Progress goes to stderr. A round that does not reach a state
/// in time is an error. Everything started is stopped before this returns, also on error and on
/// SIGINT or SIGTERM.
pub async fn peering(opts: PeeringOptions) -> Result<PeeringReport, BenchError> {
    let opts = opts.validate()?;
    let prefix = opts.cluster_prefix()?;
    run::on_own_clusters(&prefix, bench(opts, prefix.clone(), Header::now())).await
}

async fn bench(
    opts: PeeringOptions,
    prefix: Prefix,
    mut header: Header,
) -> Result<PeeringReport, BenchError> {
    let bins = k8s::binaries().map_err(|e| BenchError::step("the Kubernetes binaries", &e))?;
    eprintln!("bench: starting clusters {prefix} (rome, milan)");
    let t = Instant::now();
    let set = Clusters::up(
        &bins,
        &k8s::Options {
            prefix: prefix.clone(),
            clusters: 2,
            nodes: 1,
            overlapping: true,
        },
    )
    .await
    .map_err(|e| BenchError::step("starting the clusters", &e))?;
    let clusters_up_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let installed = liqo::install(&set, &bins, &liqo::Options::default())
        .await
        .map_err(|e| BenchError::step("installing Liqo", &e))?;
    let install_secs = t.elapsed().as_secs_f64();
    eprintln!(
        "bench: clusters up in {clusters_up_secs:.1} s, Liqo installed in {install_secs:.1} s"
    );

    let ctx = round::Ctx::new(&set, &installed, opts.timeout_secs).await?;
    let kubernetes = ctx.kubernetes_version().await?;
    header.tools = liqo_tools(&installed, &["liqo-auth", "liqo-controller-manager"]);
    let mut load = LoadTracker::default();
    let mut rounds = Vec::new();
    let mut progress = run::Progress::new(opts.repeats as usize);
    let cpu0 = ctx.cpu_secs()?;
    let wall0 = Instant::now();
    for repeat in 1..=opts.repeats {
        let background = load.quiet().await?;
        let r = ctx
            .round(repeat, background, opts.floor_samples)
            .await
            .map_err(|e| BenchError::Step {
                what: format!("round {repeat}"),
                detail: format!(
                    "{e}\nthe end of each component's log (removed with the clusters):\n{}",
                    ctx.log_tails()
                ),
            })?;
        eprintln!("{} round {repeat}: {}", progress.step(), summary(&r));
        rounds.push(r);
    }
    let wall = wall0.elapsed().as_secs_f64();
    let cpu: Vec<(String, f64, f64)> = ctx
        .cpu_secs()?
        .into_iter()
        .zip(cpu0)
        .map(|((name, after), (_, before))| (name, after - before, wall))
        .collect();
    header.load = load.seen();
    let setup = report::Setup {
        repeats: opts.repeats,
        floor_samples: opts.floor_samples,
        kubernetes,
        clusters_up_secs,
        install_secs,
    };
    drop(set);
    Ok(PeeringReport::new(header, setup, rounds, &cpu))
}

/// One progress line.
fn summary(r: &Round) -> String {
    let floor = crate::Spread::of(r.floor_ms.iter().copied()).map_or(0.0, |s| s.median);
    let mem: Vec<String> = r
        .memory
        .iter()
        .map(|m| format!("{} {:.1} MiB", m.cluster, m.rss_kib as f64 / 1024.0))
        .collect();
    format!(
        "auth {}, outgoing {:.2} s, incoming {:.2} s, liqoctl peer {:.2} s, unpeer {:.2} s, \
         floor {floor:.1} ms, RSS {}, background {:.0}%",
        r.auth_secs
            .map_or_else(|| "kept".into(), |s| format!("{s:.2} s")),
        r.outgoing_secs,
        r.incoming_secs,
        r.peer_command_secs,
        r.unpeer_secs,
        mem.join(", "),
        r.background_load_pct
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(repeats: u32, quick: bool) -> PeeringOptions {
        PeeringOptions {
            prefix: "lq".parse().unwrap(),
            repeats,
            floor_samples: DEFAULT_FLOOR_SAMPLES,
            timeout_secs: 120,
            quick,
        }
    }

    #[test]
    fn at_least_three_rounds_unless_quick_and_a_prefix_of_its_own() {
        let e = opts(2, false).validate().unwrap_err().to_string();
        assert!(
            e.contains("--repeats 2 is below 3") && e.contains("--quick"),
            "{e}"
        );
        assert!(opts(1, true).validate().is_ok());
        assert!(opts(0, true).validate().is_err());
        assert_eq!(opts(5, false).cluster_prefix().unwrap().to_string(), "lqpb");
        let mut long = opts(5, false);
        long.prefix = "abcdefghij".parse().unwrap();
        let e = long.validate().unwrap_err().to_string();
        assert!(e.contains("--prefix abcdefghij is too long"), "{e}");
        let mut t = opts(5, false);
        t.timeout_secs = 1;
        assert!(t.validate().is_err());
    }

    #[test]
    fn a_progress_line_names_every_figure() {
        let s = summary(&report::tests::round(2, 1.5));
        assert!(
            s.starts_with("auth kept, outgoing 1.50 s, incoming 1.40 s, liqoctl peer 1.70 s"),
            "{s}"
        );
        assert!(
            s.contains("floor 20.0 ms, RSS rome 20.0 MiB, milan 8.0 MiB"),
            "{s}"
        );
    }
}
