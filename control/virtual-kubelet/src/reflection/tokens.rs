//! The ServiceAccount tokens of offloaded pods (API server support on): per pod whose
//! projection asks for a token, a TokenRequest at home bound to the home pod, written to the
//! pod's token Secret beside its ShadowPod (owned by it), renewed at 80% of its lifetime (the
//! key comes back then). What was written is kept in [`super::issued::Tokens`], unless the
//! Secret was deleted meanwhile. The token is never logged.

use std::time::Duration;

use control::{
    consts::reflection::FIELD_MANAGER,
    shadowpod::{
        consumer::reflection_labels,
        token::{
            TokenNeed, is_token_secret_of, renew_at, secret_name, token_request, token_secret,
        },
    },
};
use k8s_openapi::{
    api::core::v1::{Pod, Secret, ServiceAccount},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};

use super::{issued::Issued, key::Key, shared::Shared};

/// Why a token could not be issued or written.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The home API server refused the TokenRequest.
    #[error("requesting a token of ServiceAccount {namespace}/{account}")]
    Request {
        /// The home namespace.
        namespace: String,
        /// The ServiceAccount.
        account: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// The answer had no token.
    #[error("the TokenRequest of ServiceAccount {namespace}/{account} came back without a token")]
    Empty {
        /// The home namespace.
        namespace: String,
        /// The ServiceAccount.
        account: String,
    },
    /// A Secret of that name on the provider is not this pod's token Secret (a reflected
    /// copy, the provider's own): left untouched, no token written.
    #[error(
        "Secret {namespace}/{name} on the provider is not the token Secret of this pod: left untouched"
    )]
    NotOurs {
        /// The remote namespace.
        namespace: String,
        /// The Secret.
        name: String,
    },
    /// The token Secret could not be written on the provider.
    #[error("writing Secret {namespace}/{name}")]
    Write {
        /// The remote namespace.
        namespace: String,
        /// The Secret.
        name: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
}

/// The time until `at`, at least a second (a renewal time in the past, by skew, is no hot
/// loop).
fn until(at: Timestamp) -> Duration {
    let d = at.duration_since(Timestamp::now());
    Duration::try_from(d)
        .unwrap_or(Duration::ZERO)
        .max(Duration::from_secs(1))
}

/// Makes sure the token Secret of `local` (whose ShadowPod `shadow` exists in `remote_ns`)
/// holds a live token; queues the key again at its renewal. (A token Secret deleted on the
/// provider is forgotten by [`super::token_watch`], which queues the key: written again now.)
pub async fn ensure(
    shared: &Shared,
    key: &Key,
    local: &Pod,
    remote_ns: &str,
    shadow: &ObjectMeta,
    need: &TokenNeed,
) -> Result<(), TokenError> {
    let name = secret_name(&key.name);
    let uid = shadow.uid.clone().unwrap_or_default();
    // Before the TokenRequest: a deletion of the Secret from now on voids what is written.
    let begun = shared.tokens.begin(key);
    let pod_uid = local.metadata.uid.clone().unwrap_or_default();
    if let Some(c) = begun.issued
        && c.shadow_uid == uid
        && c.pod_uid == pod_uid
        && Timestamp::now() < c.renew_at
    {
        shared.queue.add_after(key.clone(), until(c.renew_at));
        return Ok(());
    }
    let cfg = &shared.cfg;
    // Never over another Secret of that name (checked before a token is minted).
    let secrets = Api::<Secret>::namespaced(cfg.remote.api.clone(), remote_ns);
    let write_error = |source| TokenError::Write {
        namespace: remote_ns.to_owned(),
        name: name.clone(),
        source,
    };
    let labels = reflection_labels(&cfg.home.cluster_id, &cfg.foreign.cluster_id);
    if let Some(existing) = secrets.get_opt(&name).await.map_err(write_error)?
        && !is_token_secret_of(&existing, &key.name, &labels)
    {
        return Err(TokenError::NotOurs {
            namespace: remote_ns.to_owned(),
            name,
        });
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(cfg.local.clone(), &key.namespace);
    let issued = Timestamp::now();
    let answer = accounts
        .create_token_request(
            &need.service_account,
            &PostParams::default(),
            &token_request(local, need),
        )
        .await
        .map_err(|source| TokenError::Request {
            namespace: key.namespace.clone(),
            account: need.service_account.clone(),
            source,
        })?;
    let Some(status) = answer.status.filter(|s| !s.token.is_empty()) else {
        return Err(TokenError::Empty {
            namespace: key.namespace.clone(),
            account: need.service_account.clone(),
        });
    };
    let secret = token_secret(local, remote_ns, &status.token, &uid, labels);
    secrets
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await
        .map_err(write_error)?;
    let renew = renew_at(issued, status.expiration_timestamp.0);
    tracing::info!(pod = %key, secret = %name, renew_at = %renew, "ServiceAccount token written");
    let written = Issued {
        shadow_uid: uid,
        pod_uid,
        renew_at: renew,
    };
    if !shared.tokens.record(key, begun.generation, written) {
        // Deleted while it was written: the token Secrets' watch queued the key again.
        tracing::info!(pod = %key, secret = %name, "token Secret deleted meanwhile: not kept");
        return Ok(());
    }
    shared.queue.add_after(key.clone(), until(renew));
    Ok(())
}
