//! Which local namespaces are offloaded to this provider, and under which remote names: the
//! `Accepted` entries of the `currentMapping` of our NamespaceMaps for the provider (in the
//! tenant namespace, labelled `liqo.io/remote-cluster-id=<provider>`; the provider's
//! NamespaceMap controller fills their status, the replicator brings it back).

use std::collections::BTreeMap;

use control::api::virtualkubelet::{MappingPhase, NamespaceMap};
use kube::{Api, api::ListParams};

use crate::VkConfig;

/// Local namespace → remote namespace.
pub type Mapping = BTreeMap<String, String>;

/// The label selector of the provider's NamespaceMaps.
pub fn selector(cfg: &VkConfig) -> String {
    format!(
        "{}={}",
        control::consts::labels::REMOTE_CLUSTER_ID,
        cfg.foreign.cluster_id.as_str()
    )
}

/// The accepted entries of `maps` (a local namespace in several maps: the first wins, by
/// map name).
pub fn accepted<'a>(maps: impl IntoIterator<Item = &'a NamespaceMap>) -> Mapping {
    let mut maps: Vec<&NamespaceMap> = maps.into_iter().collect();
    maps.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut out = Mapping::new();
    for map in maps {
        let Some(status) = &map.status else { continue };
        for (local, s) in &status.current_mapping {
            if s.phase == Some(MappingPhase::Accepted)
                && let Some(remote) = &s.remote_namespace
            {
                out.entry(local.clone()).or_insert_with(|| remote.clone());
            }
        }
    }
    out
}

/// The remote namespace of `local`, read now from the API server (for one-off requests such
/// as a log; reflection keeps its own watch).
pub async fn remote_namespace(cfg: &VkConfig, local: &str) -> Result<Option<String>, kube::Error> {
    let api: Api<NamespaceMap> = Api::namespaced(cfg.local.clone(), &cfg.tenant_namespace);
    let maps = api
        .list(&ListParams::default().labels(&selector(cfg)))
        .await?;
    Ok(accepted(&maps.items).remove(local))
}

#[cfg(test)]
mod tests {
    use control::api::virtualkubelet::{
        NamespaceMapSpec, NamespaceMapStatus, RemoteNamespaceStatus,
    };

    use super::*;

    fn map(name: &str, entries: &[(&str, &str, MappingPhase)]) -> NamespaceMap {
        let mut m = NamespaceMap::new(name, NamespaceMapSpec::default());
        m.status = Some(NamespaceMapStatus {
            current_mapping: entries
                .iter()
                .map(|(l, r, p)| {
                    (
                        l.to_string(),
                        RemoteNamespaceStatus {
                            remote_namespace: Some(r.to_string()),
                            phase: Some(*p),
                        },
                    )
                })
                .collect(),
        });
        m
    }

    #[test]
    fn only_accepted_entries_count_and_the_first_map_by_name_wins() {
        let a = map(
            "a",
            &[
                ("demo", "demo-rome", MappingPhase::Accepted),
                ("clash", "clash", MappingPhase::CreationLoopBackOff),
                ("gone", "gone", MappingPhase::Terminating),
            ],
        );
        let b = map("b", &[("demo", "other", MappingPhase::Accepted)]);
        let got = accepted([&b, &a]);
        assert_eq!(
            got,
            Mapping::from([("demo".to_owned(), "demo-rome".to_owned())])
        );
    }
}
