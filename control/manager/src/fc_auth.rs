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
//!   ([`crate::decide::api_server`]; another ID refuses the identity, a namespace that does
//!   not say is accepted unchecked, saying so). The result is recorded on the identity Secret
//!   (annotation `discovery.liqo.io/verified-cluster-id`), so the check is made once.

use std::time::Duration;

use control::{
    api::discovery::ForeignCluster,
    conditions::{Authentication, Condition, NewCondition},
    consts::{annotations, keys},
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::{Api, ResourceExt, api::PostParams};

mod request;

use crate::{
    context::{Attempt, AuthFailure, Context},
    decide::{
        api_server::{self, Seen},
        fc::{self as decide, IdentityState},
    },
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
    let mut outcome = request::authenticate(ctx, fc, tenant, secret, step).await?;
    if outcome.remote.is_some() {
        ctx.auth_failures().remove(peer);
        return Ok(outcome);
    }
    let failures = last.map_or(1, |f| f.failures.saturating_add(1));
    let wait = decide::auth_retry_delay(failures, base);
    let next_at = crate::context::now()
        .0
        .checked_add(k8s_openapi::jiff::SignedDuration::try_from(wait).unwrap_or_default())
        .unwrap_or(k8s_openapi::jiff::Timestamp::MAX);
    outcome.condition.message =
        decide::auth_failure_message(&outcome.condition.message, failures, next_at);
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

/// Checks that the API server behind a signed identity is the peer's
/// ([`crate::decide::api_server`]; recorded on the identity Secret once checked).
pub(super) async fn verify(
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
    let seen = read_host(ctx, tenant, peer, namespace).await;
    let checked_before = old_remote == Some(namespace);
    let checked = api_server::decide(
        &server,
        namespace,
        peer,
        &seen,
        checked_before,
        (AUTH_RETRY, ctx.settings.resync),
    );
    match &seen {
        Seen::Host(_) if checked.usable => {
            tracing::info!(peer = %peer, %server, %namespace, "the API server behind our identity is the peer's");
        }
        Seen::Host(_) => {
            tracing::warn!(peer = %peer, message = %checked.condition.message, "the API server behind our identity is another cluster's");
            ctx.peers.forget(peer);
        }
        Seen::Failed(why) if !checked_before => {
            tracing::warn!(peer = %peer, %server, error = %why, "cannot check the API server behind our identity");
        }
        other => {
            tracing::debug!(peer = %peer, %server, seen = ?other, "the API server behind our identity is not checked");
        }
    }
    if checked.record {
        record(ctx, tenant, secret, peer).await?;
    }
    Ok(IdentityOutcome {
        condition: checked.condition,
        remote: checked.usable.then(|| namespace.to_owned()),
        recheck: checked.recheck,
    })
}

/// Reads our tenant namespace at the peer's API server, through our identity.
async fn read_host(
    ctx: &Context,
    tenant: &str,
    peer: &control::api::ClusterId,
    namespace: &str,
) -> Seen {
    let client = match ctx.peers.client(&ctx.client, tenant, peer).await {
        Ok(Some(c)) => c,
        Ok(None) => return Seen::Failed("the identity is not signed".into()),
        Err(e) => return Seen::Failed(liqo_types::chain(&e).to_string()),
    };
    match Api::<Namespace>::all(client.api).get_opt(namespace).await {
        Ok(Some(ns)) => ns
            .annotations()
            .get(annotations::HOST_CLUSTER_ID)
            .cloned()
            .map_or(Seen::Unannotated, Seen::Host),
        Ok(None) => Seen::Failed(format!("namespace {namespace} does not exist there")),
        Err(kube::Error::Api(s)) if s.code == 403 => Seen::Forbidden,
        Err(e) => Seen::Failed(format!(
            "reading namespace {namespace}: {}",
            liqo_types::chain(&e)
        )),
    }
}

/// Records on the identity Secret that its API server was checked (a fresh copy replaced:
/// the chart's ClusterRole grants no patch on Secrets; a conflict is left to the next
/// reconcile, which checks again).
async fn record(
    ctx: &Context,
    tenant: &str,
    secret: &Secret,
    peer: &control::api::ClusterId,
) -> Result<(), Error> {
    let mut marked = secret.clone();
    marked
        .annotations_mut()
        .insert(annotations::VERIFIED_CLUSTER_ID.into(), peer.to_string());
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), tenant);
    match secrets
        .replace(&secret.name_any(), &PostParams::default(), &marked)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            tracing::debug!(peer = %peer, "identity Secret changed meanwhile; checked again next time");
            Ok(())
        }
        Err(e) => Err(kerr(format!(
            "record the check on identity Secret {tenant}/{}",
            secret.name_any()
        ))(e)),
    }
}
