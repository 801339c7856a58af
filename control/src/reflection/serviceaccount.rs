//! ServiceAccounts: the name only (with the labels and annotations), so that the provider's
//! ServiceAccount admission accepts the offloaded pods that name one. `default` is never
//! reflected: every namespace has its own.

use k8s_openapi::api::core::v1::ServiceAccount;
use liqo_types::FieldError;

use super::{Ctx, Inputs, Kind, Reflect, Skip, meta};
use crate::shadowpod::consumer::DEFAULT_SERVICE_ACCOUNT;

impl Reflect for ServiceAccount {
    const KIND: Kind = Kind::ServiceAccount;

    fn local_name(remote: &str, _ctx: &Ctx<'_>) -> Option<String> {
        (remote != DEFAULT_SERVICE_ACCOUNT).then(|| remote.to_owned())
    }

    fn skip(local: &Self, _ctx: &Ctx<'_>, _inputs: &Inputs) -> Option<Skip> {
        (local.metadata.name.as_deref() == Some(DEFAULT_SERVICE_ACCOUNT)).then_some(Skip::Excluded(
            "every namespace has its own default ServiceAccount",
        ))
    }

    fn forge(local: &Self, ctx: &Ctx<'_>, _inputs: &Inputs) -> Result<Self, FieldError> {
        let name = local.metadata.name.clone().unwrap_or_default();
        Ok(ServiceAccount {
            metadata: meta::remote(&local.metadata, name, ctx, []),
            // The pods' tokens are the home cluster's: the provider mounts none of its own.
            automount_service_account_token: Some(false),
            ..ServiceAccount::default()
        })
    }
}
