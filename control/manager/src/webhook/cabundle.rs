//! The CA in the configurations: [`patch`] (pure) is the strategic merge patch setting
//! `caBundle` on every webhook of a configuration that lacks it or has another; [`set`] applies
//! it to the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration
//! `liqo-webhook`, at start and every period after (the webhooks' keeper calls it: the
//! ClusterRole grants get and patch by name, not watch, so a reset is undone within a period).
//! It never creates or deletes a configuration or webhook, and never logs (the caller does, rate
//! limited).

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

/// What [`set`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Both configurations (those present) were read back already holding the CA.
    ReadBack,
    /// At least one was patched (it holds the CA once the patch is read back).
    Patched,
}

/// A configuration's webhooks, each with its name and caBundle (both kinds have the same
/// `webhooks[].{name, clientConfig.caBundle}`).
trait Hooks {
    fn bundles(&self) -> Bundles;
}

impl Hooks for MutatingWebhookConfiguration {
    fn bundles(&self) -> Bundles {
        bundles(
            self.webhooks
                .iter()
                .flatten()
                .map(|w| (&w.name, &w.client_config)),
        )
    }
}

impl Hooks for ValidatingWebhookConfiguration {
    fn bundles(&self) -> Bundles {
        bundles(
            self.webhooks
                .iter()
                .flatten()
                .map(|w| (&w.name, &w.client_config)),
        )
    }
}

fn bundles<'a>(
    hooks: impl Iterator<
        Item = (
            &'a String,
            &'a k8s_openapi::api::admissionregistration::v1::WebhookClientConfig,
        ),
    >,
) -> Bundles {
    hooks
        .map(|(name, c)| (name.clone(), c.ca_bundle.clone().map(|b| b.0)))
        .collect()
}

/// Sets `ca` in the configuration `liqo-webhook` of kind `K` where missing: `Ok(true)` when
/// patched, `Ok(false)` when absent or already holding it.
async fn one<K>(client: &Client, ca: &[u8]) -> Result<bool, CaBundleError>
where
    K: k8s_openapi::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + k8s_openapi::Metadata<Ty = kube::api::ObjectMeta>
        + Hooks
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let kind = K::KIND;
    let api: Api<K> = Api::all(client.clone());
    let err = |source| CaBundleError { kind, source };
    let Some(obj) = api.get_opt(webhook::CONFIGURATION).await.map_err(err)? else {
        return Ok(false);
    };
    let Some(p) = patch(&obj.bundles(), ca) else {
        return Ok(false);
    };
    let params = PatchParams {
        field_manager: Some(crate::FIELD_MANAGER.into()),
        ..Default::default()
    };
    api.patch(webhook::CONFIGURATION, &params, &Patch::Strategic(p))
        .await
        .map_err(err)?;
    Ok(true)
}

/// Sets the CA in both configurations where missing (absent configurations are skipped). Both
/// are tried; the first error is returned (the caller tries again).
pub async fn set(client: &Client, ca: &[u8]) -> Result<Outcome, CaBundleError> {
    let m = one::<MutatingWebhookConfiguration>(client, ca).await;
    let v = one::<ValidatingWebhookConfiguration>(client, ca).await;
    let (m, v) = (m?, v?);
    if m || v {
        tracing::info!("set the webhook CA in the configurations");
        Ok(Outcome::Patched)
    } else {
        Ok(Outcome::ReadBack)
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
