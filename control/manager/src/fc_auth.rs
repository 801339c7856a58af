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
//!   ([`control::peering::api_server`]; another ID refuses the identity, a namespace that does
//!   not say is accepted unchecked, saying so). The result is recorded on the identity Secret
//!   (annotation `discovery.liqo.io/verified-cluster-id`), so the check is made once.

use control::api::discovery::ForeignCluster;
use kube::ResourceExt;

mod request;
mod verify;

pub use verify::{AUTH_RETRY, IdentityOutcome};

use crate::{
    context::{Attempt, AuthFailure, Context},
    error::Error,
    identity,
};
use control::peering::fc::{self as decide, IdentityState};

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
        let outcome = verify::verify(ctx, fc, tenant, secret, namespace, old_remote).await?;
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
    let next_at = crate::kit::now()
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
