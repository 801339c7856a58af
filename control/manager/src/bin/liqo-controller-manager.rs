//! `liqo-controller-manager`: the peering controllers (ForeignCluster, CRD replicator,
//! ResourceRequest, ResourceOffer; the network manager with `--ipam-address`) against the
//! apiserver of `KUBECONFIG` / in-cluster, with Prometheus metrics on `--metrics-listen` and the
//! admission webhooks on `--webhook-listen` (off with `--disable-webhooks`).

use std::{
    net::{IpAddr, SocketAddr},
    path::PathBuf,
    sync::Arc,
    time::Duration,
};

use anyhow::Context as _;
use clap::{ArgAction, Parser};
use control::offer::Percent;
use futures::FutureExt;
use liqo_auth::url::Overrides;
use liqo_controller_manager::{
    context::{Context, Settings},
    launcher::{self, vk::VkLauncher},
    leader,
    metrics::Metrics,
    network, run, webhook,
};

#[derive(Debug, Parser)]
#[command(name = "liqo-controller-manager", version, about)]
struct Args {
    /// The Liqo namespace.
    #[arg(short = 'n', long, default_value = "liqo")]
    namespace: String,
    /// The address peers use to reach our auth service (instead of the liqo-auth Service's).
    #[arg(long)]
    auth_service_address_override: Option<String>,
    /// The port peers use to reach our auth service.
    #[arg(long)]
    auth_service_port_override: Option<u16>,
    /// The share of our free resources offered to each consumer, in percent.
    #[arg(long, default_value = "30")]
    resource_sharing_percentage: Percent,
    /// Accept incoming peerings whose ForeignCluster says Auto.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    enable_incoming_peering: bool,
    /// Requests a second to this cluster's API server (0: unlimited); the peers' API servers
    /// get the default limits (`liqo_auth::rate::DEFAULT`).
    #[arg(long, default_value_t = liqo_auth::rate::DEFAULT.qps)]
    api_server_qps: f64,
    /// Requests at once to this cluster's API server.
    #[arg(long, default_value_t = liqo_auth::rate::DEFAULT.burst)]
    api_server_burst: u32,
    /// How often every object is reconciled again (`30s`, `1m`; at least `1s`).
    #[arg(long, default_value = "30s", value_parser = liqo_controller_manager::duration::parse_period)]
    resync_period: Duration,
    /// Labels of this cluster (`k=v,k2=v2`), carried by the ResourceOffers we make: the
    /// consumers' virtual nodes get them, and NamespaceOffloading cluster selectors match them.
    #[arg(long, default_value = "", value_parser = control::selector::parse_labels)]
    cluster_labels: std::collections::BTreeMap<String, String>,
    /// The storage fabric: provision the claims of the virtual StorageClass `liqo`.
    #[arg(long, default_value_t = false, action = ArgAction::Set)]
    enable_storage: bool,
    /// Where the twin claims of the claims bound on our nodes live.
    #[arg(long, default_value = control::consts::storage::NAMESPACE)]
    storage_namespace: control::names::NamespaceName,
    /// The class of the twin claims (empty: the cluster's default class).
    #[arg(long, default_value = "", value_parser = class_name)]
    real_storage_class_name: String,
    /// Where Prometheus metrics are served (`GET /metrics`).
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// The liqo-ipam service (`http://host:port`, `https://` for TLS); without it the network
    /// manager is off (no NetworkConfig or TunnelEndpoint; NETWORKING stays None).
    #[arg(long, value_parser = ipam_address)]
    ipam_address: Option<String>,
    /// The CA of liqo-ipam's certificate (an https address).
    #[arg(long, requires = "ipam_address")]
    ipam_ca_file: Option<PathBuf>,
    /// A file holding the bearer token liqo-ipam requires.
    #[arg(long, requires = "ipam_address")]
    ipam_token_file: Option<PathBuf>,
    /// The address peers use to reach our gateway (instead of the gateway Service's).
    #[arg(long)]
    gateway_address_override: Option<IpAddr>,
    /// The UDP port peers use to reach our gateway.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    gateway_port_override: Option<u16>,
    /// How long an unpeering waits for the peer to remove our NetworkConfig's copy (and for the
    /// operators to drop the TunnelEndpoint) before releasing the IPAM ranges anyway.
    #[arg(long, default_value = "5m", value_parser = liqo_controller_manager::duration::parse_period)]
    network_release_grace: Duration,
    /// On SIGTERM or ctrl-c, how long the reconciles under way may take to finish (e.g. one
    /// waiting on a peer that does not answer); then the process exits 0 anyway, naming them.
    /// A second signal during it exits at once (status 1).
    #[arg(long, default_value = "10s", value_parser = liqo_controller_manager::duration::parse)]
    shutdown_grace: Duration,
    /// Where the admission webhooks are served (HTTPS).
    /// Loopback by default: only what runs on this host reaches it. In a cluster the chart
    /// sets the pod's address (`0.0.0.0:9443`) so the apiserver can call it through the
    /// Service; the reviews answer with a patch or a verdict and change no state themselves.
    #[arg(long, default_value = "127.0.0.1:9443")]
    webhook_listen: SocketAddr,
    /// Do not serve the admission webhooks (nor make their certificates or set their caBundle).
    #[arg(long)]
    disable_webhooks: bool,
    /// Names and IP addresses of the webhook certificate besides the Service's DNS names
    /// (repeatable, or comma-separated).
    #[arg(long, value_delimiter = ',')]
    webhook_cert_names: Vec<String>,
    /// Elect a leader among the replicas on the Lease `liqo-controller-manager`: every replica
    /// serves the webhooks, only the leader reconciles and runs the virtual kubelets. Needed
    /// with more than one replica.
    #[arg(long)]
    leader_elect: bool,
    /// How long followers wait after they last saw the Lease renewed before taking it.
    #[arg(long, default_value = "10s", value_parser = liqo_controller_manager::duration::parse)]
    leader_elect_lease_duration: Duration,
    /// How long the leader tries to renew before it stops leading (and exits, to be restarted
    /// as a follower).
    #[arg(long, default_value = "7s", value_parser = liqo_controller_manager::duration::parse)]
    leader_elect_renew_deadline: Duration,
    /// How often each replica tries to take or renew the Lease.
    #[arg(long, default_value = "2s", value_parser = liqo_controller_manager::duration::parse)]
    leader_elect_retry_period: Duration,
    /// This replica's name in the Lease, followed by `_` and a random suffix (default: the
    /// POD_NAME variable, else the host name).
    #[arg(long, env = "POD_NAME")]
    leader_elect_identity: Option<String>,
    #[command(flatten)]
    virtual_kubelet: launcher::args::VkArgs,
    #[command(flatten)]
    workers: liqo_daemon::memory::Workers,
}

/// An `http://` or `https://` address, as liqo-ipam's client takes it.
fn ipam_address(s: &str) -> Result<String, String> {
    ipam::service::client::ClientOptions::new(s)
        .prepare()
        .map(drop)
        .map_err(|e| e.to_string())?;
    Ok(s.to_owned())
}

/// jemalloc by default (built in, one arena, pages returned as they empty), not glibc's malloc:
/// the stores' objects come and go by the thousand, and glibc keeps what they freed in
/// per-thread arenas unless trimmed; mimalloc's 64 KiB pages stayed pinned by the few objects
/// made during a burst that outlive it (the process did not come back to its idle memory
/// after its pods were deleted). `LIQO_MALLOC=mimalloc` or `glibc` runs another, each giving
/// memory back as workers park (`liqo_daemon::memory::choice`).
/// Counted (`liqo_daemon::memory::Counting`): the live heap beside the anonymous resident
/// memory, in the log (and the metrics).
#[global_allocator]
static ALLOCATOR: liqo_daemon::memory::Counting<liqo_daemon::memory::Chosen> =
    liqo_daemon::memory::Counting(liqo_daemon::memory::Chosen);

/// The runtime gives memory back as its threads go idle (`liqo_daemon::memory`); everything
/// runs on its worker threads (the thread that blocks on it never parks as a worker).
fn main() -> anyhow::Result<()> {
    // The daemons' logging: stderr, RUST_LOG (default info), colours only on a terminal.
    liqo_daemon::logging::init();
    // A bad allocator name is refused first (before the flags).
    liqo_daemon::memory::choice::announce()?;
    let args = Args::parse();
    liqo_daemon::memory::runtime(args.workers)?.block_on(async { tokio::spawn(run(args)).await? })
}

async fn run(args: Args) -> anyhow::Result<()> {
    tokio::spawn(liqo_daemon::memory::report_heap(
        liqo_daemon::memory::REPORT_EVERY,
    ));
    let ipam = args.ipam_address.clone().map(|address| {
        let mut o = ipam::service::client::ClientOptions::new(address);
        o.ca_file = args.ipam_ca_file.clone();
        o.token_file = args.ipam_token_file.clone();
        o
    });
    if let Some(o) = &ipam {
        // Checked before anything else (the files read, the combination allowed); the
        // network manager prepares its own connection from the same options.
        o.prepare()
            .with_context(|| format!("--ipam-address {}", o.server))?;
    }
    let timing = control::leader::Timing::new(
        args.leader_elect_lease_duration,
        args.leader_elect_renew_deadline,
        args.leader_elect_retry_period,
    )
    .context(
        "--leader-elect-lease-duration, --leader-elect-renew-deadline, --leader-elect-retry-period",
    )?;
    let vk_settings = args
        .virtual_kubelet
        .settings(ipam.clone())
        .context("the virtual kubelet flags")?;
    let mut config = kube::Config::infer()
        .await
        .context("kube config (KUBECONFIG or in-cluster)")?;
    liqo_auth::user_agent::set(
        &mut config,
        "liqo-controller-manager",
        env!("CARGO_PKG_VERSION"),
    );
    let limits =
        liqo_auth::rate::Limits::new("--api-server", args.api_server_qps, args.api_server_burst)?;
    // The leader's Lease has a client of its own, never rate limited: its renewals never wait
    // behind the controllers' requests.
    let lease_client = liqo_auth::stack::client(
        config.clone(),
        liqo_auth::rate::Limits { qps: 0.0, burst: 0 },
    )
    .context("kube config (KUBECONFIG or in-cluster)")?;
    let client = liqo_auth::stack::client(config, limits)
        .context("kube config (KUBECONFIG or in-cluster)")?;
    tracing::info!(
        qps = limits.qps,
        burst = limits.burst,
        "the API client's rate limits"
    );
    let local = liqo_auth::cluster::local_identity(&client, &args.namespace)
        .await
        .context("the local cluster identity")?;
    let settings = Settings {
        namespace: args.namespace.clone(),
        auth_overrides: Overrides {
            address: args.auth_service_address_override,
            port: args.auth_service_port_override,
        },
        sharing: args.resource_sharing_percentage,
        enable_incoming: args.enable_incoming_peering,
        resync: args.resync_period,
        cluster_labels: args.cluster_labels.clone(),
        storage: args
            .enable_storage
            .then(|| control::storage::provision::Settings {
                namespace: args.storage_namespace.to_string(),
                real_class: Some(args.real_storage_class_name.clone()).filter(|c| !c.is_empty()),
                // Read from the `liqo` class at each decision.
                reclaim: String::new(),
            }),
    };
    let metrics = Metrics::default();
    let metrics_leader = metrics.leader();
    tracing::info!(cluster = %local.cluster_id, name = %local.cluster_name, "starting");
    let shutdown = signals()?;
    let webhooks = if args.disable_webhooks {
        tracing::info!("webhooks disabled");
        None
    } else {
        let mut config = webhook::Config::new(args.webhook_listen, args.namespace.clone());
        config.extra_sans = args.webhook_cert_names.clone();
        let serving = webhook::start(
            client.clone(),
            config,
            local.clone(),
            metrics.clone(),
            shutdown.clone(),
        )
        .await
        .context("the admission webhooks")?;
        Some(tokio::spawn(serving))
    };
    // After the webhooks: serving metrics means the webhooks serve too.
    liqo_daemon::server::spawn_metrics(args.metrics_listen, metrics.registry())
        .await
        .context("--metrics-listen")?;
    let mut ctx = Context::new(
        client.clone(),
        settings,
        local.clone(),
        Arc::new(VkLauncher::new(client.clone(), local, vk_settings)),
        metrics,
    );
    if let Some(ipam) = ipam {
        let address = ipam.server.clone();
        let config = network::Config {
            ipam,
            gateway: control::network::endpoint::Overrides {
                address: args.gateway_address_override,
                port: args.gateway_port_override,
            },
            grace: args.network_release_grace,
        };
        let manager = network::Manager::new(client, config)
            .with_context(|| format!("--ipam-address {address}"))?;
        ctx = ctx.with_network(manager);
    }
    let ctx = Arc::new(ctx);
    let started = std::time::Instant::now();
    let elector = if args.leader_elect {
        let base = match &args.leader_elect_identity {
            Some(name) => name.clone(),
            None => hostname().context("the host name (for --leader-elect)")?,
        };
        let me = leader::identity(&base).context("a random leader identity (/dev/urandom)")?;
        Some(leader::Elector::new(
            lease_client,
            &args.namespace,
            control::consts::objects::MANAGER_LEADER_LEASE,
            me,
            timing,
            metrics_leader,
            liqo_controller_manager::FIELD_MANAGER,
        ))
    } else {
        metrics_leader.set(1);
        None
    };
    let controllers = led(elector, ctx, shutdown.clone(), args.shutdown_grace);
    let stopped = match webhooks {
        None => controllers.await,
        Some(mut server) => {
            tokio::pin!(controllers);
            tokio::select! {
                stopped = &mut controllers => {
                    // The server stops on the same signal; its end changes nothing now.
                    server.abort();
                    stopped
                }
                ended = &mut server => {
                    if shutdown.clone().now_or_never().is_none() {
                        // Pods of labelled namespaces are refused while the webhooks are down
                        // (failurePolicy Fail): exit so the process is restarted.
                        let why = ended.err().map_or("it returned".to_owned(), |e| e.to_string());
                        tracing::error!(why = %why, "the webhook server ended without a shutdown signal");
                        eprintln!("Error: the webhook server ended without a shutdown signal ({why})");
                        std::process::exit(1)
                    }
                    controllers.await
                }
            }
        }
    };
    match stopped {
        run::Stopped::Clean => {
            tracing::info!("stopped");
            Ok(())
        }
        run::Stopped::Ended => {
            // Not through the runtime's shutdown either (see below); run_bounded logged it.
            eprintln!("Error: the controllers ended without a shutdown signal");
            std::process::exit(1)
        }
        run::Stopped::Abandoned(running) => {
            tracing::warn!(
                grace = ?args.shutdown_grace,
                uptime = ?started.elapsed(),
                abandoned = running.len(),
                "stopped with reconciles still running (named above): exiting"
            );
            // Not through the runtime's shutdown: a call blocked in a blocking thread
            // (a name lookup of an unreachable peer) would hold it.
            std::process::exit(0)
        }
    }
}

/// The controllers, run while this replica leads (always without an elector): with one, they
/// start once it leads (or never, on a shutdown before), a lost lead exits the process at once
/// (status 1: restarted as a follower, it never reconciles beside the new leader), and a clean
/// stop gives the Lease back.
async fn led(
    elector: Option<leader::Elector>,
    ctx: Arc<Context>,
    shutdown: futures::future::Shared<futures::future::BoxFuture<'static, ()>>,
    grace: Duration,
) -> run::Stopped {
    let Some(mut elector) = elector else {
        return run::run_bounded(ctx, shutdown, grace).await;
    };
    tokio::select! {
        () = elector.acquire() => {}
        () = shutdown.clone() => return run::Stopped::Clean,
    }
    let stopped = tokio::select! {
        stopped = run::run_bounded(ctx, shutdown, grace) => stopped,
        lost = elector.keep() => {
            tracing::error!(identity = elector.identity(), error = %liqo_types::chain(&lost), "lost the lead: exiting");
            eprintln!("Error: lost the lead ({})", liqo_types::chain(&lost));
            std::process::exit(1)
        }
    };
    // Bounded: a stalled API server must not hold the exit (the Lease then expires).
    if tokio::time::timeout(Duration::from_secs(5), elector.release())
        .await
        .is_err()
    {
        tracing::warn!("releasing the Lease: no answer in 5 s; it expires on its own");
    }
    stopped
}

/// The host name (the kernel's).
fn hostname() -> std::io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/hostname")?
        .trim()
        .to_owned())
}

/// The shutdown: the first SIGTERM or ctrl-c. A second one during the shutdown grace exits at
/// once, with status 1.
fn signals() -> anyhow::Result<futures::future::Shared<futures::future::BoxFuture<'static, ()>>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("a SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("a SIGINT handler")?;
    let (tx, mut rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let mut first = true;
        loop {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            if first {
                tracing::info!(signal = name, "shutting down");
                tx.send_replace(true);
                first = false;
            } else {
                tracing::warn!(
                    signal = name,
                    "a second signal during the shutdown grace: exiting at once"
                );
                std::process::exit(1);
            }
        }
    });
    Ok(async move {
        // The sender lives as long as the signal task, i.e. the process: an error (it went)
        // cannot happen, and would mean no signal can come, so nothing to wait for.
        let _ = rx.wait_for(|got| *got).await;
    }
    .boxed()
    .shared())
}

/// A StorageClass name (a DNS-1123 subdomain), or empty (the default class).
fn class_name(s: &str) -> Result<String, control::names::InvalidName> {
    if !s.is_empty() {
        control::names::validate_subdomain(s)?;
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_flags_are_consistent() {
        use clap::CommandFactory;
        let command = super::Args::command();
        command.clone().debug_assert();
        let about = env!("CARGO_PKG_DESCRIPTION");
        assert_eq!(
            liqo_daemon::memory::help_opens_with(&command, about),
            Ok(())
        );
    }
}
