//! The ForeignCluster controller's authentication I/O (§1.2 steps 3 d and e): our identity at
//! the peer, asked for and checked.
//!
//! - Before any token is sent, the auth service must answer `GET /ids` with the cluster ID the
//!   ForeignCluster names ([`control::identity::check::auth_service`]); otherwise nothing is
//!   sent and `AuthenticationStatus` reads `Error/ClusterIDMismatch`, naming both IDs.
//! - The request carries a proof of possession of the identity's key
//!   ([`crate::identity::prove`]), so a provider whose first answer was lost answers again.
//! - A failed request (refused, unreachable, for another cluster) is asked again after a
//!   doubling back-off ([`decide::auth_retry_delay`]) whose next attempt the condition's
//!   message states with the peer's reason; a new ForeignCluster, URL or token is tried at
//!   once.
//! - Once signed, the API server the provider gave must be that cluster: its tenant namespace
//!   for us, read through the identity, carries the provider's ID
//!   ([`control::identity::check::api_server`]). The result is recorded on the identity Secret
//!   (annotation `discovery.liqo.io/verified-cluster-id`), so the check is made once.

use std::time::Duration;

use control::{
    api::discovery::ForeignCluster,
    conditions::{Authentication, Condition, NewCondition},
    consts::{annotations, keys, labels, values},
    identity::{CertificateIdentityRequest, authentication, check},
};
use k8s_openapi::{
    ByteString,
    api::core::v1::{Namespace, Secret},
};
use kube::{Api, ResourceExt, api::PostParams};
use serde_json::json;

use crate::{
    context::{Attempt, AuthFailure, Context, now},
    decide::fc::{self as decide, AuthStep, IdentityState},
    error::{Error, kube as kerr},
    identity,
};

/// How soon a refused or unanswered identity request is first sent again (doubling with each
/// failure; at most the resync period for the first).
pub const AUTH_RETRY: Duration = Duration::from_secs(10);

/// Where our identity at the peer stands.
#[derive(Debug, Clone)]
pub struct IdentityOutcome {
    /// `AuthenticationStatus`.
    pub condition: NewCondition,
    /// The peer's tenant namespace for us, once signed and checked.
    pub remote: Option<String>,
    /// Reconcile again after this long at the latest (a retry, a check to make again).
    pub recheck: Option<Duration>,
}

impl IdentityOutcome {
    fn new(condition: impl Into<NewCondition>, remote: Option<String>) -> Self {
        IdentityOutcome {
            condition: condition.into(),
            remote,
            recheck: None,
        }
    }
}

/// Our identity at the peer of `fc`, in our tenant namespace `tenant`: checked when signed,
/// else asked for (unless a failure of the same attempt is still backing off). `pending` is
/// called before a request is sent, to record `Pending` first (liqoctl tells an answer from an
/// answer to an earlier attempt by its transition). `old_remote` is the status' remote tenant
/// namespace, kept while a signed identity cannot be checked again (a peer's API server down
/// must not withdraw a peering that was checked).
pub async fn identity<F, Fut>(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    old_remote: Option<&str>,
    pending: F,
) -> Result<IdentityOutcome, Error>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    let peer = &fc.spec.cluster_identity.cluster_id;
    let secret = identity::find(&ctx.client, tenant, peer)
        .await
        .map_err(|e| Error::Identity(Box::new(e)))?;
    let state = identity::state(secret.as_ref());
    if let (IdentityState::Signed { namespace }, Some(secret)) = (&state, &secret) {
        let outcome = verify(ctx, fc, tenant, secret, namespace, old_remote).await?;
        if outcome.remote.is_some() {
            ctx.auth_failures().remove(peer);
        }
        return Ok(outcome);
    }
    let token = liqo_auth::tokens::remote_token(&ctx.client, &ctx.settings.namespace, peer)
        .await
        .map_err(|e| Error::Token(Box::new(e)))?;
    let attempt = Attempt {
        uid: fc.uid(),
        url: fc.spec.foreign_auth_url.clone(),
        token,
    };
    let base = AUTH_RETRY.min(ctx.settings.resync);
    let last = ctx
        .auth_failures()
        .get(peer)
        .filter(|f| f.attempt == attempt)
        .cloned();
    if let Some(f) = &last {
        let wait = decide::auth_retry_delay(f.failures, base);
        let since = f.at.elapsed();
        if since < wait {
            return Ok(IdentityOutcome {
                condition: f.condition.clone(),
                remote: None,
                recheck: Some(wait - since),
            });
        }
    }
    pending().await?;
    let step = decide::auth_step(&state);
    let mut outcome = authenticate(ctx, fc, tenant, secret, step).await?;
    if outcome.remote.is_some() {
        ctx.auth_failures().remove(peer);
        return Ok(outcome);
    }
    let failures = last.map_or(1, |f| f.failures.saturating_add(1));
    let wait = decide::auth_retry_delay(failures, base);
    outcome.condition.message =
        decide::auth_failure_message(&outcome.condition.message, failures, wait);
    outcome.recheck = Some(wait);
    ctx.auth_failures().insert(
        peer.clone(),
        AuthFailure {
            at: std::time::Instant::now(),
            condition: outcome.condition.clone(),
            attempt,
            failures,
        },
    );
    Ok(outcome)
}

/// Checks that the API server behind a signed identity is the peer's (once; recorded on the
/// identity Secret).
async fn verify(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    secret: &Secret,
    namespace: &str,
    old_remote: Option<&str>,
) -> Result<IdentityOutcome, Error> {
    let peer = &fc.spec.cluster_identity.cluster_id;
    let verified = secret
        .annotations()
        .get(annotations::VERIFIED_CLUSTER_ID)
        .map(String::as_str);
    if verified == Some(peer.as_str()) {
        return Ok(IdentityOutcome::new(
            Condition::Authentication(Authentication::Accepted),
            Some(namespace.to_owned()),
        ));
    }
    let server = identity::data(secret, keys::API_SERVER_URL)
        .map(|u| String::from_utf8_lossy(u).into_owned())
        .unwrap_or_default();
    let read = async {
        let client = ctx
            .peers
            .client(&ctx.client, tenant, peer)
            .await
            .map_err(|e| liqo_types::chain(&e).to_string())?
            .ok_or_else(|| "the identity is not signed".to_owned())?;
        let ns = Api::<Namespace>::all(client.api)
            .get_opt(namespace)
            .await
            .map_err(|e| format!("reading namespace {namespace}: {}", liqo_types::chain(&e)))?
            .ok_or_else(|| format!("namespace {namespace} does not exist there"))?;
        Ok::<_, String>(ns.annotations().get(annotations::HOST_CLUSTER_ID).cloned())
    };
    // A namespace that does not say which cluster it is (a provider not annotating it yet)
    // cannot be checked: it is asked again, never taken for another cluster's.
    let read = async {
        read.await?.ok_or_else(|| {
            format!(
                "its tenant namespace {namespace} does not say which cluster it is ({} not set yet)",
                annotations::HOST_CLUSTER_ID
            )
        })
    };
    let host = match read.await {
        Ok(host) => host,
        Err(why) => {
            tracing::warn!(peer = %peer, %server, error = %why, "cannot check the API server behind our identity");
            let checked_before = old_remote == Some(namespace);
            let condition = if checked_before {
                Condition::Authentication(Authentication::Accepted).with_message(format!(
                    "The remote cluster accepted our identity (its API server at {server} cannot be checked now: {why})"
                ))
            } else {
                Condition::Authentication(Authentication::Pending).with_message(format!(
                    "our identity is signed; checking that the API server at {server} is cluster {peer}: {why}"
                ))
            };
            return Ok(IdentityOutcome {
                condition,
                remote: checked_before.then(|| namespace.to_owned()),
                recheck: Some(AUTH_RETRY),
            });
        }
    };
    if let Err(wrong) = check::api_server(&server, namespace, peer, &host) {
        tracing::warn!(peer = %peer, error = %wrong, "the API server behind our identity is another cluster's");
        ctx.peers.forget(peer);
        return Ok(IdentityOutcome {
            condition: Condition::Authentication(Authentication::WrongCluster)
                .with_message(wrong.to_string()),
            remote: None,
            recheck: Some(ctx.settings.resync),
        });
    }
    // Recorded on a fresh copy (update, not patch: the chart's ClusterRole grants no patch on
    // Secrets); a conflict is left to the next reconcile, which checks again.
    let mut marked = secret.clone();
    marked
        .annotations_mut()
        .insert(annotations::VERIFIED_CLUSTER_ID.into(), peer.to_string());
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), tenant);
    match secrets
        .replace(&secret.name_any(), &PostParams::default(), &marked)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {
            tracing::debug!(peer = %peer, "identity Secret changed meanwhile; checked again next time");
        }
        Err(e) => {
            return Err(kerr(format!(
                "record the check on identity Secret {tenant}/{}",
                secret.name_any()
            ))(e));
        }
    }
    tracing::info!(peer = %peer, %server, %namespace, "the API server behind our identity is the peer's");
    Ok(IdentityOutcome::new(
        Condition::Authentication(Authentication::Accepted),
        Some(namespace.to_owned()),
    ))
}

/// Asks the peer to sign our identity: first checks that its auth service is the cluster the
/// ForeignCluster names (nothing is sent otherwise), makes the key and CSR if needed, sends
/// them with a proof of possession, stores the answer. The outcome's message says why a
/// request failed.
async fn authenticate(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    secret: Option<Secret>,
    step: AuthStep,
) -> Result<IdentityOutcome, Error> {
    let peer = &fc.spec.cluster_identity.cluster_id;
    let url = &fc.spec.foreign_auth_url;
    let client = ctx.auth(fc.spec.insecure_skip_tls_verify);
    let failed = |c: Authentication, why: String| {
        Ok(IdentityOutcome::new(
            Condition::Authentication(c).with_message(why),
            None,
        ))
    };
    match client.ids(url).await {
        Ok(info) => {
            if let Err(wrong) = check::auth_service(url, peer, &info) {
                tracing::warn!(peer = %peer, error = %wrong, "not sending our identity request");
                return failed(
                    Authentication::WrongCluster,
                    format!("{wrong}: no token was sent"),
                );
            }
        }
        Err(e) => {
            tracing::warn!(peer = %peer, error = %liqo_types::chain(&e), "the auth service does not say who it is");
            let c = authentication(e.http_status(), true);
            let c = if c == Authentication::Accepted {
                Authentication::Pending
            } else {
                c
            };
            return failed(c, format!("asking who it is: {}", liqo_types::chain(&e)));
        }
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), tenant);
    let secret = match (step, secret) {
        (AuthStep::Request, Some(s)) => s,
        _ => create_identity(ctx, &secrets, tenant, peer).await?,
    };
    let csr = identity::data(&secret, keys::CSR)
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    let ns = &ctx.settings.namespace;
    let ours = liqo_auth::tokens::local_token(&ctx.client, ns)
        .await
        .map_err(|e| Error::Token(Box::new(e)))?;
    let theirs = liqo_auth::tokens::remote_token(&ctx.client, ns, peer)
        .await
        .map_err(|e| Error::Token(Box::new(e)))?;
    let time_ms = u64::try_from(now().0.as_millisecond()).unwrap_or(0);
    let proof =
        identity::prove(&secret, peer, time_ms).map_err(|e| Error::Identity(Box::new(e)))?;
    let request = CertificateIdentityRequest::new(ctx.local.clone(), &ours, theirs.as_ref(), csr)
        .with_proof(proof);
    let response = match client.certificate(url, &request).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(peer = %peer, error = %liqo_types::chain(&e), "identity request failed");
            return failed(
                authentication(e.http_status(), theirs.is_some()),
                liqo_types::chain(&e).to_string(),
            );
        }
    };
    store(ctx, fc, tenant, &secrets, secret, &request, response).await
}

/// A new key and CSR in a new identity Secret.
async fn create_identity(
    ctx: &Context,
    secrets: &Api<Secret>,
    tenant: &str,
    peer: &control::api::ClusterId,
) -> Result<Secret, Error> {
    let new =
        identity::new_identity(&ctx.local.cluster_id).map_err(|e| Error::Identity(Box::new(e)))?;
    let expire = now().0.as_second() + 365 * 24 * 3600;
    let s: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "generateName": control::consts::objects::IDENTITY_GENERATE_NAME,
            "namespace": tenant,
            "labels": {labels::LOCAL_IDENTITY: values::TRUE, labels::CLUSTER_ID: peer.as_str()},
            "annotations": {annotations::CERTIFICATE_EXPIRE_TIME: expire.to_string()},
        },
        "stringData": {keys::PRIVATE_KEY: new.private_key_pem, keys::CSR: new.csr_pem},
    }))
    .expect("a Secret deserializes");
    secrets
        .create(&PostParams::default(), &s)
        .await
        .map_err(kerr(format!("create identity Secret in {tenant}")))
}

/// Stores a signed identity in its Secret: on a fresh read, again on a conflict (a concurrent
/// update), so the certificate is never left unsaved for a stale copy (update, not patch: the
/// chart's ClusterRole grants no patch on Secrets). The key and CSR are kept as read.
async fn store(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    secrets: &Api<Secret>,
    secret: Secret,
    request: &CertificateIdentityRequest,
    response: control::identity::CertificateIdentityResponse,
) -> Result<IdentityOutcome, Error> {
    let peer = &fc.spec.cluster_identity.cluster_id;
    let mut data = std::collections::BTreeMap::new();
    let mut put = |k: &str, v: Vec<u8>| {
        data.insert(k.to_owned(), ByteString(v));
    };
    put(keys::CERTIFICATE, response.certificate.clone());
    put(
        keys::API_SERVER_URL,
        response.api_server_url.clone().into_bytes(),
    );
    if let Some(ca) = &response.api_server_ca {
        put(keys::API_SERVER_CA, ca.clone());
    }
    put(keys::NAMESPACE, response.namespace.to_string().into_bytes());
    // In-band: the API server is reached through the peer's liqo-proxy.
    if let Some(proxy) = fc.spec.foreign_proxy_url.as_ref().filter(|p| !p.is_empty()) {
        put(keys::PROXY_URL, proxy.clone().into_bytes());
    }
    let secret_name = secret.name_any();
    let mut current = secret;
    let mut attempts = 0;
    loop {
        attempts += 1;
        current.data.get_or_insert_default().extend(data.clone());
        current
            .labels_mut()
            .insert(labels::CERTIFICATE_AVAILABLE.into(), values::TRUE.into());
        match secrets
            .replace(&secret_name, &PostParams::default(), &current)
            .await
        {
            Ok(stored) => {
                tracing::info!(peer = %peer, namespace = %response.namespace, "identity accepted");
                // Checked at once: the API server the provider gave must be the peer's.
                return verify(ctx, fc, tenant, &stored, response.namespace.as_str(), None).await;
            }
            Err(kube::Error::Api(s)) if s.code == 409 && attempts < 5 => {
                current = secrets
                    .get(&secret_name)
                    .await
                    .map_err(kerr(format!("read identity Secret {tenant}/{secret_name}")))?;
                let same_csr = current
                    .data
                    .as_ref()
                    .and_then(|d| d.get(keys::CSR))
                    .is_some_and(|c| c.0 == request.certificate_signing_request);
                if !same_csr {
                    // A new key pair replaced the one the certificate was asked for: the
                    // certificate is useless; the next reconcile asks for the new one.
                    tracing::warn!(peer = %peer, "identity Secret changed its CSR meanwhile");
                    return Ok(IdentityOutcome::new(
                        Condition::Authentication(Authentication::Pending),
                        None,
                    ));
                }
            }
            Err(e) => {
                return Err(kerr(format!(
                    "store identity Secret {tenant}/{secret_name}"
                ))(e));
            }
        }
    }
}
