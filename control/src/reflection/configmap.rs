//! ConfigMaps: copied whole (data, binary data, immutability); the home root CA
//! (`kube-root-ca.crt`) goes under the name the offloaded pods' projections use
//! (`kube-root-ca.crt.<first five characters of the home cluster ID>`), beside the
//! provider's own.

use k8s_openapi::api::core::v1::ConfigMap;
use liqo_types::{FieldError, field::bad};

use super::{Ctx, Inputs, Kind, Reflect, Skip, meta};
use crate::shadowpod::consumer::{ROOT_CA_CONFIG_MAP, remote_config_map_name};

impl Reflect for ConfigMap {
    const KIND: Kind = Kind::ConfigMap;

    fn remote_name(local: &str, ctx: &Ctx<'_>) -> String {
        remote_config_map_name(local, ctx.home)
    }

    fn local_name(remote: &str, ctx: &Ctx<'_>) -> Option<String> {
        if remote == ROOT_CA_CONFIG_MAP {
            // The provider's own root CA: no local object is reflected under this name.
            return None;
        }
        if remote == remote_config_map_name(ROOT_CA_CONFIG_MAP, ctx.home) {
            return Some(ROOT_CA_CONFIG_MAP.to_owned());
        }
        Some(remote.to_owned())
    }

    /// A local ConfigMap named like the root CA's copy would take its place: refused (the
    /// two would replace each other's copy forever).
    fn skip(local: &Self, ctx: &Ctx<'_>, _inputs: &Inputs) -> Option<Skip> {
        let name = local.metadata.name.as_deref().unwrap_or_default();
        let root_ca = remote_config_map_name(ROOT_CA_CONFIG_MAP, ctx.home);
        (name == root_ca).then(|| {
            Skip::Refused(bad(
                "metadata.name",
                format!("{name:?} is the name of the root CA's copy on the provider"),
            ))
        })
    }

    fn forge(local: &Self, ctx: &Ctx<'_>, _inputs: &Inputs) -> Result<Self, FieldError> {
        let name = local.metadata.name.clone().unwrap_or_default();
        Ok(ConfigMap {
            metadata: meta::remote(&local.metadata, Self::remote_name(&name, ctx), ctx, []),
            data: local.data.clone(),
            binary_data: local.binary_data.clone(),
            immutable: local.immutable,
        })
    }

    fn exact() -> &'static [&'static [&'static str]] {
        &[
            &["metadata", "labels"],
            &["metadata", "annotations"],
            &["data"],
            &["binaryData"],
        ]
    }
}
