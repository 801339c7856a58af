//! `liqo-ipam`: the IPAM service (`serve`) and its command-line client.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use ipam::{
    Config, parse_cidr,
    service::{
        Overrides, Service,
        proto::{self, ipam_client::IpamClient},
    },
    store::FileStore,
};
use ipnet::Ipv4Net;
use serde::Deserialize;

/// Address management for peered clusters: remapping of overlapping CIDRs and IP translation.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gRPC service.
    Serve(Serve),
    /// Decide where a peer's pod and external CIDRs appear locally.
    Remap {
        #[command(flatten)]
        server: Server,
        /// The peer's cluster ID.
        #[arg(long)]
        peer: String,
        /// The peer's pod CIDR.
        #[arg(long)]
        pod_cidr: String,
        /// The peer's external CIDR.
        #[arg(long, default_value = "10.70.0.0/16")]
        external_cidr: String,
    },
    /// Free a peer's ranges.
    Release {
        #[command(flatten)]
        server: Server,
        /// The peer's cluster ID.
        #[arg(long)]
        peer: String,
    },
    /// Record how a peer sees our pod and external CIDRs.
    SetPeerView {
        #[command(flatten)]
        server: Server,
        /// The peer's cluster ID.
        #[arg(long)]
        peer: String,
        /// Our pod CIDR as the peer sees it.
        #[arg(long)]
        pod_view: String,
        /// Our external CIDR as the peer sees it.
        #[arg(long)]
        external_view: String,
    },
    /// Translate one IP.
    MapIp {
        #[command(flatten)]
        server: Server,
        /// The peer's cluster ID.
        #[arg(long)]
        peer: String,
        /// The IP.
        #[arg(long)]
        ip: String,
        /// Which way.
        #[arg(long, value_enum, default_value_t = Dir::RemoteToLocal)]
        direction: Dir,
    },
    /// Show configuration, peers, endpoints and pool usage.
    List {
        #[command(flatten)]
        server: Server,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Add or remove a reserved subnet on the running service.
    Reserved {
        #[command(flatten)]
        server: Server,
        /// `add` or `remove`.
        action: Action,
        /// The subnet.
        cidr: String,
    },
    /// Add or remove a pool on the running service.
    Pool {
        #[command(flatten)]
        server: Server,
        /// `add` or `remove`.
        action: Action,
        /// The pool.
        cidr: String,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Dir {
    RemoteToLocal,
    LocalToPeer,
    Endpoint,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum Action {
    Add,
    Remove,
}

#[derive(Args)]
struct Server {
    /// Address of the service.
    #[arg(
        long,
        env = "LIQO_IPAM_SERVER",
        default_value = "http://127.0.0.1:6000"
    )]
    server: String,
}

/// `serve` flags; a YAML config file (same names, camelCase) may give them instead.
#[derive(Args, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct Serve {
    /// YAML file with any of the settings below (flags win).
    #[arg(long)]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// gRPC listen address.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Prometheus metrics listen address.
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// State file (crash-safe JSON).
    #[arg(long)]
    state: Option<PathBuf>,
    /// Local pod CIDR.
    #[arg(long)]
    pod_cidr: Option<String>,
    /// Local service CIDR.
    #[arg(long)]
    service_cidr: Option<String>,
    /// Requested local external CIDR.
    #[arg(long)]
    external_cidr: Option<String>,
    /// Pools (comma-separated; replaces the defaults 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16).
    #[arg(long, value_delimiter = ',')]
    pools: Option<Vec<String>>,
    /// Pools added to the defaults (comma-separated).
    #[arg(long, value_delimiter = ',')]
    additional_pools: Option<Vec<String>>,
    /// Subnets never handed out (comma-separated).
    #[arg(long, value_delimiter = ',')]
    reserved_subnets: Option<Vec<String>>,
}

impl Serve {
    /// Flags over the config file.
    fn merged(self) -> Result<Serve> {
        let Some(path) = &self.config else {
            return Ok(self);
        };
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let file: Serve = serde_saphyr::from_str(&text)
            .with_context(|| format!("invalid config file {}", path.display()))?;
        Ok(Serve {
            config: None,
            listen: self.listen.or(file.listen),
            metrics_listen: self.metrics_listen.or(file.metrics_listen),
            state: self.state.or(file.state),
            pod_cidr: self.pod_cidr.or(file.pod_cidr),
            service_cidr: self.service_cidr.or(file.service_cidr),
            external_cidr: self.external_cidr.or(file.external_cidr),
            pools: self.pools.or(file.pools),
            additional_pools: self.additional_pools.or(file.additional_pools),
            reserved_subnets: self.reserved_subnets.or(file.reserved_subnets),
        })
    }
}

fn cidrs(flag: &str, v: &[String]) -> Result<Vec<Ipv4Net>> {
    v.iter()
        .filter(|s| !s.is_empty())
        .map(|s| parse_cidr(s).with_context(|| format!("--{flag}")))
        .collect()
}

fn cidr(flag: &str, v: Option<&String>, default: Option<&str>) -> Result<Ipv4Net> {
    let s = v
        .map(String::as_str)
        .or(default)
        .with_context(|| format!("--{flag} is required"))?;
    parse_cidr(s).with_context(|| format!("--{flag}"))
}

async fn serve(args: Serve) -> Result<()> {
    let a = args.merged()?;
    let mut config = Config::new(
        cidr("pod-cidr", a.pod_cidr.as_ref(), None)?,
        cidr(
            "service-cidr",
            a.service_cidr.as_ref(),
            Some("10.96.0.0/12"),
        )?,
    );
    config.external_cidr = cidr(
        "external-cidr",
        a.external_cidr.as_ref(),
        Some(ipam::state::DEFAULT_EXTERNAL_CIDR),
    )?;
    let mut pools = a.pools.as_deref().map(|p| cidrs("pools", p)).transpose()?;
    if let Some(extra) = a.additional_pools.as_deref() {
        pools
            .get_or_insert_with(|| config.pools.clone())
            .extend(cidrs("additional-pools", extra)?);
    }
    let reserved = a
        .reserved_subnets
        .as_deref()
        .map(|r| cidrs("reserved-subnets", r))
        .transpose()?;
    if let Some(p) = &pools {
        config.pools.clone_from(p);
    }
    if let Some(r) = &reserved {
        config.reserved.clone_from(r);
    }
    let state = a
        .state
        .unwrap_or_else(|| PathBuf::from("/var/lib/liqo-ipam/state.json"));
    if let Some(dir) = state.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let service = Service::open(
        config,
        Overrides { pools, reserved },
        Box::new(FileStore::new(&state)),
    )
    .with_context(|| format!("opening the IPAM state {}", state.display()))?;
    let listen = a
        .listen
        .unwrap_or_else(|| "0.0.0.0:6000".parse().expect("literal"));
    let metrics_listen = a
        .metrics_listen
        .unwrap_or_else(|| "127.0.0.1:9106".parse().expect("literal"));
    let metrics = service.metrics();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move { metrics.render() }),
    );
    let ml = tokio::net::TcpListener::bind(metrics_listen)
        .await
        .with_context(|| format!("binding {metrics_listen}"))?;
    tokio::spawn(async move { axum::serve(ml, app).await });
    tracing::info!(%listen, %metrics_listen, state = %state.display(), "liqo-ipam serving");
    println!(
        "liqo-ipam serving gRPC on {listen}, metrics on http://{metrics_listen}/metrics, state in {}",
        state.display()
    );
    tonic::transport::Server::builder()
        .add_service(service.grpc())
        .serve_with_shutdown(listen, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .with_context(|| format!("serving on {listen}"))
}

async fn client(s: &Server) -> Result<IpamClient<tonic::transport::Channel>> {
    IpamClient::connect(s.server.clone())
        .await
        .with_context(|| format!("connecting to {}", s.server))
}

fn peer_line(p: &proto::PeerInfo) -> String {
    format!(
        "peer {}: pod CIDR {} -> {} here, external CIDR {} -> {} here; sees our pods at {}, our external CIDR at {}",
        p.cluster_id,
        p.pod_cidr,
        p.pod_view,
        p.external_cidr,
        p.external_view,
        if p.our_pod_view.is_empty() {
            "(unknown)"
        } else {
            &p.our_pod_view
        },
        if p.our_external_view.is_empty() {
            "(unknown)"
        } else {
            &p.our_external_view
        },
    )
}

fn list_table(l: &proto::ListResponse) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "pod CIDR {}  service CIDR {}  external CIDR {}",
        l.pod_cidr, l.service_cidr, l.external_cidr
    );
    let _ = writeln!(o, "pools: {}", l.pools.join(", "));
    let _ = writeln!(
        o,
        "reserved: {}",
        if l.reserved.is_empty() {
            "-".into()
        } else {
            l.reserved.join(", ")
        }
    );
    for u in &l.usage {
        let _ = writeln!(
            o,
            "  pool {:<18} {:>10} of {:>10} addresses used",
            u.pool, u.used, u.total
        );
    }
    let _ = writeln!(
        o,
        "\n{:<24} {:<18} {:<18} {:<18} {:<18} {:<18} OUR EXTERNAL (THERE)",
        "PEER", "POD CIDR", "POD (HERE)", "EXTERNAL CIDR", "EXTERNAL (HERE)", "OUR PODS (THERE)"
    );
    for p in &l.peers {
        let _ = writeln!(
            o,
            "{:<24} {:<18} {:<18} {:<18} {:<18} {:<18} {}",
            p.cluster_id,
            p.pod_cidr,
            p.pod_view,
            p.external_cidr,
            p.external_view,
            p.our_pod_view,
            p.our_external_view
        );
    }
    if !l.endpoints.is_empty() {
        let _ = writeln!(o, "\n{:<16} {:<16} PEERS", "ENDPOINT", "EXTERNAL IP");
        for e in &l.endpoints {
            let _ = writeln!(
                o,
                "{:<16} {:<16} {}",
                e.ip,
                e.external_ip,
                e.peers.join(",")
            );
        }
    }
    o
}

fn list_json(l: &proto::ListResponse) -> serde_json::Value {
    let peers: Vec<_> = l
        .peers
        .iter()
        .map(|p| {
            serde_json::json!({"clusterId": p.cluster_id, "podCIDR": p.pod_cidr, "externalCIDR": p.external_cidr,
                "podView": p.pod_view, "externalView": p.external_view, "ourPodView": p.our_pod_view, "ourExternalView": p.our_external_view})
        })
        .collect();
    let endpoints: Vec<_> = l
        .endpoints
        .iter()
        .map(|e| serde_json::json!({"ip": e.ip, "externalIP": e.external_ip, "peers": e.peers}))
        .collect();
    let usage: Vec<_> = l
        .usage
        .iter()
        .map(|u| serde_json::json!({"pool": u.pool, "used": u.used, "total": u.total}))
        .collect();
    serde_json::json!({"podCIDR": l.pod_cidr, "serviceCIDR": l.service_cidr, "externalCIDR": l.external_cidr,
        "pools": l.pools, "reserved": l.reserved, "peers": peers, "endpoints": endpoints, "usage": usage})
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve(s) => serve(s).await?,
        Command::Remap {
            server,
            peer,
            pod_cidr,
            external_cidr,
        } => {
            let r = client(&server)
                .await?
                .remap(proto::RemapRequest {
                    cluster_id: peer,
                    pod_cidr,
                    external_cidr,
                })
                .await?;
            out(&peer_line(r.get_ref()));
        }
        Command::Release { server, peer } => {
            let r = client(&server)
                .await?
                .release(proto::PeerRef { cluster_id: peer })
                .await?;
            let r = r.get_ref();
            out(&format!(
                "released peer {}: {} and {}",
                r.cluster_id, r.pod_view, r.external_view
            ));
        }
        Command::SetPeerView {
            server,
            peer,
            pod_view,
            external_view,
        } => {
            let req = proto::SetPeerViewRequest {
                cluster_id: peer,
                our_pod_view: pod_view,
                our_external_view: external_view,
            };
            out(&peer_line(
                client(&server).await?.set_peer_view(req).await?.get_ref(),
            ));
        }
        Command::MapIp {
            server,
            peer,
            ip,
            direction,
        } => {
            let direction = match direction {
                Dir::RemoteToLocal => proto::Direction::RemoteToLocal,
                Dir::LocalToPeer => proto::Direction::LocalToPeer,
                Dir::Endpoint => proto::Direction::Endpoint,
            } as i32;
            let r = client(&server)
                .await?
                .map_ip(proto::MapIpRequest {
                    cluster_id: peer,
                    ip,
                    direction,
                })
                .await?;
            let r = r.get_ref();
            if r.external_ip.is_empty() {
                out(&r.ip);
            } else {
                out(&format!("{} (external {})", r.ip, r.external_ip));
            }
        }
        Command::List { server, output } => {
            let l = client(&server).await?.list(proto::Empty {}).await?;
            match output {
                Format::Table => out(&list_table(l.get_ref())),
                Format::Json => out(&serde_json::to_string_pretty(&list_json(l.get_ref()))?),
            }
        }
        Command::Reserved {
            server,
            action,
            cidr,
        } => {
            let mut c = client(&server).await?;
            let l = match action {
                Action::Add => c.add_reserved(proto::Subnet { cidr }).await?,
                Action::Remove => c.remove_reserved(proto::Subnet { cidr }).await?,
            };
            out(&format!("reserved: {}", l.get_ref().reserved.join(", ")));
        }
        Command::Pool {
            server,
            action,
            cidr,
        } => {
            let mut c = client(&server).await?;
            let l = match action {
                Action::Add => c.add_pool(proto::Subnet { cidr }).await?,
                Action::Remove => c.remove_pool(proto::Subnet { cidr }).await?,
            };
            out(&format!("pools: {}", l.get_ref().pools.join(", ")));
        }
    }
    Ok(())
}

/// Writes `text` and a newline to stdout; a reader that went away (`liqo-ipam list | head`) is not
/// an error.
fn out(text: &str) {
    use std::io::Write as _;
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{}", text.trim_end_matches('\n')).and_then(|()| o.flush());
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            match e.downcast_ref::<tonic::Status>() {
                Some(s) => eprintln!("error: {} ({:?})", s.message(), s.code()),
                None => eprintln!("error: {e:#}"),
            }
            ExitCode::FAILURE
        }
    }
}
