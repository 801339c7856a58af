//! `liqo-gateway-operator`: renders the gateway's config file from every TunnelEndpoint (over
//! `--base-config`), reads the gateway's `/status` and writes each TunnelEndpoint's connection
//! back; keeps the gateway's key in Secrets and the Lease `liqo-gateway`. See
//! [`liqo_netops::gateway_op`].

use std::{path::PathBuf, sync::Arc};

use anyhow::Context as _;
use clap::Parser;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::{Api, api::DynamicObject, runtime::watcher};
use liqo_lease::Elector;
use liqo_netops::{
    cli,
    files::{self, StatusUrl},
    gateway_op::{self, Ctx, Dataplane, MANAGER, Settings, standby},
    kube::{keys, lease, tep_resource},
    metrics::Metrics,
    runner,
};

#[derive(Debug, Parser)]
#[command(name = "liqo-gateway-operator", version, about)]
struct Args {
    #[command(flatten)]
    common: cli::Common,
    /// The gateway's status (`http://<ip>:<port>/status`).
    #[arg(
        long,
        required_unless_present = "fake_dataplane",
        conflicts_with = "fake_dataplane"
    )]
    gateway_status_url: Option<StatusUrl>,
    /// Where the gateway's private key is written (0600); the config names it. Default: the
    /// base config's `privateKeyFile`, else the gateway's default.
    #[arg(long, conflicts_with = "fake_dataplane")]
    private_key_file: Option<PathBuf>,
    #[command(flatten)]
    ipam: cli::Ipam,
    /// Active/standby: elect on the Lease `liqo-gateway` with the other replicas (this node's
    /// name as identity). A standby's gateway runs the key without peers; the active one gives
    /// the Lease back as soon as its gateway stops answering, and the standby takes over.
    #[arg(long)]
    leader_elect: bool,
    /// With `--leader-elect`: this replica's pod (in `--namespace`), labelled
    /// `net.liqo.io/gateway-active=true` while it is the active one (the gateway Service selects
    /// that label) and unlabelled while it is a standby.
    #[arg(long, env = "POD_NAME", requires = "leader_elect")]
    pod_name: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The daemons' logging: stderr, RUST_LOG (default info), colours only on a terminal.
    liqo_daemon::logging::init();
    let Args {
        common: args,
        gateway_status_url,
        private_key_file,
        ipam,
        leader_elect,
        pod_name,
    } = Args::parse();
    // Checked before anything runs: a bad IPAM flag is named.
    let ipam = ipam.options()?;
    let text = std::fs::read_to_string(&args.base_config)
        .with_context(|| format!("--base-config {}", args.base_config.display()))?;
    let base = liqo_gateway_api::config::File::parse(&text)
        .with_context(|| format!("--base-config {}", args.base_config.display()))?;
    // Checked before anything runs: a bad base config is a bad flag.
    control::network::gateway::render(&base, None, None, &Default::default(), &Default::default())
        .with_context(|| format!("--base-config {}", args.base_config.display()))?;
    let dataplane = match (args.config, gateway_status_url) {
        // The key goes where the gateway will read it: the gateway must run the Secret's key.
        (Some(config), Some(status)) => Dataplane::Files {
            config,
            status,
            private_key_file: Some(private_key_file.unwrap_or_else(|| {
                PathBuf::from(
                    base.private_key_file
                        .as_deref()
                        .unwrap_or(liqo_gateway_api::config::defaults::PRIVATE_KEY_FILE),
                )
            })),
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
    // A key file the gateway already uses is kept when no Secret holds a key yet.
    let adopt = match &dataplane {
        Dataplane::Files {
            private_key_file: Some(path),
            ..
        } => std::fs::read_to_string(path)
            .ok()
            .and_then(|t| liqo_gateway_api::keys::PrivateKey::parse(t.trim()).ok()),
        _ => None,
    };
    let key = keys::ensure(&client, &args.namespace, adopt)
        .await
        .context("the gateway's key")?;
    if let Dataplane::Files {
        private_key_file: Some(path),
        ..
    } = &dataplane
    {
        let text = format!("{}\n", key.to_base64());
        if std::fs::read_to_string(path).ok().as_deref() != Some(text.as_str()) {
            files::write_atomic_mode(path, text.as_bytes(), 0o600).context("--private-key-file")?;
        }
    }
    let public_key = key.public();
    drop(key);
    // Announced by a reconcile once the gateway runs it (never before).
    let published = keys::published(&client, &args.namespace)
        .await
        .context("the gateway's public key")?;
    let metrics = Metrics::new("liqo_gateway_operator");
    liqo_daemon::server::spawn_metrics(args.metrics_listen, metrics.registry())
        .await
        .context("--metrics-listen")?;
    let replica = if leader_elect {
        let r = standby::Replica::new(
            client.clone(),
            &args.namespace,
            &args.node_name,
            pod_name,
            &base,
            &dataplane,
        )
        .context("the standby's gateway config")?;
        Some(Arc::new(r))
    } else {
        None
    };
    tracing::info!(node = %args.node_name, %public_key, fake = matches!(dataplane, Dataplane::Fake), "gateway operator starting");
    let settings = Settings {
        namespace: args.namespace.clone(),
        node_name: args.node_name.clone(),
        base,
        ipam,
        dataplane,
        release_grace: args.release_grace,
    };
    let ctx = Arc::new(Ctx::new(
        client.clone(),
        settings,
        public_key,
        published,
        metrics.clone(),
    ));
    // Active, then (elected replicas) back to standby and standing again whenever the Lease is
    // lost or given back: a slow API server costs a takeover, never a container restart and
    // its back-off.
    loop {
        let elector = match &replica {
            Some(r) => tokio::select! {
                e = r.elect(metrics.leading.clone()) => Some(e.context("standing for election")?),
                // A standby stops at once (no Lease, no peers of its own).
                _ = runner::signalled() => return Ok(()),
            },
            None => {
                let before = lease::take(&client, &args.namespace, &args.node_name, MANAGER)
                    .await
                    .context("the gateway Lease")?;
                metrics.leading.set(1);
                tracing::info!(previous = ?before, "took the gateway Lease");
                None
            }
        };
        tracing::info!(node = %args.node_name, "the active gateway operator");
        let lease = (
            client.clone(),
            args.namespace.clone(),
            args.node_name.clone(),
        );
        match serve(
            &client,
            &args.namespace,
            ctx.clone(),
            replica.clone(),
            elector,
            lease,
        )
        .await
        {
            Served::Stopped => return Ok(()),
            Served::SteppedDown(e) if replica.is_some() => {
                metrics.step_downs.inc();
                tracing::warn!(error = %format!("{e:#}"), "no longer the active gateway: standing again as a standby");
            }
            Served::SteppedDown(e) => return Err(e.context("the gateway Lease")),
        }
    }
}

/// How one term as the active operator ended.
enum Served {
    /// A signal: the process stops (the Lease given back).
    Stopped,
    /// The Lease lost or given back (its gateway gone), already stepped down: why.
    SteppedDown(anyhow::Error),
}

/// Reconciles as the active operator (holding the Lease with `elector`, or kept when taken)
/// until a signal or the Lease is lost.
async fn serve(
    client: &kube::Client,
    namespace: &str,
    ctx: Arc<Ctx>,
    replica: Option<Arc<standby::Replica>>,
    elector: Option<Elector>,
    lease: (kube::Client, String, String),
) -> Served {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // Sent when the operator stopped on its own (a signal): the Lease is given back.
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let signalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = signalled.clone();
    let shutdown = async move {
        tokio::select! {
            _ = runner::signalled() => flag.store(true, std::sync::atomic::Ordering::SeqCst),
            // Sent when the Lease was lost.
            _ = stop_rx => {}
        }
    }
    .boxed()
    .shared();
    // Why the Lease was lost, set before the stop is sent (so the outcome never depends on
    // whether the task has finished when the controller stops).
    let lost_why = Arc::new(std::sync::Mutex::new(None::<anyhow::Error>));
    let lost_slot = lost_why.clone();
    let in_task = replica.clone();
    let lease_task = tokio::spawn(async move {
        let Some(e) = hold(in_task, elector, lease, done_rx).await else {
            return;
        };
        tracing::error!(error = %format!("{e:#}"), "no longer the active gateway; stopping its reconciles");
        *lost_slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
        // The receiver is gone only when the operator stopped already.
        let _ = stop_tx.send(());
    });
    let teps = Api::<DynamicObject>::all_with(client.clone(), &tep_resource());
    let trigger = runner::events(
        teps,
        watcher::Config::default().labels(control::consts::net::TEP_CLUSTER_ID_LABEL),
        "TunnelEndpoints",
    );
    // The private key Secret: a rotation asked for, or the Secret deleted, acts at once.
    let key_secret = runner::events(
        Api::<Secret>::namespaced(client.clone(), namespace),
        watcher::Config::default().fields(&format!(
            "metadata.name={}",
            control::consts::net::PRIVATE_KEY_SECRET
        )),
        "the key Secret",
    );
    let trigger = futures::stream::select(trigger, key_secret).boxed();
    let node = ctx.settings.node_name.clone();
    let metrics = ctx.metrics.clone();
    runner::run(
        client.clone(),
        &node,
        trigger,
        gateway_op::reconcile,
        ctx,
        metrics,
        shutdown,
    )
    .await;
    // A reconcile under way when it stopped may have written peers after the step down.
    if let Some(r) = &replica
        && let Err(e) = r.standby_file()
    {
        tracing::warn!(error = %liqo_types::chain(&e), "writing the standby's gateway file");
    }
    // The receiver is gone when the task ended already (the Lease lost or given back).
    let _ = done_tx.send(());
    if tokio::time::timeout(std::time::Duration::from_secs(5), lease_task)
        .await
        .is_err()
    {
        tracing::warn!("giving the gateway Lease back took over 5 s: it expires on its own");
    }
    let lost = lost_why.lock().unwrap_or_else(|p| p.into_inner()).take();
    match lost {
        Some(e) if !signalled.load(std::sync::atomic::Ordering::SeqCst) => Served::SteppedDown(e),
        _ => Served::Stopped,
    }
}

/// Holds the Lease while the operator runs: renewed (elected `replica`) or kept (taken);
/// returns why this replica is no longer the active one (after stepping down), or `None` once
/// `done` says the operator stopped (an elected replica steps down then too).
async fn hold(
    replica: Option<Arc<standby::Replica>>,
    elector: Option<Elector>,
    (client, ns, node): (kube::Client, String, String),
    done: tokio::sync::oneshot::Receiver<()>,
) -> Option<anyhow::Error> {
    let (Some(replica), Some(mut elector)) = (replica, elector) else {
        return tokio::select! {
            e = lease::keep(client, ns, node, MANAGER.into()) => Some(e.into()),
            _ = done => None,
        };
    };
    let why = tokio::select! {
        why = replica.hold(&mut elector) => Some(why),
        _ = done => None,
    };
    let lost = matches!(why, Some(standby::SteppedDown::Lost(_)));
    replica.step_down(&mut elector, lost).await;
    why.map(anyhow::Error::new)
}
