//! How an operator runs: a kube-runtime `Controller` whose one object is the operator's own
//! Node (`--node-name`: the data plane it renders is that node's), reconciled again on every
//! event of what it renders from (TunnelEndpoints, Nodes, the Lease), debounced; a failed
//! reconcile is counted and requeued.

use std::{future::Future, path::PathBuf, sync::Arc, time::Duration};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client, Resource,
    runtime::{
        Controller, WatchStreamExt,
        controller::{Action, Config as ControllerConfig},
        watcher,
    },
};
use serde::de::DeserializeOwned;

use crate::{error::OpError, files::StatusUrl, metrics::Metrics};

/// Where an operator's data plane is.
#[derive(Debug, Clone)]
pub enum Dataplane {
    /// None (`--fake-dataplane`): no file is written; the gateway operator reports a rendered
    /// peer Connected, and a deleted TunnelEndpoint is released once rendered without it.
    Fake,
    /// The daemon's files.
    Files {
        /// Its config file (written).
        config: PathBuf,
        /// Its `/status`.
        status: StatusUrl,
        /// The gateway's private key file (written, 0600), named in its config; `None` for an
        /// overlay agent.
        private_key_file: Option<PathBuf>,
    },
}

/// How soon a failed reconcile is retried.
pub const RETRY: Duration = Duration::from_secs(2);

/// One `()` per event of the objects (`what`) `api` lists with `config`; a failed watch is
/// logged (and retried with backoff).
pub fn events<K>(api: Api<K>, config: watcher::Config, what: &'static str) -> BoxStream<'static, ()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(api, config)
        .default_backoff()
        .map(move |r| {
            if let Err(e) = r {
                tracing::warn!(what, error = %liqo_types::chain(&e), "watching");
            }
        })
        .boxed()
}

/// Runs `reconcile` on node `node` until `shutdown`, and on every `trigger`.
pub async fn run<C, F, Fut>(
    client: Client,
    node: &str,
    trigger: BoxStream<'static, ()>,
    reconcile: F,
    ctx: Arc<C>,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send + Sync + Clone + 'static,
) where
    C: Send + Sync + 'static,
    F: FnMut(Arc<Node>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, OpError>> + Send + 'static,
{
    let api = Api::<Node>::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let policy = move |_: Arc<Node>, e: &OpError, _: Arc<C>| {
        metrics.errors.inc();
        tracing::warn!(error = %liqo_types::chain(e), "reconcile failed; retrying");
        Action::requeue(RETRY)
    };
    Controller::new(api, config)
        .with_config(ControllerConfig::default().debounce(Duration::from_millis(200)))
        .reconcile_all_on(trigger)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, policy, ctx)
        .for_each(|r| {
            if let Err(e) = r {
                tracing::debug!(error = ?e, "controller event");
            }
            futures::future::ready(())
        })
        .await;
}

/// The first IPv4 InternalIP of a node.
pub fn internal_ip(n: &Node) -> Option<String> {
    n.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .find(|a| a.address.parse::<std::net::Ipv4Addr>().is_ok())
        .map(|a| a.address.clone())
}

/// Resolves when SIGTERM or SIGINT arrives.
pub async fn signalled() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "no SIGTERM handler; only SIGINT stops this process");
            return std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
