//! The local cluster's identity: ConfigMap `liqo-clusterid-configmap` in the Liqo namespace,
//! keys `CLUSTER_ID` and `CLUSTER_NAME`. Written by the installer; read here by every
//! component.

use std::collections::BTreeMap;

use control::{
    api::{ClusterId, ClusterName, InvalidId, discovery::ClusterIdentity},
    consts::{keys, objects},
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

/// Why the local identity cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The ConfigMap does not exist.
    #[error(
        "ConfigMap {namespace}/{name} not found: the cluster identity is created at install",
        name = objects::CLUSTER_ID_CONFIGMAP
    )]
    NotFound {
        /// The Liqo namespace.
        namespace: String,
    },
    /// Reading it failed.
    #[error("reading ConfigMap {namespace}/{name}", name = objects::CLUSTER_ID_CONFIGMAP)]
    Read {
        /// The Liqo namespace.
        namespace: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A key is missing or empty.
    #[error("ConfigMap {name} has no {key:?} (data keys {CLUSTER_ID:?} and {CLUSTER_NAME:?} are required)",
        name = objects::CLUSTER_ID_CONFIGMAP, CLUSTER_ID = keys::CLUSTER_ID, CLUSTER_NAME = keys::CLUSTER_NAME)]
    MissingKey {
        /// The key.
        key: &'static str,
    },
    /// A key holds an invalid value.
    #[error("ConfigMap {name} key {key:?} = {value:?} is invalid", name = objects::CLUSTER_ID_CONFIGMAP)]
    BadKey {
        /// The key.
        key: &'static str,
        /// Its value.
        value: String,
        /// Why.
        #[source]
        source: InvalidId,
    },
}

/// The local cluster's identity, from the ConfigMap in namespace `ns`.
pub async fn local_identity(client: &Client, ns: &str) -> Result<ClusterIdentity, IdentityError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm = api
        .get_opt(objects::CLUSTER_ID_CONFIGMAP)
        .await
        .map_err(|source| IdentityError::Read {
            namespace: ns.to_owned(),
            source,
        })?
        .ok_or_else(|| IdentityError::NotFound {
            namespace: ns.to_owned(),
        })?;
    identity_from_data(cm.data.as_ref())
}

/// The identity in the ConfigMap's data.
pub fn identity_from_data(
    data: Option<&BTreeMap<String, String>>,
) -> Result<ClusterIdentity, IdentityError> {
    fn field<T: std::str::FromStr<Err = InvalidId>>(
        data: Option<&BTreeMap<String, String>>,
        key: &'static str,
    ) -> Result<T, IdentityError> {
        let value = data
            .and_then(|d| d.get(key))
            .filter(|v| !v.is_empty())
            .ok_or(IdentityError::MissingKey { key })?;
        value.parse().map_err(|source| IdentityError::BadKey {
            key,
            value: value.clone(),
            source,
        })
    }
    Ok(ClusterIdentity {
        cluster_id: field::<ClusterId>(data, keys::CLUSTER_ID)?,
        cluster_name: field::<ClusterName>(data, keys::CLUSTER_NAME)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn reads_both_keys() {
        let d = data(&[
            ("CLUSTER_ID", "0b5f6ad8-5d4b-4a5e-9c1e-1f2a3b4c5d6e"),
            ("CLUSTER_NAME", "milan"),
        ]);
        let id = identity_from_data(Some(&d)).unwrap();
        assert_eq!(id.cluster_name.as_str(), "milan");
        assert_eq!(
            id.cluster_id.as_str(),
            "0b5f6ad8-5d4b-4a5e-9c1e-1f2a3b4c5d6e"
        );
    }

    #[test]
    fn names_the_missing_or_bad_key() {
        let e = identity_from_data(None).unwrap_err().to_string();
        assert!(e.contains("has no \"CLUSTER_ID\""), "{e}");
        let d = data(&[("CLUSTER_ID", "abc"), ("CLUSTER_NAME", "")]);
        let e = identity_from_data(Some(&d)).unwrap_err().to_string();
        assert!(e.contains("has no \"CLUSTER_NAME\""), "{e}");
        let d = data(&[("CLUSTER_ID", "Not_Valid"), ("CLUSTER_NAME", "milan")]);
        let e = identity_from_data(Some(&d)).unwrap_err();
        assert!(
            e.to_string().contains("\"CLUSTER_ID\" = \"Not_Valid\""),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
    }
}
