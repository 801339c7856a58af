//! `liqo-route-operator`: renders this node's overlay config file from the Nodes, the gateway's
//! Lease and every TunnelEndpoint (over `--base-config`) and waits on the agent's `/status`.
//! See [`liqo_netops::route_op`].

use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{Api, api::DynamicObject, runtime::watcher};
use liqo_netops::{
    cli,
    files::StatusUrl,
    kube::{KubeInventory, tep_resource},
    metrics::Metrics,
    route_op::{self, Ctx, Dataplane, Settings},
    runner,
};

#[derive(Debug, Parser)]
#[command(name = "liqo-route-operator", version, about)]
struct Args {
    #[command(flatten)]
    common: cli::Common,
    /// The agent's status (`http://<ip>:<port>/status`).
    #[arg(
        long,
        required_unless_present = "fake_dataplane",
        conflicts_with = "fake_dataplane"
    )]
    overlay_status_url: Option<StatusUrl>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The daemons' logging: stderr, RUST_LOG (default info), colours only on a terminal.
    liqo_daemon::logging::init();
    let Args {
        common: args,
        overlay_status_url,
    } = Args::parse();
    let text = std::fs::read_to_string(&args.base_config)
        .with_context(|| format!("--base-config {}", args.base_config.display()))?;
    let base = liqo_overlay_api::config::File::parse(&text)
        .with_context(|| format!("--base-config {}", args.base_config.display()))?;
    if !base.nodes.is_empty() || !base.remote_cidrs.is_empty() {
        anyhow::bail!(
            "--base-config {}: nodes and remoteCIDRs come from the cluster; remove them",
            args.base_config.display()
        );
    }
    let dataplane = match (args.config, overlay_status_url) {
        (Some(config), Some(status)) => Dataplane::Files {
            config,
            status,
            private_key_file: None,
        },
        _ => Dataplane::Fake,
    };
    let client = kube::Client::try_default()
        .await
        .context("kube config (KUBECONFIG or in-cluster)")?;
    Api::<Node>::all(client.clone())
        .get(&args.node_name)
        .await
        .with_context(|| format!("--node-name {}: reading its Node", args.node_name))?;
    let inv = KubeInventory {
        client: client.clone(),
        namespace: args.namespace.clone(),
        pod_cidr: None,
        endpoint: None,
    };
    let cluster = inv.cluster_id().await.context("the cluster identity")?;
    tracing::info!(node = %args.node_name, %cluster, fake = matches!(dataplane, Dataplane::Fake), "route operator starting");
    let metrics = Metrics::new("liqo_route_operator");
    liqo_daemon::server::spawn_metrics(args.metrics_listen, metrics.registry())
        .await
        .context("--metrics-listen")?;
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        manager: route_op::manager(&args.node_name),
        settings: Settings {
            namespace: args.namespace.clone(),
            node_name: args.node_name.clone(),
            base,
            dataplane,
            release_grace: args.release_grace,
        },
        cluster,
        metrics: metrics.clone(),
        recorder: kube::runtime::events::Recorder::new(
            client.clone(),
            kube::runtime::events::Reporter {
                controller: route_op::PROGRAM.into(),
                instance: Some(args.node_name.clone()),
            },
        ),
    });
    let teps = Api::<DynamicObject>::all_with(client.clone(), &tep_resource());
    let lease = control::consts::net::GATEWAY_LEASE;
    let trigger = futures::stream::select_all([
        runner::events(
            teps,
            watcher::Config::default().labels(control::consts::net::TEP_CLUSTER_ID_LABEL),
            "TunnelEndpoints",
        ),
        runner::events(
            Api::<Node>::all(client.clone()),
            watcher::Config::default(),
            "Nodes",
        ),
        runner::events(
            Api::<Lease>::namespaced(client.clone(), &args.namespace),
            watcher::Config::default().fields(&format!("metadata.name={lease}")),
            "the gateway Lease",
        ),
    ])
    .boxed();
    let shutdown = runner::signalled().boxed().shared();
    runner::run(
        client,
        &args.node_name,
        trigger,
        route_op::reconcile,
        ctx,
        metrics,
        shutdown,
    )
    .await;
    Ok(())
}
