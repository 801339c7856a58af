//! The check of a signed identity: the API server behind it must be the peer's (its tenant
//! namespace for us carries the provider's ID), recorded on the identity Secret once checked;
//! and where our identity at the peer stands ([`IdentityOutcome`]).

use std::time::Duration;

use control::{
    api::discovery::ForeignCluster,
    conditions::{Authentication, Condition, NewCondition},
    consts::{annotations, keys},
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::{Api, ResourceExt, api::PostParams};

use crate::{
    context::Context,
    error::{Error, kube as kerr},
    identity,
};
use control::peering::api_server::{self, Seen};

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
    pub(super) fn new(condition: impl Into<NewCondition>, remote: Option<String>) -> Self {
        IdentityOutcome {
            condition: condition.into(),
            remote,
            recheck: None,
        }
    }
}

/// Checks that the API server behind a signed identity is the peer's
/// ([`control::peering::api_server`]; recorded on the identity Secret once checked).
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
