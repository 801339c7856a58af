//! The webhooks' settings and errors, and their certificate Secret: made or reused, turned
//! into TLS parts, and the caBundle set at start; what the server and the keeper both read.

use std::{net::SocketAddr, time::Duration};

use control::consts::webhook;
use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::{cabundle, certs};

/// How long the start tries to set the caBundle before failing.
pub const CA_START_DEADLINE: Duration = Duration::from_secs(30);
/// How long a new CA's bundle must have been read back before its certificate is served.
pub const CA_SETTLE: Duration = Duration::from_secs(10);
/// The same failure of the keeper is logged at most this often.
pub(super) const LOG_EVERY: Duration = Duration::from_secs(300);

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

pub(super) fn material(secret: &Secret) -> Option<certs::Material> {
    let data = secret.data.as_ref()?;
    certs::Material::from_data(|k| data.get(k).map(|b| b.0.as_slice()))
}

/// The Secret's data holding `m` (what [`material`] reads back).
pub(super) fn secret_data(m: &certs::Material) -> std::collections::BTreeMap<String, ByteString> {
    m.data()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect()
}

/// Reads the Secret, reuses or replaces its certificates (creating it when absent) and returns
/// the material to serve with. Replicas starting together race to write it: the loser (a
/// conflict) reads it again and serves what the winner wrote.
pub async fn ensure_certs(
    client: &Client,
    config: &Config,
) -> Result<certs::Material, WebhookError> {
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt(client, config).await {
            Err(WebhookError::Secret {
                source: kube::Error::Api(s),
                ..
            }) if s.code == 409 && tries < 3 => {
                tracing::info!(
                    secret = webhook::CERTS_SECRET,
                    "another replica wrote the webhook certificates first: reading them again"
                );
            }
            done => return done,
        }
    }
}

/// One read and, when needed, one write of the Secret.
async fn attempt(client: &Client, config: &Config) -> Result<certs::Material, WebhookError> {
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
                error = %liqo_types::chain(&e),
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
pub(super) fn tls_parts(
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

/// Sets the caBundle, tried every second until `within` has passed.
pub(super) async fn set_at_start(
    client: &Client,
    ca: &[u8],
    within: Duration,
) -> Result<(), WebhookError> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match cabundle::set(client, ca).await {
            Ok(_) => return Ok(()),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(WebhookError::CaBundle { within, source: e });
            }
            Err(e) => tracing::warn!(
                error = %liqo_types::chain(&e),
                "caBundle not set yet: trying again every second"
            ),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
