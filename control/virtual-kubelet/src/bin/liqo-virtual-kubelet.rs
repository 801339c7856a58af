//! `liqo-virtual-kubelet`: the virtual kubelet of one peering, as its own process (the
//! controller-manager's process launcher, or the chart's Deployment). The home API server is
//! `KUBECONFIG` / in-cluster; the provider's is `--foreign-kubeconfig` (a file made from the
//! identity Secret, mode 0600). Flags as upstream's (`cmd/virtual-kubelet/root/flag.go`).

use std::{net::IpAddr, path::PathBuf, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use control::api::{ClusterId, discovery::ClusterIdentity};
use kube::config::{KubeConfigOptions, Kubeconfig};
use liqo_auth::rate::Limits;
use liqo_virtual_kubelet::{
    VkConfig,
    config::{self, ReflectionWorkers},
};

#[derive(Debug, Parser)]
#[command(name = "liqo-virtual-kubelet", version, about)]
struct Args {
    /// The provider's cluster ID.
    #[arg(long)]
    foreign_cluster_id: ClusterId,
    /// The provider's cluster name (the node is `liqo-<name>`).
    #[arg(long)]
    foreign_cluster_name: String,
    /// The home cluster's ID.
    #[arg(long)]
    home_cluster_id: ClusterId,
    /// The home cluster's name.
    #[arg(long)]
    home_cluster_name: String,
    /// Our tenant namespace for the provider.
    #[arg(long)]
    tenant_namespace: String,
    /// The accepted ResourceOffer (in the tenant namespace).
    #[arg(long)]
    resource_offer: String,
    /// The kubeconfig of the provider's API server (our identity there).
    #[arg(long)]
    foreign_kubeconfig: PathBuf,
    /// The node's InternalIP: where the home API server reaches the kubelet API.
    #[arg(long, default_value = "127.0.0.1")]
    node_ip: IpAddr,
    /// The kubelet API's port.
    #[arg(long, default_value_t = config::DEFAULT_PORT)]
    listen_port: u16,
    /// The address the kubelet API binds (default: the node IP).
    #[arg(long)]
    listen_address: Option<IpAddr>,
    /// The CA of the client certificates the kubelet API accepts (the home API server's
    /// `--kubelet-client-certificate`); without it only `/healthz` is served.
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// The home liqo-ipam (`http://host:port`, `https://`); without it pod IPs are reported
    /// as the provider sees them and no NetworkUnavailable condition is kept.
    #[arg(long)]
    ipam_server: Option<String>,
    /// The CA of liqo-ipam's certificate.
    #[arg(long, requires = "ipam_server")]
    ipam_ca_file: Option<PathBuf>,
    /// A file holding liqo-ipam's bearer token.
    #[arg(long, requires = "ipam_server")]
    ipam_token_file: Option<PathBuf>,
    /// Whether the network to the provider is Liqo's (its TunnelEndpoint gates the node's
    /// readiness); default: with `--ipam-server`.
    #[arg(long, action = clap::ArgAction::Set)]
    liqo_network: Option<bool>,
    /// Pod reflection workers.
    #[arg(long, default_value_t = config::DEFAULT_POD_WORKERS)]
    pod_reflection_workers: usize,
    /// Service reflection workers (0: Services, and so EndpointSlices, are not reflected).
    #[arg(long, default_value_t = ReflectionWorkers::default().service)]
    service_reflection_workers: usize,
    /// EndpointSlice reflection workers (0: not reflected).
    #[arg(long, default_value_t = ReflectionWorkers::default().endpointslice)]
    endpointslice_reflection_workers: usize,
    /// Ingress reflection workers (0: not reflected).
    #[arg(long, default_value_t = ReflectionWorkers::default().ingress)]
    ingress_reflection_workers: usize,
    /// ConfigMap reflection workers (0: not reflected).
    #[arg(long, default_value_t = ReflectionWorkers::default().configmap)]
    configmap_reflection_workers: usize,
    /// Secret reflection workers (0: not reflected).
    #[arg(long, default_value_t = ReflectionWorkers::default().secret)]
    secret_reflection_workers: usize,
    /// ServiceAccount reflection workers (0: not reflected).
    #[arg(long, default_value_t = ReflectionWorkers::default().serviceaccount)]
    serviceaccount_reflection_workers: usize,
    /// Reflection workers of the PersistentVolumeClaims of class `liqo` bound on the virtual
    /// node (0: not reflected).
    #[arg(long, default_value_t = ReflectionWorkers::default().persistentvolumeclaim)]
    persistentvolumeclaim_reflection_workers: usize,
    /// API server support: offloaded pods get tokens of their home ServiceAccounts and reach
    /// the home API server (found from `default/kubernetes` and the IPAM).
    #[arg(long)]
    enable_apiserver_support: bool,
    /// Where the provider's pods reach the home API server (`host:port`; implies support).
    #[arg(long)]
    home_api_server: Option<control::shadowpod::token::HomeApi>,
    /// Requests a second to the home API server (0: unlimited).
    #[arg(long, default_value_t = liqo_auth::rate::DEFAULT.qps)]
    home_api_server_qps: f64,
    /// Requests at once to the home API server.
    #[arg(long, default_value_t = liqo_auth::rate::DEFAULT.burst)]
    home_api_server_burst: u32,
    /// Requests a second to the provider's API server (0: unlimited).
    #[arg(long, default_value_t = liqo_auth::rate::DEFAULT.qps)]
    foreign_api_server_qps: f64,
    /// Requests at once to the provider's API server.
    #[arg(long, default_value_t = liqo_auth::rate::DEFAULT.burst)]
    foreign_api_server_burst: u32,
    /// The node Lease's duration (`40s`).
    #[arg(long, default_value = "40s", value_parser = humantime::parse_duration)]
    node_lease_duration: Duration,
    /// How often the Lease is renewed and the provider pinged (`10s`).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    node_ping_interval: Duration,
    /// How long a ping of the provider may take (`1s`).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    node_ping_timeout: Duration,
    /// Extra labels of the node (`k=v,k2=v2`).
    #[arg(long, default_value = "", value_parser = control::selector::parse_labels)]
    node_extra_labels: std::collections::BTreeMap<String, String>,
    #[command(flatten)]
    workers: liqo_daemon::memory::Workers,
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
/// The program's name (its `User-Agent`).
const PROGRAM: &str = "liqo-virtual-kubelet";

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
    exit_with_parent()?;
    if args.pod_reflection_workers == 0 {
        anyhow::bail!("--pod-reflection-workers 0: at least one worker is needed");
    }
    let name = |flag: &str, v: &str| {
        v.parse()
            .map_err(|e| anyhow::anyhow!("--{flag} {v:?}: {e}"))
    };
    let foreign = ClusterIdentity {
        cluster_id: args.foreign_cluster_id.clone(),
        cluster_name: name("foreign-cluster-name", &args.foreign_cluster_name)?,
    };
    let home = ClusterIdentity {
        cluster_id: args.home_cluster_id.clone(),
        cluster_name: name("home-cluster-name", &args.home_cluster_name)?,
    };
    let ipam = args.ipam_server.clone().map(|server| {
        let mut o = ipam::service::client::ClientOptions::new(server);
        o.ca_file = args.ipam_ca_file.clone();
        o.token_file = args.ipam_token_file.clone();
        o
    });
    if let Some(o) = &ipam {
        o.prepare()
            .with_context(|| format!("--ipam-server {}", o.server))?;
    }
    let home_limits = Limits::new(
        "--home-api-server",
        args.home_api_server_qps,
        args.home_api_server_burst,
    )?;
    let foreign_limits = Limits::new(
        "--foreign-api-server",
        args.foreign_api_server_qps,
        args.foreign_api_server_burst,
    )?;
    let kubeconfig = Kubeconfig::read_from(&args.foreign_kubeconfig)
        .with_context(|| format!("--foreign-kubeconfig {}", args.foreign_kubeconfig.display()))?;
    let remote_config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .with_context(|| {
                format!("--foreign-kubeconfig {}", args.foreign_kubeconfig.display())
            })?;
    let mut remote_config = remote_config;
    liqo_auth::user_agent::set(&mut remote_config, PROGRAM, env!("CARGO_PKG_VERSION"));
    let remote = config::Remote::from_config(remote_config, foreign_limits)
        .context("the provider's client")?;
    let mut local_config = kube::Config::infer()
        .await
        .context("kube config (KUBECONFIG or in-cluster)")?;
    liqo_auth::user_agent::set(&mut local_config, PROGRAM, env!("CARGO_PKG_VERSION"));
    let local = liqo_auth::stack::client(local_config, home_limits)
        .context("kube config (KUBECONFIG or in-cluster)")?;
    tracing::info!(
        home_qps = home_limits.qps,
        home_burst = home_limits.burst,
        foreign_qps = foreign_limits.qps,
        foreign_burst = foreign_limits.burst,
        "API clients' rate limits"
    );
    let cfg = VkConfig {
        local,
        remote,
        home,
        foreign,
        tenant_namespace: args.tenant_namespace,
        offer: args.resource_offer,
        node_ip: args.node_ip,
        listen: (
            args.listen_address.unwrap_or(args.node_ip),
            args.listen_port,
        )
            .into(),
        client_ca: args.client_ca_file,
        liqo_network: args.liqo_network.unwrap_or(ipam.is_some()),
        ipam,
        pod_workers: args.pod_reflection_workers,
        lease_duration: args.node_lease_duration,
        ping_interval: args.node_ping_interval,
        ping_timeout: args.node_ping_timeout,
        extra_labels: args.node_extra_labels,
        apiserver_support: args.enable_apiserver_support,
        home_api: args.home_api_server,
        reflection: ReflectionWorkers {
            service: args.service_reflection_workers,
            endpointslice: args.endpointslice_reflection_workers,
            ingress: args.ingress_reflection_workers,
            configmap: args.configmap_reflection_workers,
            secret: args.secret_reflection_workers,
            serviceaccount: args.serviceaccount_reflection_workers,
            persistentvolumeclaim: args.persistentvolumeclaim_reflection_workers,
        },
    };
    liqo_virtual_kubelet::run(cfg, shutdown()?)
        .await
        .context("the virtual kubelet")?;
    tracing::info!("stopped");
    Ok(())
}

/// The launcher's environment variable naming its pid: the child dies with it (SIGKILL on
/// the parent's death), so a controller-manager killed outright never leaves a second writer
/// of the node behind for its successor.
pub const PARENT_PID_ENV: &str = "LIQO_VK_PARENT_PID";

fn exit_with_parent() -> anyhow::Result<()> {
    let Ok(pid) = std::env::var(PARENT_PID_ENV) else {
        return Ok(());
    };
    let pid: i32 = pid
        .parse()
        .with_context(|| format!("{PARENT_PID_ENV}={pid:?} is not a pid"))?;
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .context("asking to die with the launcher")?;
    // The launcher may have died before the request: then we are someone else's child now.
    if nix::unistd::getppid().as_raw() != pid {
        anyhow::bail!("the launcher (pid {pid}) is gone");
    }
    Ok(())
}

/// The first SIGTERM or ctrl-c.
fn shutdown() -> anyhow::Result<impl std::future::Future<Output = ()> + Send> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("a SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("a SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!(signal = "SIGTERM", "shutting down"),
            _ = int.recv() => tracing::info!(signal = "SIGINT", "shutting down"),
        }
    })
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
