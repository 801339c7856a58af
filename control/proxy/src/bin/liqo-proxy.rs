//! `liqo-proxy`: the HTTP CONNECT proxy of in-band peering (see the library's doc).

use std::net::SocketAddr;

use anyhow::Context;
use clap::Parser;
use liqo_proxy::Target;

/// liqo-proxy: CONNECT only to the allowed targets (the API server), for in-band peering.
#[derive(Debug, Parser)]
#[command(name = "liqo-proxy", version, about)]
struct Cli {
    /// Where to listen: loopback unless given (the chart gives the pod's address, which peers
    /// reach through the tunnel). The proxy itself authenticates no one: it only opens tunnels to
    /// the allowed targets, and the API server behind them authenticates every caller (the
    /// peer's client certificate over the tunnelled TLS).
    #[arg(long, default_value = "127.0.0.1:8118")]
    listen: SocketAddr,
    /// An allowed CONNECT target, `host:port` (e.g. `kubernetes.default:443`), or
    /// `host:port=dialhost:dialport` to dial another address for that name. Repeatable; at
    /// least one.
    #[arg(long = "allow", required = true, value_name = "TARGET")]
    allow: Vec<Target>,
    /// How many clients are served at once (the next ones wait); at least 1.
    #[arg(long, default_value_t = liqo_proxy::DEFAULT_MAX_CONNECTIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_connections: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The daemons' logging: stderr, RUST_LOG (default info), colours only on a terminal.
    liqo_daemon::logging::init();
    let cli = Cli::parse();
    let listener = tokio::net::TcpListener::bind(cli.listen)
        .await
        .with_context(|| format!("listening on --listen {}", cli.listen))?;
    let targets: Vec<&str> = cli.allow.iter().map(|t| t.authority.as_str()).collect();
    tracing::info!(listen = %cli.listen, allow = ?targets, "serving CONNECT");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("waiting for SIGTERM")?;
    tokio::select! {
        () = liqo_proxy::serve(listener, cli.allow, cli.max_connections) => {}
        r = tokio::signal::ctrl_c() => r.context("waiting for a signal")?,
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
    }
    Ok(())
}
