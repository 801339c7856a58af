//! The gateway's WireGuard key in Secrets: `wireguard-privkey` (key `privateKey`, read only by
//! the gateway operator), and `wireguard-pubkey` (key `publicKey`, label
//! `net.liqo.io/key=wireguard`, read by the network manager) holding the public half of the
//! key the gateway runs.
//!
//! Rotation ([`next`], decided by [`key_action`]): a rotation asked for on the private key
//! Secret (annotation `net.liqo.io/rotate-key` with a value not yet served, as `liqoctl
//! rotate-key` writes) or the Secret deleted while the operator runs makes a new key, stored
//! before anything else uses it. The public key is published ([`publish`]) only once the
//! gateway reports it runs it. The private key is never logged.

use std::collections::BTreeMap;

use control::consts::net;
use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use liqo_gateway_api::keys::PrivateKey;

use super::error::{KubeError, api};

fn secret_value(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
        .map(|t| t.trim().to_owned())
}

/// What to do about the private key Secret, from what it holds (`None`: it does not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyAction {
    /// No Secret: make a key and store it (a deleted Secret is a rotation).
    Create,
    /// A rotation asked for and not served yet: a new key, recorded as serving `request`.
    Rotate {
        /// The value of the rotation annotation to record as served.
        request: String,
    },
    /// Use the stored key.
    Use,
}

/// The private key Secret as [`key_action`] reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeySecret {
    /// `net.liqo.io/rotate-key`, if set.
    pub requested: Option<String>,
    /// `net.liqo.io/key-rotated`, if set.
    pub served: Option<String>,
}

impl KeySecret {
    /// Reads the annotations of a Secret.
    pub fn of(s: &Secret) -> KeySecret {
        let get = |k: &str| {
            s.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(k))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        KeySecret {
            requested: get(net::ROTATE_KEY_ANNOTATION),
            served: get(net::KEY_ROTATED_ANNOTATION),
        }
    }
}

/// Whether the stored key is used, replaced or made.
pub fn key_action(secret: Option<&KeySecret>) -> KeyAction {
    match secret {
        None => KeyAction::Create,
        Some(KeySecret {
            requested: Some(r),
            served,
        }) if served.as_ref() != Some(r) => KeyAction::Rotate { request: r.clone() },
        Some(_) => KeyAction::Use,
    }
}

/// The key the gateway must run now: the stored one, or a new one when a rotation was asked
/// for or the Secret is gone (stored first: a Secret changed meanwhile by another writer wins
/// and is read again next time). Returns the key and, for a new one, why it was made.
pub async fn next(client: &Client, ns: &str) -> Result<(PrivateKey, Option<String>), KubeError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let what = format!("Secret {ns}/{}", net::PRIVATE_KEY_SECRET);
    let current = secrets
        .get_opt(net::PRIVATE_KEY_SECRET)
        .await
        .map_err(api(format!("reading {what}")))?;
    let action = key_action(current.as_ref().map(KeySecret::of).as_ref());
    let stored = |s: &Secret| {
        let text = secret_value(s, net::PRIVATE_KEY).unwrap_or_default();
        PrivateKey::parse(&text).map_err(|_| KubeError::Object {
            what: format!("{what} data.{}", net::PRIVATE_KEY),
            problem: "is not a base64 WireGuard key".into(),
        })
    };
    let fresh = || {
        PrivateKey::generate().map_err(|e| KubeError::Object {
            what: "a new WireGuard key".into(),
            problem: e.to_string(),
        })
    };
    match (action, current) {
        (KeyAction::Use, Some(s)) => Ok((stored(&s)?, None)),
        (KeyAction::Rotate { request }, Some(mut s)) => {
            let key = fresh()?;
            s.data.get_or_insert_default().insert(
                net::PRIVATE_KEY.into(),
                ByteString(key.to_base64().into_bytes()),
            );
            s.metadata
                .annotations
                .get_or_insert_default()
                .insert(net::KEY_ROTATED_ANNOTATION.into(), request.clone());
            // Guarded by the version read: a rotation asked for again meanwhile is served next.
            secrets
                .replace(net::PRIVATE_KEY_SECRET, &PostParams::default(), &s)
                .await
                .map_err(api(format!("storing a new key in {what}")))?;
            Ok((key, Some(format!("rotation asked for (request {request})"))))
        }
        _ => {
            let key = fresh()?;
            secrets
                .create(&PostParams::default(), &private_secret(ns, &key))
                .await
                .map_err(api(format!("creating {what}")))?;
            Ok((key, Some(format!("{what} was deleted"))))
        }
    }
}

fn private_secret(ns: &str, key: &PrivateKey) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(net::PRIVATE_KEY_SECRET.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            net::PRIVATE_KEY.into(),
            ByteString(key.to_base64().into_bytes()),
        )])),
        ..Default::default()
    }
}

/// The public key Secret `wireguard-pubkey` holds, if any (a value that is not a key reads as
/// none: it is replaced).
pub async fn published(
    client: &Client,
    ns: &str,
) -> Result<Option<liqo_types::PublicKey>, KubeError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let current = secrets
        .get_opt(net::PUBLIC_KEY_SECRET)
        .await
        .map_err(api(format!(
            "reading Secret {ns}/{}",
            net::PUBLIC_KEY_SECRET
        )))?;
    Ok(current
        .as_ref()
        .and_then(|s| secret_value(s, net::PUBLIC_KEY))
        .and_then(|k| k.parse().ok()))
}

/// Makes Secret `wireguard-pubkey` hold `public` (applied by field manager `manager`; nothing
/// written when it does already), with the time the gateway was seen running it (`since`).
pub async fn publish(
    client: &Client,
    ns: &str,
    manager: &str,
    public: &liqo_types::PublicKey,
    since: &str,
) -> Result<bool, KubeError> {
    if published(client, ns).await?.as_ref() == Some(public) {
        return Ok(false);
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let public = public.to_string();
    let pubkey = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(net::PUBLIC_KEY_SECRET.into()),
            namespace: Some(ns.into()),
            labels: Some(BTreeMap::from([(
                net::KEY_LABEL.into(),
                net::WIREGUARD.into(),
            )])),
            annotations: Some(BTreeMap::from([(
                net::KEY_SINCE_ANNOTATION.into(),
                since.to_owned(),
            )])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            net::PUBLIC_KEY.into(),
            ByteString(public.into_bytes()),
        )])),
        ..Default::default()
    };
    secrets
        .patch(
            net::PUBLIC_KEY_SECRET,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&pubkey),
        )
        .await
        .map_err(api(format!(
            "applying Secret {ns}/{}",
            net::PUBLIC_KEY_SECRET
        )))?;
    Ok(true)
}

/// The gateway's private key at start: the one in Secret `wireguard-privkey`, else `adopt` (the
/// key the gateway has used so far, from its key file) or a new one, stored there (a key stored
/// meanwhile by another operator wins). Its public half is published by a reconcile, once the
/// gateway runs it ([`publish`]); a rotation asked for while no operator ran is served by the
/// first reconcile ([`next`]).
pub async fn ensure(
    client: &Client,
    ns: &str,
    adopt: Option<PrivateKey>,
) -> Result<PrivateKey, KubeError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let what = format!("Secret {ns}/{}", net::PRIVATE_KEY_SECRET);
    let key = loop {
        if let Some(s) = secrets
            .get_opt(net::PRIVATE_KEY_SECRET)
            .await
            .map_err(api(format!("reading {what}")))?
        {
            let text = secret_value(&s, net::PRIVATE_KEY).unwrap_or_default();
            break PrivateKey::parse(&text).map_err(|_| KubeError::Object {
                what: format!("{what} data.{}", net::PRIVATE_KEY),
                problem: "is not a base64 WireGuard key".into(),
            })?;
        }
        let key = match adopt.clone() {
            Some(k) => k,
            None => PrivateKey::generate().map_err(|e| KubeError::Object {
                what: "a new WireGuard key".into(),
                problem: e.to_string(),
            })?,
        };
        match secrets
            .create(&PostParams::default(), &private_secret(ns, &key))
            .await
        {
            Ok(_) => {
                tracing::info!(secret = %what, public_key = %key.public(), "made the gateway's key");
                break key;
            }
            // Made by someone else meanwhile: read theirs.
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(api(format!("creating {what}"))(e)),
        }
    };
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(requested: Option<&str>, served: Option<&str>) -> KeySecret {
        KeySecret {
            requested: requested.map(Into::into),
            served: served.map(Into::into),
        }
    }

    #[test]
    fn a_rotation_is_served_once_and_a_deleted_secret_makes_a_key() {
        assert_eq!(key_action(None), KeyAction::Create);
        assert_eq!(key_action(Some(&secret(None, None))), KeyAction::Use);
        assert_eq!(
            key_action(Some(&secret(Some("t1"), None))),
            KeyAction::Rotate {
                request: "t1".into()
            }
        );
        assert_eq!(
            key_action(Some(&secret(Some("t1"), Some("t1")))),
            KeyAction::Use
        );
        assert_eq!(
            key_action(Some(&secret(Some("t2"), Some("t1")))),
            KeyAction::Rotate {
                request: "t2".into()
            }
        );
        // Served, no request left: nothing to do.
        assert_eq!(key_action(Some(&secret(None, Some("t1")))), KeyAction::Use);
        let s = Secret {
            metadata: kube::api::ObjectMeta {
                annotations: Some(BTreeMap::from([
                    (net::ROTATE_KEY_ANNOTATION.into(), "t3".into()),
                    (net::KEY_ROTATED_ANNOTATION.into(), String::new()),
                ])),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(KeySecret::of(&s), secret(Some("t3"), None));
    }
}
