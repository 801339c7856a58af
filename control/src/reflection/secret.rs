//! Secrets: copied whole (data, type, immutability), but a ServiceAccount token's
//! (`kubernetes.io/service-account-token`) becomes `Opaque` with the label
//! `kubernetes.io/service-account.name`: the provider's token controller would otherwise
//! delete it (its ServiceAccount is not the provider's).

use k8s_openapi::api::core::v1::Secret;
use liqo_types::FieldError;

use super::{Ctx, Inputs, Kind, Reflect, meta};
use crate::{consts::reflection::SERVICE_ACCOUNT_NAME, shadowpod::token::POD_LABEL};

/// The type of a ServiceAccount token's Secret.
pub const SERVICE_ACCOUNT_TOKEN: &str = "kubernetes.io/service-account-token";
/// The type a token's copy gets.
pub const OPAQUE: &str = "Opaque";

impl Reflect for Secret {
    const KIND: Kind = Kind::Secret;

    fn is_copy(remote: &Self) -> bool {
        // The offloaded pods' token Secrets are the pod reflection's.
        !remote
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(POD_LABEL))
    }

    fn forge(local: &Self, ctx: &Ctx<'_>, _inputs: &Inputs) -> Result<Self, FieldError> {
        let name = local.metadata.name.clone().unwrap_or_default();
        let (type_, extra) = match local.type_.as_deref() {
            Some(SERVICE_ACCOUNT_TOKEN) => {
                let account = local
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(SERVICE_ACCOUNT_NAME))
                    .cloned()
                    .unwrap_or_default();
                if account.len() > 63 {
                    return Err(liqo_types::field::bad(
                        super::meta::annotation_field(SERVICE_ACCOUNT_NAME),
                        format!("{account:?} is longer than a label value may be (63 characters)"),
                    ));
                }
                (
                    Some(OPAQUE.to_owned()),
                    vec![(SERVICE_ACCOUNT_NAME.to_owned(), account)],
                )
            }
            other => (other.map(str::to_owned), Vec::new()),
        };
        Ok(Secret {
            metadata: meta::remote(&local.metadata, name, ctx, extra),
            data: local.data.clone(),
            string_data: None,
            type_,
            immutable: local.immutable,
        })
    }

    fn exact() -> &'static [&'static [&'static str]] {
        &[
            &["metadata", "labels"],
            &["metadata", "annotations"],
            &["data"],
        ]
    }
}
