//! `liqo-bench`: the benchmarks, a thin CLI over the `liqo_bench` library.

use std::{path::PathBuf, process::ExitCode};

use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};
use e2e::lab::Prefix;
use liqo_bench::{Profile, Variant};

/// Benchmarks of liqo-rs on one Linux host: the gateway, the lab's paths, many peers, peering
/// and offloading (as root: they build network namespaces and clusters of their own).
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Prefix of everything a bench creates (`<prefix>-bench-*`, the clusters `<prefix>pb` and
    /// `<prefix>ob`); benches with different prefixes coexist.
    #[arg(long, global = true, env = "LIQO_LAB_PREFIX", default_value = "lq")]
    prefix: Prefix,
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// Our gateway against the plain routed path, boringtun-cli and wireguard-go (Debian and
    /// latest) on one topology where only the gateway-to-gateway leg changes; installs the
    /// peers itself.
    Tunnel(TunnelArgs),
    /// Pod-to-pod throughput and RTT within a node, across nodes and across clusters (pods on
    /// non-gateway nodes at both ends), with our gateway alone measured in the same run.
    Path(PathArgs),
    /// One gateway with 1, 100 and 1,000 peers (one real, the rest without an endpoint): apply
    /// times, rule and route counts, one TCP stream and 64-byte UDP packets/s through the real
    /// peer, as ratios to 1 peer, and whether the targets hold.
    Peers(PeersArgs),
    /// Seconds from `liqoctl peer` to OutgoingPeering=Established (and the other conditions,
    /// and unpeering) on two harness clusters with Liqo, the liqo-controller-managers' memory
    /// and CPU, and the apiserver floor of the same clusters for comparison.
    Peering(PeeringArgs),
    /// Seconds until all pods of a `Remote` Deployment offloaded from rome to milan are
    /// Running, against the same Deployment on milan's own kwok nodes in the same run; per-pod
    /// p50/p99; the controller-managers' and the virtual kubelet's memory and CPU at 0, 100
    /// and all pods; and the targets.
    Offload(OffloadArgs),
    /// Seconds until N Services, EndpointSlices, ConfigMaps and Secrets of an offloaded
    /// namespace exist on the provider (as a ratio to the home API server's own time), the
    /// provider's writes per object, the virtual kubelet's memory, and convergence after a
    /// kill -9 during deletions.
    Reflection(ReflectionArgs),
}

#[derive(Args)]
struct ReflectionArgs {
    /// Objects per kind.
    #[arg(long, default_value_t = liqo_bench::reflection::DEFAULT_OBJECTS)]
    objects: u32,
    /// How long each wait may take, in seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

#[derive(Args)]
struct OffloadArgs {
    /// Replicas of the Deployment.
    #[arg(long, default_value_t = liqo_bench::offload::DEFAULT_PODS)]
    pods: u32,
    /// milan's kwok nodes (110 pods each; default: enough for the pods at 90 %, at least 12).
    #[arg(long)]
    provider_nodes: Option<usize>,
    /// rome's kwok nodes.
    #[arg(long, default_value_t = 1)]
    consumer_nodes: usize,
    /// Timed runs per side (the median is reported).
    #[arg(long, default_value_t = 1)]
    repeats: u32,
    /// Seconds each wait (all Running, a cleanup, a setup step) may take (default: 600, and
    /// a second per 8 pods above 4,800).
    #[arg(long)]
    timeout: Option<u64>,
    /// Only the vanilla side, without installing Liqo (the harness's own floor).
    #[arg(long)]
    vanilla_only: bool,
    /// The virtual kubelet's pod reflection workers (default: the controller-manager's, 10).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    vk_workers: Option<u16>,
    /// Do not kill the virtual kubelet at the end of the last Liqo run (by default it is, and
    /// its restart measured: time to its node's Lease, to quiet, writes to pods).
    #[arg(long)]
    no_restart: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

#[derive(Args)]
struct PeeringArgs {
    /// Rounds of peer + unpeer (medians need at least 3).
    #[arg(long, default_value_t = liqo_bench::peering::DEFAULT_REPEATS)]
    repeats: u32,
    /// Apiserver floor samples per round.
    #[arg(long, default_value_t = liqo_bench::peering::DEFAULT_FLOOR_SAMPLES)]
    floor_samples: u32,
    /// Seconds to wait for each condition before failing.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Allow fewer rounds than medians need (smoke tests, not numbers).
    #[arg(long)]
    quick: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// What every bench takes besides its own choices.
#[derive(Args)]
struct BenchRun {
    /// Seconds per iperf3 test.
    #[arg(long, default_value_t = 5)]
    seconds: u32,
    /// Install nothing; fail if a peer or tool is missing.
    #[arg(long)]
    skip_install: bool,
    /// Allow fewer repeats than medians need (smoke tests, not numbers).
    #[arg(long)]
    quick: bool,
    /// Where built peers are cached and installs logged.
    #[arg(long, env = "LIQO_BENCH_CACHE", default_value = liqo_bench::DEFAULT_CACHE)]
    cache: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

impl BenchRun {
    /// Options that measure `variants` in `profiles`, `repeats` times.
    fn options(
        &self,
        prefix: Prefix,
        repeats: u32,
        variants: Vec<Variant>,
        profiles: Vec<Profile>,
    ) -> liqo_bench::Options {
        liqo_bench::Options {
            prefix,
            repeats,
            seconds: self.seconds,
            variants,
            profiles,
            skip_install: self.skip_install,
            quick: self.quick,
            cache: self.cache.clone(),
        }
    }

    /// Options that measure our gateway alone, unpinned (`path` and `peers`).
    fn ours_alone(&self, prefix: Prefix, repeats: u32) -> liqo_bench::Options {
        self.options(prefix, repeats, vec![Variant::Ours], vec![Profile::Shared])
    }
}

#[derive(Args)]
struct PeersArgs {
    /// Interleaved repeats (medians need at least 3).
    #[arg(long, default_value_t = liqo_bench::peers::MIN_REPEATS)]
    repeats: u32,
    /// Peer counts of the measured gateway (comma-separated; 1 is always measured).
    #[arg(long, value_delimiter = ',', default_values_t = liqo_bench::peers::DEFAULT_COUNTS)]
    peers: Vec<u32>,
    #[command(flatten)]
    run: BenchRun,
}

#[derive(Args)]
struct PathArgs {
    /// Interleaved repeats (medians need at least 5).
    #[arg(long, default_value_t = 5)]
    repeats: u32,
    /// On a lab with control planes (as `liqo-lab up --k8s`), peered by `liqoctl`.
    #[arg(long)]
    k8s: bool,
    #[command(flatten)]
    run: BenchRun,
}

#[derive(Args)]
struct TunnelArgs {
    /// Interleaved repeats (medians need at least 5).
    #[arg(long, default_value_t = 5)]
    repeats: u32,
    /// Variants to measure (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Variant::ALL)]
    variants: Vec<Variant>,
    /// CPU profiles (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Profile::ALL)]
    profiles: Vec<Profile>,
    #[command(flatten)]
    run: BenchRun,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

/// The report as `format` asks: the text of `table`, or the JSON of `report`.
fn show<R: serde::Serialize>(format: Format, report: &R, table: fn(&R) -> String) -> Result<()> {
    match format {
        Format::Table => print!("{}", table(report)),
        Format::Json => println!("{}", serde_json::to_string_pretty(report)?),
    }
    Ok(())
}

fn main() -> ExitCode {
    e2e::cli::default_sigpipe();
    e2e::cli::init_logging();
    let cli = Cli::parse();
    // As liqo-lab's: two workers (the benches measure a 2-CPU machine and wait on processes).
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    e2e::cli::require_root("liqo-bench")?;
    let prefix = cli.prefix;
    match cli.bench {
        Bench::Tunnel(a) => tunnel(prefix, a).await,
        Bench::Path(a) => path(prefix, a).await,
        Bench::Peers(a) => peers(prefix, a).await,
        Bench::Peering(a) => {
            let report = liqo_bench::peering(liqo_bench::peering::PeeringOptions {
                prefix,
                repeats: a.repeats,
                floor_samples: a.floor_samples,
                timeout_secs: a.timeout,
                quick: a.quick,
            })
            .await?;
            show(a.output, &report, liqo_bench::peering::render)?;
            Ok(ExitCode::SUCCESS)
        }
        Bench::Offload(a) => {
            let report = liqo_bench::offload::offload(liqo_bench::offload::OffloadOptions {
                prefix,
                pods: a.pods,
                provider_nodes: a
                    .provider_nodes
                    .unwrap_or_else(|| liqo_bench::offload::provider_nodes_for(a.pods)),
                consumer_nodes: a.consumer_nodes,
                repeats: a.repeats,
                timeout_secs: a
                    .timeout
                    .unwrap_or_else(|| liqo_bench::offload::timeout_for(a.pods)),
                vanilla_only: a.vanilla_only,
                vk_workers: a.vk_workers.map(usize::from),
                restart_vk: !a.no_restart,
            })
            .await?;
            show(a.output, &report, liqo_bench::offload::render)?;
            Ok(ExitCode::SUCCESS)
        }
        Bench::Reflection(a) => {
            let report =
                liqo_bench::reflection::reflection(liqo_bench::reflection::ReflectionOptions {
                    prefix,
                    objects: a.objects,
                    timeout_secs: a.timeout,
                })
                .await?;
            show(a.output, &report, liqo_bench::reflection::render)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn tunnel(prefix: Prefix, a: TunnelArgs) -> Result<ExitCode> {
    let report =
        liqo_bench::tunnel(a.run.options(prefix, a.repeats, a.variants, a.profiles)).await?;
    show(a.run.output, &report, liqo_bench::render::render)?;
    let failed = report.failed_variants();
    if failed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let names: Vec<&str> = failed.iter().map(|v| v.label()).collect();
    eprintln!(
        "error: these variants failed to pass traffic: {}",
        names.join(", ")
    );
    for f in report.failures() {
        eprintln!("  {f}");
    }
    Ok(ExitCode::FAILURE)
}

async fn path(prefix: Prefix, a: PathArgs) -> Result<ExitCode> {
    let opts = a.run.ours_alone(prefix, a.repeats);
    let report = if a.k8s {
        liqo_bench::path::path_k8s(opts).await?
    } else {
        liqo_bench::path(opts).await?
    };
    show(a.run.output, &report, liqo_bench::path::render)?;
    Ok(if report.rows.iter().any(|r| r.gbps.is_none()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn peers(prefix: Prefix, a: PeersArgs) -> Result<ExitCode> {
    let report = liqo_bench::peers(liqo_bench::peers::PeersOptions {
        bench: a.run.ours_alone(prefix, a.repeats),
        counts: a.peers,
    })
    .await?;
    show(a.run.output, &report, liqo_bench::peers::render)?;
    // A missed target is a measurement; only failed samples are errors.
    let failures = report.failures();
    if failures.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("error: {} sample(s) failed:", failures.len());
    for f in failures {
        eprintln!("  {f}");
    }
    Ok(ExitCode::FAILURE)
}
