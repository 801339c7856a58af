//! The gateway's WireGuard key in Secrets: `wireguard-privkey` (key `privateKey`, read only by
//! the gateway operator) made once, and `wireguard-pubkey` (key `publicKey`, label
//! `net.liqo.io/key=wireguard`, read by the network manager) kept equal to its public half.
//! The private key is never logged.

use std::collections::BTreeMap;

use control::consts::net;
use gateway::keys::PrivateKey;
use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};

use super::{KubeError, api};

fn secret_value(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
        .map(|t| t.trim().to_owned())
}

/// The gateway's private key: the one in Secret `wireguard-privkey`, else `adopt` (the key the
/// gateway has used so far, from its key file) or a new one, stored there (a key stored
/// meanwhile by another operator wins). Then Secret `wireguard-pubkey` is made to hold its
/// public half, applied by field manager `manager`.
pub async fn ensure(
    client: &Client,
    ns: &str,
    manager: &str,
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
        let s = Secret {
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
        };
        match secrets.create(&PostParams::default(), &s).await {
            Ok(_) => {
                tracing::info!(secret = %what, public_key = %key.public(), "made the gateway's key");
                break key;
            }
            // Made by someone else meanwhile: read theirs.
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(api(format!("creating {what}"))(e)),
        }
    };
    let public = key.public().to_string();
    let pubkey = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(net::PUBLIC_KEY_SECRET.into()),
            namespace: Some(ns.into()),
            labels: Some(BTreeMap::from([(
                net::KEY_LABEL.into(),
                net::WIREGUARD.into(),
            )])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            net::PUBLIC_KEY.into(),
            ByteString(public.clone().into_bytes()),
        )])),
        ..Default::default()
    };
    let current = secrets
        .get_opt(net::PUBLIC_KEY_SECRET)
        .await
        .map_err(api(format!(
            "reading Secret {ns}/{}",
            net::PUBLIC_KEY_SECRET
        )))?;
    if current
        .as_ref()
        .and_then(|s| secret_value(s, net::PUBLIC_KEY))
        != Some(public.clone())
    {
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
    }
    Ok(key)
}
