//! `liqo-ipam`: the IPAM service (`serve`) and its command-line client.

mod output;
mod serve;

use std::{path::PathBuf, process::ExitCode};

use anyhow::Result;
use clap::{Args, Parser, Subcommand, ValueEnum};
use ipam::service::{
    client::{self, ClientOptions},
    proto,
};
use liqo_daemon::{exit::Threads, show::Format};
use output::{list_json, list_table, out, peer_line};

/// Address management for peered clusters: remapping of overlapping CIDRs and IP translation.
#[derive(Parser)]
#[command(name = "liqo-ipam", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gRPC service.
    Serve(Box<serve::Serve>),
    /// Decide where a peer's pod and external CIDRs appear locally.
    Remap {
        #[command(flatten)]
        server: Conn,
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
        server: Conn,
        /// The peer's cluster ID.
        #[arg(long)]
        peer: String,
    },
    /// Record how a peer sees our pod and external CIDRs.
    SetPeerView {
        #[command(flatten)]
        server: Conn,
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
        server: Conn,
        /// The peer's cluster ID.
        #[arg(long)]
        peer: String,
        /// The IP.
        #[arg(long)]
        ip: String,
        /// Which way.
        #[arg(long, value_enum, default_value_t = Dir::RemoteToLocal)]
        direction: Dir,
        /// Who holds an endpoint mapping (`--direction endpoint`); empty: the unnamed holder.
        #[arg(long, default_value = "")]
        holder: String,
    },
    /// Show configuration, peers, endpoints and pool usage.
    List {
        #[command(flatten)]
        server: Conn,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Add or remove a reserved subnet on the running service.
    Reserved {
        #[command(flatten)]
        server: Conn,
        /// `add` or `remove`.
        action: Action,
        /// The subnet.
        cidr: String,
    },
    /// Add or remove a pool on the running service.
    Pool {
        #[command(flatten)]
        server: Conn,
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
enum Action {
    Add,
    Remove,
}

/// How to reach the service.
#[derive(Args)]
struct Conn {
    /// Address of the service (https:// for a TLS server).
    #[arg(long, env = "LIQO_IPAM_SERVER", default_value = client::DEFAULT_SERVER)]
    server: String,
    /// CA certificate that signed the server's (PEM; https only; else the system's roots).
    #[arg(long, env = "LIQO_IPAM_CA_FILE")]
    ca_file: Option<PathBuf>,
    /// File holding the bearer token sent with every call.
    #[arg(long, env = "LIQO_IPAM_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// Client certificate for mutual TLS (PEM).
    #[arg(long, env = "LIQO_IPAM_CLIENT_CERT_FILE")]
    client_cert_file: Option<PathBuf>,
    /// Private key of --client-cert-file (PEM).
    #[arg(long, env = "LIQO_IPAM_CLIENT_KEY_FILE")]
    client_key_file: Option<PathBuf>,
}

async fn client(c: Conn) -> Result<client::Client> {
    let options = ClientOptions {
        server: c.server,
        ca_file: c.ca_file,
        token_file: c.token_file,
        client_cert_file: c.client_cert_file,
        client_key_file: c.client_key_file,
    };
    Ok(client::connect(&options).await?)
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve(s) => serve::serve(*s).await?,
        Command::Remap {
            server,
            peer,
            pod_cidr,
            external_cidr,
        } => {
            let r = client(server)
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
            let r = client(server)
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
                client(server).await?.set_peer_view(req).await?.get_ref(),
            ));
        }
        Command::MapIp {
            server,
            peer,
            ip,
            direction,
            holder,
        } => {
            let direction = match direction {
                Dir::RemoteToLocal => proto::Direction::RemoteToLocal,
                Dir::LocalToPeer => proto::Direction::LocalToPeer,
                Dir::Endpoint => proto::Direction::Endpoint,
            } as i32;
            let r = client(server)
                .await?
                .map_ip(proto::MapIpRequest {
                    cluster_id: peer,
                    ip,
                    direction,
                    holder,
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
            let l = client(server).await?.list(proto::Empty {}).await?;
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
            let mut c = client(server).await?;
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
            let mut c = client(server).await?;
            let l = match action {
                Action::Add => c.add_pool(proto::Subnet { cidr }).await?,
                Action::Remove => c.remove_pool(proto::Subnet { cidr }).await?,
            };
            out(&format!("pools: {}", l.get_ref().pools.join(", ")));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    liqo_daemon::exit::block_on(Threads::Two, async {
        // A refused call reads as the service's message and its code.
        run(cli)
            .await
            .map_err(|e| match e.downcast::<tonic::Status>() {
                // The client's own deadline, not the service's answer.
                Ok(s) if ipam::service::client::timed_out(&s) => anyhow::anyhow!(
                    "the service did not answer within {} s; a change asked for may still be \
                     made (`liqo-ipam list` shows the state)",
                    ipam::service::client::CALL_TIMEOUT.as_secs()
                ),
                Ok(s) => anyhow::anyhow!("{} ({:?})", s.message(), s.code()),
                Err(e) => e,
            })
    })
}
