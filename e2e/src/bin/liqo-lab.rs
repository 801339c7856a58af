//! `liqo-lab`: clusters built from network namespaces on one Linux host.

use std::{path::PathBuf, process::ExitCode, time::Instant};

#[path = "liqo_lab/quickstart.rs"]
mod quickstart;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use e2e::{
    lab::{self, Lab, Prefix, Target, check, status},
    topology::Topology,
};

/// Peered-cluster lab on one Linux host: every node and pod is a network namespace.
#[derive(Parser)]
#[command(
    version,
    about,
    after_long_help = "The benchmarks (tunnel, path, peers, peering, offload) are `liqo-bench`."
)]
struct Cli {
    /// Prefix of every namespace the lab creates; labs with different prefixes coexist.
    #[arg(long, global = true, env = "LIQO_LAB_PREFIX", default_value = "lq")]
    prefix: Prefix,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the clusters of a topology (a preset or a YAML file).
    Up {
        #[command(flatten)]
        source: Source,
        /// Give every cluster a real control plane (etcd, kube-apiserver, kcm, scheduler and
        /// kwok as processes) whose Nodes are the lab's nodes, with Liqo, the gateway and route
        /// operators, and the daemons started from what the operators render; peer with
        /// `liqoctl` then (`liqo-lab k8s env` prints the shell lines).
        #[arg(long)]
        k8s: bool,
        /// With `--k8s`: each cluster's API server and auth service are reachable only from
        /// inside it (their ClusterIPs local in the gateway node, liqo-proxy there, the
        /// controller-manager moved there, the WAN dropped), so the clusters can only be
        /// peered with `liqoctl peer in-band`.
        #[arg(long, requires = "k8s")]
        in_band: bool,
    },
    /// Show the clusters, nodes, pods and their addresses.
    Status {
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Run a command inside a node or pod: `exec rome/n0-p1 -- ping -c1 10.200.0.2`.
    Exec {
        /// `<cluster>/<node>`, `<cluster>/<pod>`, `<cluster>/lan` or `wan`.
        target: Target,
        /// The command and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// Probe every pod from every other pod of its cluster, and across every peering (ICMP and
    /// TCP, checking the source address each server sees), and print the matrix.
    Check,
    /// Peer two clusters: exchange network parameters through their IPAM services and configure
    /// both gateways.
    Peer {
        /// One cluster.
        a: String,
        /// The other.
        b: String,
    },
    /// Move a cluster's gateway to another of its nodes (the public address moves with it) and
    /// report how long cross-cluster traffic was interrupted.
    MoveGateway {
        /// The cluster.
        cluster: String,
        /// The node to run the gateway on.
        node: String,
    },
    /// With control planes (`up --k8s`): give a cluster's gateway a new WireGuard key while a
    /// pod of another cluster pings it and probes it over TCP, and report how long each loop was
    /// interrupted (`liqoctl rotate-key`, or the key Secret deleted).
    RotateKey {
        /// The cluster whose gateway gets a new key.
        cluster: String,
        /// The cluster probing it (peered with it).
        #[arg(long)]
        from: String,
        /// Delete the key Secret instead of running `liqoctl rotate-key`.
        #[arg(long)]
        delete_secret: bool,
        /// How long both loops must answer after the switch.
        #[arg(long, default_value_t = 5)]
        settle_secs: u64,
    },
    /// Undo `peer`.
    Unpeer {
        /// One cluster.
        a: String,
        /// The other.
        b: String,
    },
    /// Remove everything the lab created (also after a crash).
    Down,
    /// Validate a topology and print its resolved plan without building anything.
    Plan(Source),
    /// The main demo: build two clusters with the same pod CIDR and show them working.
    Quickstart {
        /// With real control planes, peered by `liqoctl` (see `up --k8s`).
        #[arg(long)]
        k8s: bool,
        /// With `--k8s`: the clusters reachable only in-band (see `up --in-band`), peered by
        /// `liqoctl peer in-band`.
        #[arg(long, requires = "k8s")]
        in_band: bool,
    },
    /// Relay TCP from inside a node's namespace to the root namespace (started by `up --k8s`).
    #[command(hide = true)]
    Relay {
        /// The node's namespace.
        #[arg(long)]
        netns: dataplane::NetnsName,
        /// `<listen inside>=<connect outside>`, repeated.
        #[arg(long, required = true)]
        forward: Vec<lab::k8s::relay::Forward>,
        /// A path under the lab's directory (teardown finds the relay by it).
        #[arg(long)]
        tag: PathBuf,
    },
    /// Real Kubernetes control planes (etcd, apiserver, controller-manager, scheduler, kwok
    /// nodes) as local processes, for the control plane.
    K8s {
        #[command(subcommand)]
        what: K8s,
    },
}

#[derive(Subcommand)]
enum K8s {
    /// Start clusters (builds the binaries on first use: about 11 minutes) and wait until they
    /// serve, then leave them running.
    Up {
        /// Number of clusters (named rome, milan, turin, ...).
        #[arg(long, default_value_t = 2)]
        clusters: usize,
        /// Simulated (kwok) nodes per cluster.
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        /// Give every cluster the same pod and service CIDRs.
        #[arg(long)]
        overlapping: bool,
        /// Install Liqo on every cluster: the chart's objects, a ServiceAccount and token per
        /// component, and liqo-ipam, liqo-auth and liqo-controller-manager as processes (built
        /// beforehand: `cargo build -p ipam -p liqo-auth -p liqo-controller-manager -p liqoctl`).
        #[arg(long)]
        liqo: bool,
    },
    /// Print the shell lines that point kubectl (and liqoctl, with --liqo) at them.
    Env,
    /// Stop every process and remove every file (also after a crash).
    Down,
}

#[derive(Args)]
struct Source {
    /// A built-in topology.
    #[arg(long, conflicts_with = "file", default_value = "two-clusters")]
    preset: String,
    /// A topology file (YAML).
    #[arg(long)]
    file: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

impl Source {
    fn load(&self) -> Result<Topology> {
        match &self.file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                Topology::from_yaml(&text)
                    .with_context(|| format!("invalid topology {}", path.display()))
            }
            None => Topology::preset(&self.preset).context("invalid preset"),
        }
    }
}

fn main() -> ExitCode {
    e2e::cli::default_sigpipe();
    e2e::cli::init_logging();
    let cli = Cli::parse();
    if let Command::Relay {
        netns,
        forward,
        tag: _,
    } = &cli.command
    {
        return match lab::k8s::relay::serve(netns, forward) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {}", liqo_types::chain(&e));
                ExitCode::FAILURE
            }
        };
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The lab's own `peer`, `unpeer` and `move-gateway` write the daemons' files: with control
/// planes the operators do, from what `liqoctl` makes.
fn refuse_k8s(prefix: &Prefix, what: &str) -> Result<()> {
    if lab::k8s::is_in_band(prefix) {
        bail!(
            "lab {prefix} is in-band (up --k8s --in-band): `{what}` is liqoctl's there \
             (`liqo-lab --prefix {prefix} k8s env` prints the shell lines; then \
             `liqoctl peer in-band`, as `liqo-lab --prefix {prefix} status` prints it)"
        );
    }
    if lab::k8s::is_k8s(prefix) {
        bail!(
            "lab {prefix} runs with control planes (up --k8s): `{what}` is liqoctl's there \
             (`liqo-lab --prefix {prefix} k8s env` prints the shell lines; then \
             `liqoctl --context milan generate peer-command` and run its output against rome)"
        );
    }
    Ok(())
}

/// What an in-band lab exposes where, and the `liqoctl` line that peers its first two
/// clusters (nothing for a lab that is not in-band).
fn print_in_band(k: &lab::k8s::K8sLab) -> Result<()> {
    let Some(record) = lab::k8s::inband::load(&k.lab.prefix)? else {
        return Ok(());
    };
    print!("{}", lab::k8s::inband::render(&record));
    let names: Vec<&str> = record.iter().map(|r| r.cluster.as_str()).collect();
    if let [a, b, ..] = names[..]
        && let Some(line) = lab::k8s::inband::peer_command(k, a, b)
    {
        println!("peer them: {line}");
    }
    Ok(())
}

fn require_root() -> Result<()> {
    e2e::cli::require_root("liqo-lab")
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let prefix = cli.prefix;
    match cli.command {
        Command::Plan(src) => print!("{}", src.load()?.to_yaml()),
        Command::Up {
            source,
            k8s,
            in_band,
        } => {
            let topo = source.load()?;
            require_root()?;
            let t = Instant::now();
            let lab = if k8s {
                let k = if in_band {
                    lab::k8s::up_in_band(prefix, topo).await?
                } else {
                    lab::k8s::up(prefix, topo, &lab::k8s::Options::default()).await?
                };
                print!("{}", k.set.env());
                print!("{}", e2e::liqo::env(&k.liqo));
                print_in_band(&k)?;
                k.lab
            } else {
                lab::up(prefix, topo).await?
            };
            println!(
                "lab {} is up in {:.2} s",
                lab.prefix,
                t.elapsed().as_secs_f64()
            );
            print!("{}", status::render(&lab, &status::rows(&lab)?));
        }
        Command::Status { output } => {
            let lab = Lab::load(&prefix)?;
            let rows = status::rows(&lab)?;
            match output {
                Format::Table => {
                    print!("{}", status::render(&lab, &rows));
                    if lab::k8s::is_in_band(&prefix) {
                        print_in_band(&lab::k8s::K8sLab::load(&prefix)?)?;
                    }
                    let peerings = if lab::k8s::is_k8s(&prefix) {
                        lab::k8s::views::peerings(&lab::k8s::K8sLab::load(&prefix)?).await?
                    } else {
                        lab::peerings(&lab)?
                    };
                    print!("{}", status::render_peerings(&peerings));
                }
                Format::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "prefix": lab.prefix.to_string(), "topology": lab.topology, "namespaces": rows,
                    }))?
                ),
            }
        }
        Command::Exec { target, command } => {
            let lab = Lab::load(&prefix)?;
            let ns = lab.netns(&target)?;
            // Our own tools (`liqo-gateway status`, ...) are found where the lab's daemons are,
            // whether or not they are on the PATH (not found there: the PATH decides).
            let program = if command[0].starts_with("liqo-") && !command[0].contains('/') {
                e2e::lab::bin(&command[0])
                    .map_or_else(|_| command[0].clone().into(), std::ffi::OsString::from)
            } else {
                command[0].clone().into()
            };
            let status = ns
                .command(&program)
                .args(&command[1..])
                .status()
                .with_context(|| format!("running {:?} in {target}", command[0]))?;
            return Ok(ExitCode::from(status.code().map_or(1, |c| c as u8)));
        }
        Command::Check => {
            if lab::k8s::is_in_band(&prefix) {
                println!(
                    "lab {prefix} is in-band: the probes cross the tunnel made by \
                     `liqoctl peer in-band` (the API servers are not reachable from the WAN)"
                );
            }
            let m = if lab::k8s::is_k8s(&prefix) {
                lab::k8s::views::check(&lab::k8s::K8sLab::load(&prefix)?).await?
            } else {
                check::with_peerings(&Lab::load(&prefix)?)?
            };
            print!("{}", m.render());
            if !m.failures().is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Peer { a, b } => {
            require_root()?;
            refuse_k8s(&prefix, "peer")?;
            let lab = Lab::load(&prefix)?;
            let t = Instant::now();
            let (va, vb) = lab::peer(&lab, &a, &b)?;
            println!("peered {a} and {b} in {:.2} s", t.elapsed().as_secs_f64());
            println!(
                "  {a} sees {b}'s pods at {} (external {}), {b} sees {a}'s pods at {}",
                va.remote_pods, va.remote_external, va.local_pods_at_peer
            );
            println!(
                "  {b} sees {a}'s pods at {} (external {}), {a} sees {b}'s pods at {}",
                vb.remote_pods, vb.remote_external, vb.local_pods_at_peer
            );
        }
        Command::RotateKey {
            cluster,
            from,
            delete_secret,
            settle_secs,
        } => {
            require_root()?;
            if !lab::k8s::is_k8s(&prefix) {
                anyhow::bail!("lab {prefix} has no control planes: rotate-key needs `up --k8s`");
            }
            let k = lab::k8s::K8sLab::load(&prefix)?;
            let trigger = if delete_secret {
                lab::k8s::rotate::Trigger::DeleteSecret
            } else {
                lab::k8s::rotate::Trigger::Liqoctl
            };
            let r = k
                .rotate_key(
                    &cluster,
                    &from,
                    trigger,
                    std::time::Duration::from_secs(settle_secs),
                    std::time::Duration::from_secs(60),
                )
                .await?;
            if let Some(out) = &r.liqoctl {
                print!("{out}");
            }
            print!("{}", r.render());
        }
        Command::MoveGateway { cluster, node } => {
            require_root()?;
            let k8s = if lab::k8s::is_k8s(&prefix) {
                Some(lab::k8s::K8sLab::load(&prefix)?)
            } else {
                None
            };
            let lab = Lab::load(&prefix)?;
            let from = lab::gateway_node(
                &lab,
                lab.topology
                    .cluster(&cluster)
                    .with_context(|| format!("no cluster {cluster:?} in lab {prefix}"))?,
            )?;
            let avoid = [from.as_str(), node.as_str()];
            let pair = match &k8s {
                Some(k) => lab::outage::pair_across_views(
                    &lab,
                    &lab::k8s::views::peerings(k).await?,
                    &cluster,
                    &avoid,
                )?,
                None => lab::outage::pair_across(&lab, &cluster, &avoid)?,
            };
            let prober = match &pair {
                Some((src, dst, addr, _)) => Some(lab::outage::Prober::start(src, dst, *addr)?),
                None => None,
            };
            let moved = match &k8s {
                // Its node cordoned, the gateway and its operator rescheduled by the lab.
                Some(k) => lab::k8s::move_gateway(k, &cluster, &node)
                    .await
                    .map_err(anyhow::Error::from),
                None => lab::move_gateway(&lab, &cluster, &node)
                    .await
                    .map_err(anyhow::Error::from),
            };
            // Keep probing briefly so that the first answers after the move are seen.
            if prober.is_some() {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            let outage = prober.map(lab::outage::Prober::finish).transpose()?;
            let m = moved?;
            println!(
                "moved {cluster}'s gateway from {} to {}: old gateway drained in {:.2} s, \
                 new one handshaken with every peer and every overlay agent following after {:.2} s",
                m.from,
                m.to,
                m.stopped.as_secs_f64(),
                m.ready.as_secs_f64()
            );
            if let (Some(o), Some((_, _, _, what))) = (outage, pair) {
                println!(
                    "traffic {what}: longest interruption {:.2} s ({} of {} TCP probes answered, one every 50 ms){}",
                    o.longest_gap.as_secs_f64(),
                    o.answered,
                    o.probes,
                    if o.up_at_end { "" } else { "; NOT RESTORED" }
                );
                if !o.up_at_end {
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        Command::Unpeer { a, b } => {
            require_root()?;
            refuse_k8s(&prefix, "unpeer")?;
            let lab = Lab::load(&prefix)?;
            lab::unpeer(&lab, &a, &b)?;
            println!("unpeered {a} and {b}");
        }
        Command::Down => {
            require_root()?;
            let r = lab::k8s::down(&prefix)?;
            println!(
                "lab {prefix} is down: removed {} namespaces, killed {} processes{}",
                r.lab.namespaces,
                r.lab.processes,
                if r.k8s > 0 || r.relays > 0 {
                    format!(
                        ", stopped {} control-plane processes and {} relays",
                        r.k8s, r.relays
                    )
                } else {
                    String::new()
                }
            );
        }
        Command::Quickstart { k8s: false, .. } => return quickstart::quickstart(prefix).await,
        Command::Quickstart { k8s: true, in_band } => {
            return quickstart::quickstart_k8s(prefix, in_band).await;
        }
        Command::Relay { .. } => unreachable!("handled before the runtime starts"),
        Command::K8s { what } => k8s(prefix, what).await?,
    }
    Ok(ExitCode::SUCCESS)
}

async fn k8s(prefix: Prefix, what: K8s) -> Result<()> {
    use e2e::k8s;
    match what {
        K8s::Up {
            clusters,
            nodes,
            overlapping,
            liqo,
        } => {
            let t = Instant::now();
            let bins = k8s::binaries()?;
            let built = t.elapsed();
            let t = Instant::now();
            let set = k8s::Clusters::up(
                &bins,
                &k8s::Options {
                    prefix,
                    clusters,
                    nodes,
                    overlapping,
                },
            )
            .await?;
            println!(
                "{clusters} cluster(s) with {nodes} kwok node(s) each ready in {:.1} s (binaries: {:.1} s, {})",
                t.elapsed().as_secs_f64(),
                built.as_secs_f64(),
                bins.dir.display()
            );
            let installed = if liqo {
                let t = Instant::now();
                // On failure `set` drops: the clusters and whatever was started stop.
                let l = e2e::liqo::install(&set, &bins, &e2e::liqo::Options::default()).await?;
                println!(
                    "Liqo installed and serving on {clusters} cluster(s) in {:.1} s",
                    t.elapsed().as_secs_f64()
                );
                Some(l)
            } else {
                None
            };
            print!("{}", set.env());
            if let Some(l) = &installed {
                print!("{}", e2e::liqo::env(l));
            }
            set.detach();
        }
        K8s::Env => {
            let set = k8s::load(&prefix)?;
            print!("{}", set.env());
            if let Some(l) = e2e::liqo::load(&set)? {
                print!("{}", e2e::liqo::env(&l));
            }
        }
        K8s::Down => {
            let d = k8s::down(&prefix)?;
            println!(
                "clusters {prefix} are down: stopped {} processes ({} needed SIGKILL){}",
                d.stopped,
                d.killed,
                if d.removed {
                    ", removed their files"
                } else {
                    ""
                }
            );
        }
    }
    Ok(())
}
