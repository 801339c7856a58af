//! The CA in the configurations: [`patch`] (pure) is the strategic merge patch setting
//! `caBundle` on every webhook of a configuration that lacks it or has another; [`set`] applies
//! it to the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration
//! `liqo-webhook`, at start and every period after (the webhooks' keeper calls it: the
//! ClusterRole grants get and patch by name, not watch, so a reset is undone within a period).
//! It never creates or deletes a configuration or webhook.

use control::consts::webhook;
use k8s_openapi::{
    ByteString,
    api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    },
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::{Value, json};

/// The webhooks of a configuration: each name and its caBundle.
pub type Bundles = Vec<(String, Option<Vec<u8>>)>;

/// The strategic merge patch setting `ca` on the webhooks that lack it or have another (the
/// `webhooks` list merges by `name`); `None` when all have it.
pub fn patch(webhooks: &[(String, Option<Vec<u8>>)], ca: &[u8]) -> Option<Value> {
    let encoded = serde_json::to_value(ByteString(ca.to_vec())).unwrap_or(Value::Null);
    let items: Vec<Value> = webhooks
        .iter()
        .filter(|(_, bundle)| bundle.as_deref() != Some(ca))
        .map(|(name, _)| json!({"name": name, "clientConfig": {"caBundle": encoded}}))
        .collect();
    (!items.is_empty()).then(|| json!({ "webhooks": items }))
}

/// Why a configuration's caBundle cannot be set.
#[derive(Debug, thiserror::Error)]
#[error("setting the caBundle of {kind} {name}", name = webhook::CONFIGURATION)]
pub struct CaBundleError {
    kind: &'static str,
    #[source]
    source: kube::Error,
}

async fn one<K>(
    api: Api<K>,
    kind: &'static str,
    ca: &[u8],
    webhooks: fn(&K) -> Bundles,
) -> Result<bool, CaBundleError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let err = |source| CaBundleError { kind, source };
    let Some(obj) = api.get_opt(webhook::CONFIGURATION).await.map_err(err)? else {
        return Ok(false);
    };
    let Some(p) = patch(&webhooks(&obj), ca) else {
        return Ok(false);
    };
    api.patch(
        webhook::CONFIGURATION,
        &PatchParams::default(),
        &Patch::Strategic(p),
    )
    .await
    .map_err(err)?;
    Ok(true)
}

fn mutating(c: &MutatingWebhookConfiguration) -> Bundles {
    c.webhooks
        .iter()
        .flatten()
        .map(|w| {
            (
                w.name.clone(),
                w.client_config.ca_bundle.clone().map(|b| b.0),
            )
        })
        .collect()
}

fn validating(c: &ValidatingWebhookConfiguration) -> Bundles {
    c.webhooks
        .iter()
        .flatten()
        .map(|w| {
            (
                w.name.clone(),
                w.client_config.ca_bundle.clone().map(|b| b.0),
            )
        })
        .collect()
}

/// Sets the CA in both configurations where missing (absent configurations are skipped;
/// errors logged, to be tried again by the caller).
pub async fn set(client: &Client, ca: &[u8]) {
    let m: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let v: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    for r in [
        one(m, "MutatingWebhookConfiguration", ca, mutating).await,
        one(v, "ValidatingWebhookConfiguration", ca, validating).await,
    ] {
        match r {
            Ok(true) => tracing::info!("set the webhook CA in a configuration"),
            Ok(false) => {}
            Err(e) => {
                let cause = std::error::Error::source(&e).map(ToString::to_string);
                tracing::warn!(error = %e, cause = cause.unwrap_or_default(), "caBundle not set");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_only_the_webhooks_without_the_ca() {
        let ca = b"CA".to_vec();
        let hooks = vec![
            ("a".to_owned(), Some(ca.clone())),
            ("b".to_owned(), None),
            ("c".to_owned(), Some(b"old".to_vec())),
        ];
        let p = patch(&hooks, &ca).unwrap();
        assert_eq!(
            p,
            json!({"webhooks": [
                {"name": "b", "clientConfig": {"caBundle": "Q0E="}},
                {"name": "c", "clientConfig": {"caBundle": "Q0E="}},
            ]})
        );
        assert_eq!(patch(&[("a".to_owned(), Some(ca.clone()))], &ca), None);
    }
}
