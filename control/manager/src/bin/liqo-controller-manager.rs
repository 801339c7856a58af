//! `liqo-controller-manager`: the peering controllers (ForeignCluster, CRD replicator,
//! ResourceRequest, ResourceOffer) against the apiserver of `KUBECONFIG` / in-cluster, with
//! Prometheus metrics on `--metrics-listen`.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::{ArgAction, Parser};
use control::offer::Percent;
use futures::FutureExt;
use liqo_auth::url::Overrides;
use liqo_controller_manager::{
    context::{Context, Settings},
    launcher::NoopLauncher,
    metrics::{self, Metrics},
    run,
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
    /// How often every object is reconciled again (`30s`, `1m`; at least `1s`).
    #[arg(long, default_value = "30s", value_parser = liqo_controller_manager::duration::parse_period)]
    resync_period: Duration,
    /// Where Prometheus metrics are served (`GET /metrics`).
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let client = kube::Client::try_default()
        .await
        .context("kube config (KUBECONFIG or in-cluster)")?;
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
    };
    let metrics = Metrics::default();
    if let Some(addr) = args.metrics_listen {
        let listener = metrics::bind(addr)
            .await
            .with_context(|| format!("--metrics-listen {addr}"))?;
        let m = metrics.clone();
        tokio::spawn(async move {
            if let Err(e) = m.serve(listener).await {
                tracing::error!(error = %e, "metrics server stopped");
            }
        });
    }
    tracing::info!(cluster = %local.cluster_id, name = %local.cluster_name, "starting");
    let ctx = Arc::new(Context::new(
        client,
        settings,
        local,
        Arc::new(NoopLauncher),
        metrics,
    ));
    let shutdown = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    .boxed()
    .shared();
    run::run(ctx, shutdown).await;
    Ok(())
}
