//! The admission webhooks served by the controller-manager (control-plane.md §4): the pod
//! mutation (`pod.mutate.liqo.io`) and the NamespaceOffloading validation
//! (`nsoff.validate.liqo.io`), over HTTPS with a CA and serving certificate it makes itself and
//! keeps in the Secret `liqo-webhook-certs` ([`certs`]: reused across restarts while valid for
//! the names, checked hourly and renewed near expiry without a restart), whose CA it patches
//! into the `caBundle` of every webhook of the two configurations named `liqo-webhook` (and
//! again when something resets it, [`cabundle`]). The start fails when the caBundle cannot be
//! set within [`CA_START_DEADLINE`].
//!
//! After a CA rotation the bundle becomes new CA + old CA, and the certificate signed by the new
//! CA is served only once that bundle has been read back from both configurations and
//! [`CA_SETTLE`] more has passed: the apiserver learns configurations through an informer, so a
//! bundle just written may not yet be the one it verifies with.
//!
//! Every replica serves the webhooks (with `--leader-elect` the chart runs two). Replicas
//! starting together race to create the Secret: the loser reads it again and serves the
//! winner's certificates. Each keeper writes the bundle of the Secret it last read: they agree,
//! except during a rotation, when a replica still holding the old material puts back the old CA
//! alone until its own hourly check reads the new Secret (the bundles are replaced, not merged).
//!
//! Their decisions are `control::offloading::webhook`'s; the serving loop is
//! `liqo_auth::https`'s. It never creates the configurations (the chart does), never writes a
//! NamespaceOffloading and never logs key material.

pub mod cabundle;
pub mod certs;
mod keeper;
mod offloadings;
pub mod server;
mod setup;

use std::{future::Future, time::Duration};

use control::api::discovery::ClusterIdentity;
use kube::Client;
use tokio::net::TcpListener;

use crate::metrics::Metrics;
pub use setup::{CA_SETTLE, CA_START_DEADLINE, Config, WebhookError, ensure_certs};
use setup::{set_at_start, tls_parts};

/// How long a connection of the API server's serves reviews: past it, the next answer says
/// `Connection: close`, so a replaced serving certificate reaches the API server within it.
const WEBHOOK_KEEP_ALIVE: Duration = Duration::from_secs(60);

/// Makes or reuses the certificates, binds, sets the caBundle, and returns the future serving
/// the webhooks, keeping the caBundle and watching the NamespaceOffloadings for the pod
/// webhook (`offloadings`) until `shutdown` completes (so a bad certificate or
/// address, or a caBundle not set within [`CA_START_DEADLINE`], fails the start).
pub async fn start(
    client: Client,
    config: Config,
    local: ClusterIdentity,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<impl Future<Output = ()> + Send + 'static, WebhookError> {
    let m = ensure_certs(&client, &config).await?;
    let (chain, key) = tls_parts(&m)?;
    let cert = liqo_auth::https::Replaceable::new(chain, key).map_err(WebhookError::Tls)?;
    let tls = liqo_auth::https::replaceable_acceptor(cert.clone()).map_err(WebhookError::Tls)?;
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| WebhookError::Bind {
            addr: config.listen,
            source,
        })?;
    let (lookup, offloadings) = offloadings::watched(client.clone());
    let router = server::router(server::Webhooks {
        local,
        lookup,
        metrics,
        max_body: config.max_body,
        timeout: config.review_timeout,
    });
    let limits = liqo_auth::https::Limits {
        handshake: Duration::from_secs(10),
        header: Duration::from_secs(10),
        request: config.review_timeout,
        max_connections: 256,
        // One review per pod created in an offloaded namespace: no handshake for each.
        keep_alive: Some(WEBHOOK_KEEP_ALIVE),
    };
    set_at_start(&client, m.ca_cert.as_bytes(), CA_START_DEADLINE).await?;
    let keeper = keeper::keep(client, config, cert, m);
    Ok(async move {
        let keeper = tokio::spawn(keeper);
        let offloadings = tokio::spawn(offloadings);
        liqo_auth::https::serve(
            "the webhooks",
            listener,
            Some(tls),
            router,
            limits,
            // Not exported: the webhooks' own figures are the admissions they answer.
            liqo_auth::https::Connections::default(),
            shutdown,
        )
        .await;
        keeper.abort();
        offloadings.abort();
    })
}

#[cfg(test)]
mod tests;
