//! `liqo-lab`: clusters built from network namespaces on one Linux host.
//!
//! This file only parses the command line and dispatches: each subcommand is its own module
//! (`up`, `status`, `exec`, `check`, `peer` and `unpeer`, `move_gateway`, `rotate_key`, `down`,
//! `plan`, `quickstart`, `relay`, `k8s`); what several share is `shared`.

mod check;
mod down;
mod exec;
mod k8s;
mod kill_gateway;
mod move_gateway;
mod peer;
mod plan;
mod quickstart;
mod quickstart_demo;
mod relay;
mod rotate_key;
mod shared;
mod source;
mod status;
mod up;

use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use e2e::lab::{self, Prefix, Target};

use source::Source;

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
        /// With `--k8s`: real nodes, each lab node running containerd, a kubelet and
        /// kube-proxy (CoreDNS on one), pods in real containers; the images imported from
        /// `$LIQO_LAB_IMAGES` (default target/lab-images: `bash chart/images/build.sh --images
        /// e2e/images`). Without it the nodes are kwok's (nothing runs in them).
        #[arg(long, requires = "k8s", conflicts_with = "in_band")]
        real_nodes: bool,
        /// With `--real-nodes`: Liqo installed by `liqoctl install` from its chart, every
        /// component a pod on the real nodes, from the chart's images (`$LIQO_LAB_IMAGES/chart`:
        /// `bash chart/images/build.sh --registry localhost --repository-prefix liqo-lab --tag
        /// lab`), instead of lab processes.
        #[arg(long, requires = "real_nodes")]
        chart: bool,
        /// With `--chart`: replicas of each cluster's gateway, 1 or 2 (active/standby on two
        /// nodes; the lab's load balancer follows the active one).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2), requires = "chart")]
        gateway_replicas: u8,
    },
    /// Show the clusters, nodes, pods and their addresses.
    Status {
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = status::Format::Table)]
        output: status::Format,
    },
    /// With control planes (`up --k8s`): what each cluster shows, to say why something did
    /// not come up: peerings, network objects, Liqo's pods and restarts, warning events and (from
    /// the chart) the last lines of each Liqo container's log. Read-only.
    Diagnose,
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
        /// How long both loops keep probing once traffic is back after the switch.
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
        /// With `--k8s`: real nodes (see `up --real-nodes`; builds what they run the first
        /// time), and the manual's demo on them: `liqo-demo` offloaded, its pods spread over
        /// both clusters, 100 requests to its Service.
        #[arg(long, requires = "k8s", conflicts_with = "in_band")]
        real_nodes: bool,
        /// With `--real-nodes`: replicas of each cluster's gateway, 1 or 2 (active/standby;
        /// `liqo-lab kill-gateway rome` then shows the failover).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2), requires = "real_nodes")]
        gateway_replicas: u8,
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
        /// Also serve the API server's egress proxy (HTTP CONNECT) on this Unix socket,
        /// dialling from inside the node (a lab with real nodes).
        #[arg(long)]
        egress_socket: Option<PathBuf>,
    },
    /// Kill -9 the active gateway of a cluster of Liqo from its chart with two gateway replicas
    /// (`up --k8s --real-nodes --chart --gateway-replicas 2`) while a pod probes across: who
    /// took over and how long traffic stopped (exit code 1 past 5 s).
    KillGateway {
        /// The cluster.
        cluster: String,
    },
    /// The load balancer of a cluster of Liqo from its chart with two gateway replicas (started
    /// by `up --chart --gateway-replicas 2`): the public address follows the active gateway.
    #[command(hide = true)]
    Balance {
        /// The cluster.
        #[arg(long)]
        cluster: String,
        /// A path under the lab's directory (teardown finds the process by it).
        #[arg(long)]
        tag: PathBuf,
    },
    /// Real Kubernetes control planes (etcd, apiserver, controller-manager, scheduler, kwok
    /// nodes) as local processes, for the control plane.
    K8s {
        #[command(subcommand)]
        what: k8s::K8s,
    },
}

fn main() -> ExitCode {
    e2e::cli::default_sigpipe();
    e2e::cli::init_logging();
    let cli = Cli::parse();
    // The relay serves without the async runtime.
    if let Command::Relay {
        netns,
        forward,
        tag: _,
        egress_socket,
    } = &cli.command
    {
        return relay::run(netns, forward, egress_socket.as_deref());
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

/// Runs the subcommand; its exit code (an error is printed by `main`, exit code 1).
async fn run(cli: Cli) -> Result<ExitCode> {
    let prefix = cli.prefix;
    match cli.command {
        Command::Plan(src) => plan::run(&src),
        Command::Up {
            source,
            k8s,
            in_band,
            real_nodes,
            chart,
            gateway_replicas,
        } => {
            up::run(
                prefix,
                &source,
                k8s,
                in_band,
                real_nodes,
                chart,
                gateway_replicas,
            )
            .await
        }
        Command::KillGateway { cluster } => kill_gateway::run(&prefix, &cluster).await,
        Command::Balance { cluster, tag: _ } => {
            let k = lab::k8s::K8sLab::load(&prefix)?;
            let c = k
                .lab
                .topology
                .cluster(&cluster)
                .with_context(|| format!("no cluster {cluster:?} in lab {prefix}"))?
                .clone();
            let client = k.client(&cluster).await?;
            lab::k8s::lb::balance(&k.lab, &c, &client).await
        }
        Command::Status { output } => status::run(&prefix, output).await,
        Command::Diagnose => {
            let k = lab::k8s::K8sLab::load(&prefix)?;
            let names: Vec<&str> = k
                .lab
                .topology
                .clusters
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            print!("{}", k.diagnose(&names));
            Ok(ExitCode::SUCCESS)
        }
        Command::Exec { target, command } => exec::run(&prefix, &target, &command),
        Command::Check => check::run(&prefix).await,
        Command::Peer { a, b } => peer::peer(&prefix, &a, &b),
        Command::RotateKey {
            cluster,
            from,
            delete_secret,
            settle_secs,
        } => rotate_key::run(&prefix, &cluster, &from, delete_secret, settle_secs).await,
        Command::MoveGateway { cluster, node } => move_gateway::run(&prefix, &cluster, &node).await,
        Command::Unpeer { a, b } => peer::unpeer(&prefix, &a, &b),
        Command::Down => down::run(&prefix),
        Command::Quickstart { k8s: false, .. } => quickstart::quickstart(prefix).await,
        Command::Quickstart {
            k8s: true,
            in_band,
            real_nodes,
            gateway_replicas,
        } => quickstart::quickstart_k8s(prefix, in_band, real_nodes, gateway_replicas).await,
        Command::Relay { .. } => unreachable!("handled before the runtime starts"),
        Command::K8s { what } => k8s::run(prefix, what).await,
    }
}
