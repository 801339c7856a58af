//! Whether the remote end is the cluster a ForeignCluster names: its auth service's `GET /ids`
//! before any token is sent, and, once an identity is signed, the tenant namespace behind it
//! (annotation [`HOST_CLUSTER_ID`](crate::consts::annotations::HOST_CLUSTER_ID), read through
//! the identity at the API server the provider gave). Pure: the callers fetch.

use super::ClusterInfo;
use crate::api::ClusterId;

/// The remote end answers for another cluster than expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{place} answers for cluster {found}, not {expected}")]
pub struct WrongCluster {
    /// What answered (`the auth service at <url>`, `the API server at <url> (namespace X)`).
    pub place: String,
    /// The cluster ID expected (the ForeignCluster's, or `--cluster-id`).
    pub expected: ClusterId,
    /// What it answered: a cluster ID (with its name when known), or that it said none.
    pub found: String,
}

/// The auth service at `url` answered `/ids` with `info`: it must be cluster `expected`.
pub fn auth_service(
    url: &str,
    expected: &ClusterId,
    info: &ClusterInfo,
) -> Result<(), WrongCluster> {
    if info.cluster_id == *expected {
        return Ok(());
    }
    Err(WrongCluster {
        place: format!("the auth service at {url}"),
        expected: expected.clone(),
        found: format!("{} ({})", info.cluster_id, info.cluster_name),
    })
}

/// The tenant namespace `namespace` read at the API server `api_server` through our identity
/// carries `host` (its host-cluster-id annotation): it must be cluster `expected`. (A namespace
/// without the annotation cannot be checked: the caller asks again, it is no mismatch.)
pub fn api_server(
    api_server: &str,
    namespace: &str,
    expected: &ClusterId,
    host: &str,
) -> Result<(), WrongCluster> {
    if host == expected.as_str() {
        return Ok(());
    }
    Err(WrongCluster {
        place: format!("the API server at {api_server} (tenant namespace {namespace})"),
        expected: expected.clone(),
        found: host.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROME: &str = "3f1e7f52-6b8a-4d4c-9a0f-1c2d3e4f5a6b";
    const MILAN: &str = "b07938e3-d241-460c-a77b-e286c0f733c7";

    #[test]
    fn the_auth_service_must_answer_for_the_cluster_named() {
        let milan = ClusterInfo {
            cluster_id: MILAN.parse().unwrap(),
            cluster_name: "milan".parse().unwrap(),
        };
        auth_service("https://m", &MILAN.parse().unwrap(), &milan).unwrap();
        let e = auth_service("https://m", &ROME.parse().unwrap(), &milan).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the auth service at https://m answers for cluster {MILAN} (milan), not {ROME}"
            )
        );
    }

    #[test]
    fn the_api_server_must_be_the_cluster_named() {
        let rome: ClusterId = ROME.parse().unwrap();
        api_server("https://a", "liqo-tenant-x", &rome, ROME).unwrap();
        let e = api_server("https://a", "liqo-tenant-x", &rome, MILAN).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the API server at https://a (tenant namespace liqo-tenant-x) answers for \
                 cluster {MILAN}, not {ROME}"
            )
        );
    }
}
