//! `liqo-demo`: the lab's demo application. Answers `GET /` with the pod, namespace, node and
//! cluster that served it and the client address it saw, `GET /call?url=…` by calling another
//! service and answering both, `GET /healthz` with `ok`; with a data directory, `POST
//! /append?entry=…` and `GET /log` (a database-like demo on a persistent volume); serves until
//! SIGINT or SIGTERM (it runs as PID 1 of its container). This file owns the flags, the logs and
//! the signals; the answers are [`logic`]'s, the network [`server`]'s and [`client`]'s, the
//! files [`store`]'s.

mod client;
mod error;
mod logic;
mod server;
mod store;

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};

use crate::{error::Error, logic::reply::Identity};

/// The lab's demo application: answers which pod, namespace, node and cluster served a request,
/// and calls other services to show calls crossing clusters. The identity comes from the
/// downward API's environment variables (or the flags).
#[derive(Debug, Parser)]
#[command(name = "liqo-demo", version)]
struct Args {
    /// The address to serve on (loopback unless asked: the image asks for 0.0.0.0:8080).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// This pod's name (downward API: fieldRef metadata.name).
    #[arg(long, env = "POD_NAME", default_value = "unknown")]
    pod_name: String,
    /// This pod's namespace (downward API: fieldRef metadata.namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "unknown")]
    pod_namespace: String,
    /// The node running this pod (downward API: fieldRef spec.nodeName; on an offloaded pod,
    /// the node of the cluster running it).
    #[arg(long, env = "NODE_NAME", default_value = "unknown")]
    node_name: String,
    /// The cluster's name (no downward API field: set by the manifest, e.g. per cluster).
    #[arg(long, env = "CLUSTER_NAME", default_value = "unknown")]
    cluster_name: String,
    /// A directory (e.g. a persistent volume's mount) for POST /append?entry=… and GET /log,
    /// which keep their lines in its file `log`; without it, those paths answer 404.
    #[arg(long, env = "DEMO_DATA_DIR")]
    data_dir: Option<PathBuf>,
}

/// Completes on SIGINT or SIGTERM; when listening for them fails, at once (never a server that
/// cannot be stopped).
async fn stop_signal() {
    let (mut interrupt, mut terminate) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "cannot listen for SIGINT and SIGTERM; stopping");
            return;
        }
    };
    tokio::select! {
        _ = interrupt.recv() => tracing::info!("SIGINT: stopping"),
        _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Plain text in a container's log (no terminal), colours on one.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = Args::parse();
    let identity = Identity {
        pod: args.pod_name,
        namespace: args.pod_namespace,
        node: args.node_name,
        cluster: args.cluster_name,
    };
    let store = match args.data_dir.as_deref().map(store::Store::open).transpose() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(source) => {
            let e = Error::Listen {
                addr: args.listen,
                source,
            };
            tracing::error!("{e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let addr = listener.local_addr().unwrap_or(args.listen);
    tracing::info!(
        %addr,
        pod = %identity.pod,
        namespace = %identity.namespace,
        node = %identity.node,
        cluster = %identity.cluster,
        log = store.as_ref().map(|s| s.path().display().to_string()),
        "serving"
    );
    server::serve(
        listener,
        Arc::new(server::State::new(identity, store)),
        stop_signal(),
    )
    .await;
    std::process::ExitCode::SUCCESS
}
