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
//! One replica serves the webhooks (the chart runs one). With several, each keeper writes the
//! bundle of the Secret it last read: they agree, except during a rotation, when a replica
//! still holding the old material puts back the old CA alone until its own hourly check reads
//! the new Secret (the bundles are replaced, not merged).
//!
//! Their decisions are `control::offloading::webhook`'s; the serving loop is
//! `liqo_auth::https`'s. It never creates the configurations (the chart does), never writes a
//! NamespaceOffloading and never logs key material.

pub mod cabundle;
pub mod certs;
mod keeper;
pub mod server;

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use control::{
    api::{discovery::ClusterIdentity, offloading::NamespaceOffloading},
    consts::webhook,
};
use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// How long the start tries to set the caBundle before failing.
pub const CA_START_DEADLINE: Duration = Duration::from_secs(30);
/// How long a new CA's bundle must have been read back before its certificate is served.
pub const CA_SETTLE: Duration = Duration::from_secs(10);
/// The same failure of the keeper is logged at most this often.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(300);

/// How the webhooks run.
#[derive(Clone)]
pub struct Config {
    /// Where the HTTPS server listens.
    pub listen: SocketAddr,
    /// The Liqo namespace (the Secret; the Service `liqo-controller-manager` names).
    pub namespace: String,
    /// Names and addresses of the serving certificate besides the Service's DNS names.
    pub extra_sans: Vec<String>,
    /// How often the configurations' caBundle is checked.
    pub ca_check_period: Duration,
    /// How often the Secret's certificates are checked while serving (renewed near expiry).
    pub renew_check_period: Duration,
    /// The largest review body (bytes).
    pub max_body: usize,
    /// How long a review may take.
    pub review_timeout: Duration,
}

impl Config {
    /// The defaults: the CA checked every 5 s, the certificates every hour, bodies up to 4 MiB
    /// (a pod with large annotations), 8 s per review (within the configurations' 10 s).
    pub fn new(listen: SocketAddr, namespace: impl Into<String>) -> Self {
        Config {
            listen,
            namespace: namespace.into(),
            extra_sans: vec![],
            ca_check_period: Duration::from_secs(5),
            renew_check_period: Duration::from_secs(3600),
            max_body: 4 << 20,
            review_timeout: Duration::from_secs(8),
        }
    }

    /// The serving certificate's names: the Service's DNS names, then the extra ones, once.
    pub fn sans(&self) -> Vec<String> {
        let svc = format!("liqo-controller-manager.{}.svc", self.namespace);
        let mut sans = vec![svc.clone(), format!("{svc}.cluster.local")];
        for s in &self.extra_sans {
            if !sans.contains(s) {
                sans.push(s.clone());
            }
        }
        sans
    }
}

/// Why the webhooks cannot start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The certificates cannot be made.
    #[error("the webhook certificates")]
    Certs(#[source] certs::CertError),
    /// The Secret cannot be read or written.
    #[error("Secret {namespace}/{name}", name = webhook::CERTS_SECRET)]
    Secret {
        /// The Liqo namespace.
        namespace: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The caBundle could not be set within the start's deadline ([`CA_START_DEADLINE`]).
    #[error("the webhook CA was not set in the configurations within {within:?}")]
    CaBundle {
        /// The deadline.
        within: Duration,
        /// The last failure.
        #[source]
        source: cabundle::CaBundleError,
    },
    /// rustls refused the certificate.
    #[error("configuring TLS with the webhook certificate")]
    Tls(#[source] rustls::Error),
    /// The listen address cannot be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn material(secret: &Secret) -> Option<certs::Material> {
    let data = secret.data.as_ref()?;
    let get = |k: &str| {
        data.get(k)
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
    };
    Some(certs::Material {
        ca_cert: get(certs::CA_CERT)?,
        ca_key: get(certs::CA_KEY)?,
        cert: get(certs::TLS_CERT)?,
        key: get(certs::TLS_KEY)?,
    })
}

/// The Secret's data holding `m` (what [`material`] reads back).
fn secret_data(m: &certs::Material) -> std::collections::BTreeMap<String, ByteString> {
    [
        (certs::CA_CERT, &m.ca_cert),
        (certs::CA_KEY, &m.ca_key),
        (certs::TLS_CERT, &m.cert),
        (certs::TLS_KEY, &m.key),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.clone().into_bytes())))
    .collect()
}

/// Reads the Secret, reuses or replaces its certificates (creating it when absent) and returns
/// the material to serve with.
pub async fn ensure_certs(
    client: &Client,
    config: &Config,
) -> Result<certs::Material, WebhookError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &config.namespace);
    let secret_err = |source| WebhookError::Secret {
        namespace: config.namespace.clone(),
        source,
    };
    let existing = api
        .get_opt(webhook::CERTS_SECRET)
        .await
        .map_err(secret_err)?;
    let stored = existing.as_ref().and_then(material);
    let inspected = match stored.as_ref().map(certs::inspect) {
        Some(Ok(i)) => Some(i),
        Some(Err(e)) => {
            tracing::warn!(
                error = %crate::run::error_chain(&e),
                "the stored webhook certificates are unreadable: replacing them"
            );
            None
        }
        None => None,
    };
    let sans = config.sans();
    let plan = certs::plan(inspected.as_ref(), &sans, std::time::SystemTime::now());
    let m = certs::make(plan, stored.as_ref(), &sans, std::time::SystemTime::now())
        .map_err(WebhookError::Certs)?;
    if plan == certs::Plan::Reuse {
        tracing::info!(
            secret = webhook::CERTS_SECRET,
            "reusing the webhook certificates"
        );
        return Ok(m);
    }
    let data = secret_data(&m);
    let mut secret = Secret {
        metadata: ObjectMeta {
            name: Some(webhook::CERTS_SECRET.to_owned()),
            namespace: Some(config.namespace.clone()),
            ..Default::default()
        },
        data: Some(data),
        type_: Some("Opaque".to_owned()),
        ..Default::default()
    };
    match existing {
        // Update with its resourceVersion: a concurrent writer makes this fail (and the
        // process restart) rather than serve a certificate the Secret no longer holds.
        Some(old) => {
            secret.metadata.resource_version = old.metadata.resource_version;
            api.replace(webhook::CERTS_SECRET, &PostParams::default(), &secret)
                .await
                .map_err(secret_err)?;
        }
        None => {
            api.create(&PostParams::default(), &secret)
                .await
                .map_err(secret_err)?;
        }
    }
    tracing::info!(
        secret = webhook::CERTS_SECRET,
        ?plan,
        ?sans,
        "stored new webhook certificates"
    );
    Ok(m)
}

/// The serving chain (the certificate, then the CA) and key of `m`, for rustls.
fn tls_parts(
    m: &certs::Material,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), WebhookError> {
    let key = rcgen::KeyPair::from_pem(&m.key).map_err(|source| {
        WebhookError::Certs(certs::CertError::Key {
            what: "serving key",
            source,
        })
    })?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let der = |what: &'static str, pem: &str| {
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .map(|(_, p)| CertificateDer::from(p.contents))
            .map_err(|e| {
                WebhookError::Certs(certs::CertError::Parse {
                    what,
                    reason: e.to_string(),
                })
            })
    };
    let chain = vec![
        der("serving certificate", &m.cert)?,
        der("CA certificate", &m.ca_cert)?,
    ];
    Ok((chain, key))
}

/// The pod webhook's lookup against the apiserver.
fn lookup(client: Client) -> server::Lookup {
    Arc::new(move |namespace: String| {
        let client = client.clone();
        Box::pin(async move {
            let api: Api<NamespaceOffloading> = Api::namespaced(client, &namespace);
            api.get_opt(control::api::offloading::NAME)
                .await
                .map_err(|e| e.to_string())
        })
    })
}

/// Sets the caBundle, tried every second until `within` has passed.
async fn set_at_start(client: &Client, ca: &[u8], within: Duration) -> Result<(), WebhookError> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match cabundle::set(client, ca).await {
            Ok(_) => return Ok(()),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(WebhookError::CaBundle { within, source: e });
            }
            Err(e) => tracing::warn!(
                error = %crate::run::error_chain(&e),
                "caBundle not set yet: trying again every second"
            ),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Makes or reuses the certificates, binds, sets the caBundle, and returns the future serving
/// the webhooks and keeping the caBundle until `shutdown` completes (so a bad certificate or
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
    let router = server::router(server::Webhooks {
        local,
        lookup: lookup(client.clone()),
        metrics,
        max_body: config.max_body,
        timeout: config.review_timeout,
    });
    let limits = liqo_auth::https::Limits {
        handshake: Duration::from_secs(10),
        header: Duration::from_secs(10),
        request: config.review_timeout,
        max_connections: 256,
    };
    set_at_start(&client, m.ca_cert.as_bytes(), CA_START_DEADLINE).await?;
    let keeper = keeper::keep(client, config, cert, m);
    Ok(async move {
        let keeper = tokio::spawn(keeper);
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
    })
}

#[cfg(test)]
mod tests;
