//! Auth tokens as Secrets in the Liqo namespace: the local token (`auth-token`, key `token`,
//! 64 random bytes in lowercase hex), which peers must present to our auth service, made by
//! [`ensure_local_token`] when missing (and again after a deletion); and the tokens of remote
//! clusters (`remote-token-<id>`, labels `discovery.liqo.io/cluster-id=<id>` and
//! `discovery.liqo.io/auth-token`), which we present to theirs. A token is never logged and
//! never part of an error.

use std::{collections::BTreeMap, time::Duration};

use control::{
    api::ClusterId,
    consts::{keys, labels, objects},
    identity::{AuthToken, InvalidToken, RandomUnavailable},
    names,
};
use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};

use crate::FIELD_MANAGER;

/// Why a token cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The local token Secret does not exist.
    #[error("Secret {namespace}/{name} not found (liqo-auth creates it at start)", name = objects::AUTH_TOKEN_SECRET)]
    NoLocalToken {
        /// The Liqo namespace.
        namespace: String,
    },
    /// A call to the apiserver failed.
    #[error("{what} Secret {namespace}/{name}")]
    Kube {
        /// reading, creating or writing.
        what: &'static str,
        /// The namespace.
        namespace: String,
        /// The Secret.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The Secret's token is missing or malformed.
    #[error("Secret {namespace}/{name} key {key:?} does not hold a token", key = keys::TOKEN)]
    Invalid {
        /// The namespace.
        namespace: String,
        /// The Secret.
        name: String,
        /// Why (never the value).
        #[source]
        source: InvalidToken,
    },
    /// No random bytes for a new token.
    #[error(transparent)]
    Random(#[from] RandomUnavailable),
}

fn kube_err(what: &'static str, ns: &str, name: &str) -> impl FnOnce(kube::Error) -> TokenError {
    let (namespace, name) = (ns.to_owned(), name.to_owned());
    move |source| TokenError::Kube {
        what,
        namespace,
        name,
        source,
    }
}

/// The token in a Secret's data (`token`); `None` data or key counts as empty.
pub fn token_of(secret: &Secret) -> Result<AuthToken, InvalidToken> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(keys::TOKEN))
        .map(|b| b.0.as_slice())
        .unwrap_or_default();
    // Not UTF-8: report it as a bad character, at the first invalid byte.
    let text =
        std::str::from_utf8(bytes).map_err(|e| InvalidToken::NotLowercaseHex(e.valid_up_to()))?;
    text.parse()
}

async fn read(client: &Client, ns: &str, name: &str) -> Result<Option<AuthToken>, TokenError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let Some(secret) = api
        .get_opt(name)
        .await
        .map_err(kube_err("reading", ns, name))?
    else {
        return Ok(None);
    };
    token_of(&secret)
        .map(Some)
        .map_err(|source| TokenError::Invalid {
            namespace: ns.to_owned(),
            name: name.to_owned(),
            source,
        })
}

fn token_data(token: &AuthToken) -> BTreeMap<String, ByteString> {
    BTreeMap::from([(
        keys::TOKEN.to_owned(),
        ByteString(token.expose().as_bytes().to_vec()),
    )])
}

/// The local token (Secret `auth-token` in `ns`); an error if it does not exist.
pub async fn local_token(client: &Client, ns: &str) -> Result<AuthToken, TokenError> {
    read(client, ns, objects::AUTH_TOKEN_SECRET)
        .await?
        .ok_or_else(|| TokenError::NoLocalToken {
            namespace: ns.to_owned(),
        })
}

/// The local token, created (64 random bytes, hex) when the Secret does not exist. Two callers
/// racing agree on one token: the loser of the create reads the winner's.
pub async fn ensure_local_token(client: &Client, ns: &str) -> Result<AuthToken, TokenError> {
    let name = objects::AUTH_TOKEN_SECRET;
    if let Some(token) = read(client, ns, name).await? {
        return Ok(token);
    }
    let token = AuthToken::generate()?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            ..Default::default()
        },
        data: Some(token_data(&token)),
        ..Default::default()
    };
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..Default::default()
    };
    match api.create(&pp, &secret).await {
        Ok(_) => {
            tracing::info!(namespace = ns, "created the local auth token Secret {name}");
            Ok(token)
        }
        Err(kube::Error::Api(e)) if e.code == 409 => local_token(client, ns).await,
        Err(e) => Err(kube_err("creating", ns, name)(e)),
    }
}

/// Keeps the local token Secret existing: checks every `period` and recreates it (with a new
/// token) when it was deleted, giving the current token to `current` each time. Never
/// returns: a failed check is logged and retried.
pub async fn keep_local_token(
    client: Client,
    ns: String,
    period: Duration,
    mut current: impl FnMut(AuthToken) + Send,
) {
    loop {
        match ensure_local_token(&client, &ns).await {
            Ok(token) => current(token),
            Err(e) => tracing::warn!(
                error = %liqo_types::chain::chain(&e),
                "cannot ensure the local auth token"
            ),
        }
        tokio::time::sleep(period).await;
    }
}

/// Writes (server-side apply) the token of a remote cluster: Secret `remote-token-<id>` in
/// `ns`, labelled with the cluster ID and as an auth token.
pub async fn write_remote_token(
    client: &Client,
    ns: &str,
    remote: &ClusterId,
    token: &AuthToken,
) -> Result<(), TokenError> {
    let name = names::remote_token_secret(remote);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(ns.to_owned()),
            labels: Some(BTreeMap::from([
                (labels::CLUSTER_ID.to_owned(), remote.to_string()),
                // Upstream marks it with an empty value and selects on the key's presence.
                (labels::AUTH_TOKEN.to_owned(), String::new()),
            ])),
            ..Default::default()
        },
        data: Some(token_data(token)),
        ..Default::default()
    };
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let mut value = serde_json::to_value(&secret).expect("a Secret serializes");
    value["apiVersion"] = "v1".into();
    value["kind"] = "Secret".into();
    api.patch(
        name.as_str(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(value),
    )
    .await
    .map_err(kube_err("writing", ns, name.as_str()))?;
    Ok(())
}

/// The token of a remote cluster, if we have one.
pub async fn remote_token(
    client: &Client,
    ns: &str,
    remote: &ClusterId,
) -> Result<Option<AuthToken>, TokenError> {
    read(client, ns, names::remote_token_secret(remote).as_str()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(data: Option<&[u8]>) -> Secret {
        Secret {
            data: data.map(|d| BTreeMap::from([("token".to_owned(), ByteString(d.to_vec()))])),
            ..Default::default()
        }
    }

    #[test]
    fn reads_a_token_and_refuses_bad_ones_without_the_value() {
        let good = "ab".repeat(64);
        assert_eq!(
            token_of(&secret(Some(good.as_bytes()))).unwrap().expose(),
            good
        );
        assert_eq!(token_of(&secret(None)).unwrap_err(), InvalidToken::Empty);
        assert_eq!(
            token_of(&secret(Some(b"abc\xff"))).unwrap_err(),
            InvalidToken::NotLowercaseHex(3)
        );
        let e = TokenError::Invalid {
            namespace: "liqo".into(),
            name: "auth-token".into(),
            source: token_of(&secret(Some(b"secretsecret"))).unwrap_err(),
        };
        assert!(!format!("{e:?}").contains("secretsecret"));
        assert!(e.to_string().contains("liqo/auth-token"), "{e}");
    }
}
