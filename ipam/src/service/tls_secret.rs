//! `--tls-secret`: the serving certificate, its CA and the bearer token in a Secret of the API
//! server that liqo-ipam makes and keeps itself, as the controller-manager keeps its webhook
//! certificates, so that no install tool generates them (a render without cluster access, a
//! GitOps tool, would make new ones each time).
//!
//! At start the Secret (`namespace/name`) is read ([`ensure`]). When it holds a CA, a serving
//! certificate signed by it for every name of [`TlsSecret::names`] and not within
//! [`PROFILE`]'s 30 days of its end (nor of its CA's), and a token, they are served as they are,
//! from memory (no key is written to disk). Otherwise what is missing or stale is made anew
//! ([`decide`]: a serving certificate reissued by the stored CA when only it is stale or names a
//! name too few, a new CA when the CA is missing, unreadable or near its end; a new token when
//! none usable is stored, else the stored one is kept) and written: created when absent,
//! replaced with its resourceVersion as the precondition. A 409 means another writer won: the
//! Secret is read again and what it holds served, at most [`TRIES`] times in all. Each request
//! is bounded by [`REQUEST_TIMEOUT`].
//!
//! Nothing renews the certificate while running: both certificates are valid 10 years, and a
//! restart within 30 days of their end renews them. Rotation: delete the Secret and restart
//! liqo-ipam, then its clients.
//!
//! The Secret (`Opaque`, labelled `app.kubernetes.io/managed-by: liqo-ipam` when made here)
//! holds `ca.crt`, `ca.key`, `tls.crt`, `tls.key` and `token`; the clients mount `ca.crt` and
//! `token` only. The role it needs, in that namespace: secrets `create`, and `get`, `update` of
//! that name (no list, no watch). No key and no token is ever logged.

use std::{collections::BTreeMap, fmt, future::Future, time::Duration, time::SystemTime};

use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use liqo_types::certs::{self, CertError, Material, Plan, Profile};
use tonic::transport::Identity;

use super::auth::Token;
use crate::store::configmap::{MANAGED_BY, MANAGED_BY_LABEL};

/// The Secret's key holding the bearer token.
pub const TOKEN_KEY: &str = "token";
/// The Service's name, the first of the certificate's names.
pub const SERVICE: &str = "liqo-ipam";
/// How many times the Secret is read (and written) before a conflict is an error.
pub const TRIES: u32 = 3;
/// How long one request to the API server may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The random bytes of a new token (written as 64 hex digits).
const TOKEN_BYTES: usize = 32;
/// A stored token shorter than this is replaced.
pub const MIN_TOKEN_LEN: usize = 32;

/// liqo-ipam's certificates: a CA and a serving certificate valid 10 years each (as the chart's
/// were), renewed by a start within 30 days of their end.
pub const PROFILE: Profile = Profile {
    name: SERVICE,
    ca_validity: certs::YEAR.saturating_mul(10),
    cert_validity: certs::YEAR.saturating_mul(10),
    cert_renew_before: certs::DAY.saturating_mul(30),
    ca_renew_before: certs::DAY.saturating_mul(30),
};

/// The Secret to keep, and the names its certificate must be valid for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSecret {
    /// Its namespace (`--namespace`).
    pub namespace: String,
    /// Its name (`--tls-secret`).
    pub name: String,
    /// Names besides the Service's (`--tls-names`: DNS names or IP addresses).
    pub extra_names: Vec<String>,
}

impl fmt::Display for TlsSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl TlsSecret {
    /// The certificate's names: `liqo-ipam`, `liqo-ipam.<ns>`, `liqo-ipam.<ns>.svc`,
    /// `liqo-ipam.<ns>.svc.cluster.local`, then the extra ones, each once.
    pub fn names(&self) -> Vec<String> {
        let ns = format!("{SERVICE}.{}", self.namespace);
        let mut names = vec![
            SERVICE.to_owned(),
            ns.clone(),
            format!("{ns}.svc"),
            format!("{ns}.svc.cluster.local"),
        ];
        for n in &self.extra_names {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
        names
    }
}

/// Checks a Secret name (an RFC 1123 subdomain, as the API server does).
pub fn check_secret_name(name: &str) -> Result<(), String> {
    crate::store::configmap::check_subdomain(name)
        .map_err(|p| format!("not a valid Secret name: {p}"))
}

/// What is served: the serving certificate and its key (PEM), and the token. Its `Debug` shows
/// neither the key nor the token.
#[derive(Clone)]
pub struct Served {
    /// The serving certificate.
    pub cert: String,
    key: String,
    /// The bearer token callers must present.
    pub token: Token,
}

impl fmt::Debug for Served {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Served")
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

impl Served {
    /// The TLS identity (the serving certificate and its key).
    pub fn identity(&self) -> Identity {
        Identity::from_pem(&self.cert, &self.key)
    }
}

/// Why the Secret could not give what to serve. Each names `--tls-secret` and the Secret.
#[derive(Debug, thiserror::Error)]
pub enum TlsSecretError {
    /// No client: neither the in-cluster config nor `KUBECONFIG` gave one.
    #[error(
        "--tls-secret {secret}: making the Kubernetes client (in-cluster config or KUBECONFIG)"
    )]
    Client {
        /// The Secret, `namespace/name`.
        secret: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The API server refused the request (a 409 after [`TRIES`] tries), or could not be
    /// reached.
    #[error("--tls-secret: {op} Secret {secret}")]
    Api {
        /// `reading`, `creating` or `replacing`.
        op: &'static str,
        /// The Secret, `namespace/name`.
        secret: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// No answer in time.
    #[error("--tls-secret: {op} Secret {secret}: no answer within {secs}s")]
    Timeout {
        /// `reading`, `creating` or `replacing`.
        op: &'static str,
        /// The Secret, `namespace/name`.
        secret: String,
        /// How long it waited.
        secs: u64,
    },
    /// The certificates could not be made.
    #[error("--tls-secret: making the certificates of Secret {secret}")]
    Certs {
        /// The Secret, `namespace/name`.
        secret: String,
        /// The cause.
        #[source]
        source: CertError,
    },
    /// The kernel's random source failed.
    #[error("--tls-secret: making the token of Secret {secret}: {reason}")]
    Random {
        /// The Secret, `namespace/name`.
        secret: String,
        /// The cause.
        reason: String,
    },
}

/// What to do with a Secret's data ([`decide`]): serve it, or write what replaces it first.
pub struct Decision {
    /// The certificates to serve (and store).
    pub material: Material,
    /// What was decided for them.
    pub plan: Plan,
    /// The token's text as stored (kept as it was, or new).
    token_text: String,
    /// Whether the token is new.
    pub new_token: bool,
    /// Why the stored certificates could not be read, if they could not (they are replaced).
    pub unreadable: Option<String>,
}

impl Decision {
    /// Whether the Secret must be written before serving.
    pub fn writes(&self) -> bool {
        self.plan != Plan::Reuse || self.new_token
    }

    /// The Secret's data holding the decision: the certificates' keys and the token.
    pub fn data(&self) -> BTreeMap<String, ByteString> {
        self.material
            .data()
            .into_iter()
            .chain([(TOKEN_KEY, self.token_text.as_str())])
            .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect()
    }

    /// What is served.
    pub fn served(&self) -> Served {
        Served {
            cert: self.material.cert.clone(),
            key: self.material.key.clone(),
            token: usable_token(self.token_text.as_bytes())
                .expect("a decided token is usable (checked or made so)"),
        }
    }
}

/// A stored token, if usable: at least [`MIN_TOKEN_LEN`] visible ASCII characters (surrounding
/// whitespace is not part of it).
fn usable_token(bytes: &[u8]) -> Option<Token> {
    Token::from_bytes(bytes).filter(|_| bytes.trim_ascii().len() >= MIN_TOKEN_LEN)
}

/// A new token: [`TOKEN_BYTES`] bytes of the kernel's random source, in hex.
pub fn new_token() -> Result<String, getrandom::Error> {
    let mut b = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Decides what a Secret's `data` (`None`: no Secret, or no data) gives for `names` at `now`:
/// the stored certificates under [`PROFILE`]'s plan (made anew where stale, unreadable or
/// inconsistent) and the stored token when usable, else `token()`'s.
pub fn decide(
    data: Option<&BTreeMap<String, ByteString>>,
    names: &[String],
    now: SystemTime,
    token: impl FnOnce() -> Result<String, getrandom::Error>,
) -> Result<Decision, DecideError> {
    let stored = data.and_then(|d| Material::from_data(|k| d.get(k).map(|b| b.0.as_slice())));
    let (inspected, unreadable) = match stored.as_ref().map(certs::inspect) {
        Some(Ok(i)) => (Some(i), None),
        Some(Err(e)) => (None, Some(liqo_types::chain(&e))),
        None => (None, None),
    };
    let plan = PROFILE.plan(inspected.as_ref(), names, now);
    let material = PROFILE
        .make(plan, stored.as_ref(), names, now)
        .map_err(DecideError::Certs)?;
    let kept = data
        .and_then(|d| d.get(TOKEN_KEY))
        .filter(|b| usable_token(&b.0).is_some())
        .and_then(|b| String::from_utf8(b.0.clone()).ok());
    let (token_text, new_token) = match kept {
        Some(t) => (t, false),
        None => (
            token().map_err(|e| DecideError::Random(e.to_string()))?,
            true,
        ),
    };
    Ok(Decision {
        material,
        plan,
        token_text,
        new_token,
        unreadable,
    })
}

/// Why [`decide`] failed.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// The certificates could not be made.
    #[error(transparent)]
    Certs(CertError),
    /// No random bytes for the token.
    #[error("{0}")]
    Random(String),
}

/// Reads the Secret with the client of `Client::try_default` (the in-cluster config, or
/// `KUBECONFIG`), and returns what to serve; see the module doc.
pub async fn ensure_default(s: &TlsSecret) -> Result<Served, TlsSecretError> {
    let client = Client::try_default()
        .await
        .map_err(|source| TlsSecretError::Client {
            secret: s.to_string(),
            source,
        })?;
    ensure(client, s).await
}

/// Reads the Secret, makes or reuses its certificates and token (creating or replacing it when
/// needed) and returns what to serve. A conflict (another writer won) reads it again, at most
/// [`TRIES`] times in all.
pub async fn ensure(client: Client, s: &TlsSecret) -> Result<Served, TlsSecretError> {
    let api: Api<Secret> = Api::namespaced(client, &s.namespace);
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt(&api, s).await {
            Err(TlsSecretError::Api {
                source: kube::Error::Api(e),
                ..
            }) if e.code == 409 && tries < TRIES => {
                tracing::info!(secret = %s, "another writer wrote the Secret first: reading it again");
            }
            done => return done,
        }
    }
}

/// `f` within [`REQUEST_TIMEOUT`], its error naming `op` and the Secret.
async fn call<T>(
    s: &TlsSecret,
    op: &'static str,
    f: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, TlsSecretError> {
    match tokio::time::timeout(REQUEST_TIMEOUT, f).await {
        Ok(r) => r.map_err(|source| TlsSecretError::Api {
            op,
            secret: s.to_string(),
            source,
        }),
        Err(_) => Err(TlsSecretError::Timeout {
            op,
            secret: s.to_string(),
            secs: REQUEST_TIMEOUT.as_secs(),
        }),
    }
}

/// One read and, when needed, one write of the Secret.
async fn attempt(api: &Api<Secret>, s: &TlsSecret) -> Result<Served, TlsSecretError> {
    let existing = call(s, "reading", api.get_opt(&s.name)).await?;
    let names = s.names();
    let d = decide(
        existing.as_ref().and_then(|x| x.data.as_ref()),
        &names,
        SystemTime::now(),
        new_token,
    )
    .map_err(|e| match e {
        DecideError::Certs(source) => TlsSecretError::Certs {
            secret: s.to_string(),
            source,
        },
        DecideError::Random(reason) => TlsSecretError::Random {
            secret: s.to_string(),
            reason,
        },
    })?;
    if let Some(why) = &d.unreadable {
        tracing::warn!(secret = %s, error = %why, "the stored certificates are unreadable: replacing them");
    }
    if !d.writes() {
        tracing::info!(secret = %s, "serving the certificate and token of the Secret");
        return Ok(d.served());
    }
    let (plan, new_token) = (d.plan, d.new_token);
    match existing {
        // Replaced with its resourceVersion: a writer that changed it meanwhile makes this a
        // 409, and what it wrote is read again rather than overwritten.
        Some(mut old) => {
            old.data = Some(d.data());
            old.string_data = None;
            call(
                s,
                "replacing",
                api.replace(&s.name, &PostParams::default(), &old),
            )
            .await?;
        }
        None => {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(s.name.clone()),
                    namespace: Some(s.namespace.clone()),
                    labels: Some(BTreeMap::from([(
                        MANAGED_BY_LABEL.to_owned(),
                        MANAGED_BY.to_owned(),
                    )])),
                    ..Default::default()
                },
                data: Some(d.data()),
                type_: Some("Opaque".to_owned()),
                ..Default::default()
            };
            call(s, "creating", api.create(&PostParams::default(), &secret)).await?;
        }
    }
    tracing::info!(secret = %s, ?plan, new_token, ?names, "stored the certificate and token in the Secret");
    Ok(d.served())
}

#[cfg(test)]
mod tests;
