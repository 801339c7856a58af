//! The storage fabric's guard for `unoffload namespace` and `unpeer`: the claims of class
//! `liqo` whose data lives on a provider (bound on a virtual node) are found first; the command
//! is refused naming each (and how to let it go) unless `--delete-remote-volumes` was given,
//! which deletes them by name and waits until the virtual kubelet reports each copy deleted
//! (an Event `RemoteCopyDeleted` on the claim) before going on: the provider keeps a namespace
//! that holds a copy not being deleted.
//!
//! It never deletes a claim that was not named in what it printed, nor one bound on a node of
//! this cluster.

use std::collections::BTreeSet;

use control::{
    api::discovery::ForeignCluster,
    consts::{labels, values},
    storage,
};
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolumeClaim};
use kube::{Api, Client, ResourceExt, api::ListParams};

use crate::client::ApiFailure;

/// Why the guard stopped a command.
#[derive(Debug, thiserror::Error)]
pub enum VolumesError {
    /// Claims hold data on a provider, and `--delete-remote-volumes` was not given.
    #[error("{0}")]
    Held(String),
    /// A copy was not reported deleted by the virtual kubelet in time.
    #[error(
        "the copies of {0} were not reported deleted within {COPY_WAIT:?} (is the virtual \
         kubelet of their node running?): the claims are marked for deletion; nothing else was \
         changed"
    )]
    CopiesKept(String),
    /// A call to the apiserver failed.
    #[error("{what}")]
    Kube {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: ApiFailure,
    },
}

/// How long the copies' deletion is waited for.
pub const COPY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> VolumesError {
    let what = what.into();
    move |e| VolumesError::Kube {
        what,
        source: e.into(),
    }
}

/// Where the guard looks.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// The claims of one namespace, on any virtual node (`unoffload namespace`).
    Namespace(&'a str),
    /// Every claim on the virtual node of one ForeignCluster (`unpeer`).
    Peer(&'a str),
    /// Every claim on the virtual node of one cluster, by ID (`unpeer in-band`).
    Cluster(&'a str),
}

/// A claim of class `liqo` whose data lives on a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID (the deletion's precondition).
    pub uid: String,
    /// The virtual node it is bound on.
    pub node: String,
    /// Whether it is marked for deletion already (going: not refused for, but its copy's
    /// deletion is waited for).
    pub deleting: bool,
}

/// The claims among `claims` of class `liqo` bound on one of `virtual_nodes`, by namespace and
/// name (those marked for deletion too, [`Held::deleting`]).
pub fn held(claims: &[PersistentVolumeClaim], virtual_nodes: &BTreeSet<String>) -> Vec<Held> {
    let mut out: Vec<Held> = claims
        .iter()
        .filter(|c| storage::is_virtual(c))
        .filter_map(|c| {
            let node = storage::selected_node(c)?;
            virtual_nodes.contains(node).then(|| Held {
                namespace: c.namespace().unwrap_or_default(),
                name: c.name_any(),
                uid: c.uid().unwrap_or_default(),
                node: node.to_owned(),
                deleting: c.metadata.deletion_timestamp.is_some(),
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

/// The refusal of `command` (`unoffload namespace demo`) for the claims `held`.
pub fn refusal(command: &str, program: &str, held: &[Held]) -> String {
    let list: Vec<String> = held
        .iter()
        .map(|h| format!("{}/{} (on {})", h.namespace, h.name, h.node))
        .collect();
    format!(
        "refusing to {command}: {} claim(s) of class liqo hold data on a provider: {}. Nothing was \
         changed. Copy the data out first if you need it, then delete them and their data with \
         {program} {command} --delete-remote-volumes",
        held.len(),
        list.join(", "),
    )
}

async fn virtual_nodes(
    client: &Client,
    scope: Scope<'_>,
) -> Result<BTreeSet<String>, VolumesError> {
    let mut selector = format!("{}={}", labels::NODE_TYPE, values::VIRTUAL_NODE);
    let id = match scope {
        Scope::Namespace(_) => None,
        Scope::Cluster(id) => Some(id.to_owned()),
        Scope::Peer(fc) => {
            let found = Api::<ForeignCluster>::all(client.clone())
                .get_opt(fc)
                .await
                .map_err(kube_err(format!("reading ForeignCluster {fc}")))?;
            let Some(found) = found else {
                // No such peer: nothing of it to guard (the command itself reports the name).
                return Ok(BTreeSet::new());
            };
            Some(found.spec.cluster_identity.cluster_id.to_string())
        }
    };
    if let Some(id) = id {
        selector.push_str(&format!(",{}={id}", labels::REMOTE_CLUSTER_ID));
    }
    Ok(Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(kube_err("listing the virtual nodes"))?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect())
}

/// The guard of `command` over `scope`: refused while claims hold data on a provider, unless
/// `delete` (`--delete-remote-volumes`): then each is deleted by name (UID precondition) and
/// said so.
pub async fn guard(
    client: &Client,
    scope: Scope<'_>,
    delete: bool,
    command: &str,
    program: &str,
) -> Result<(), VolumesError> {
    let namespace = match scope {
        Scope::Namespace(ns) => Some(ns),
        Scope::Peer(_) | Scope::Cluster(_) => None,
    };
    let nodes = virtual_nodes(client, scope).await?;
    if nodes.is_empty() {
        return Ok(());
    }
    let api: Api<PersistentVolumeClaim> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let claims = api
        .list(&ListParams::default())
        .await
        .map_err(kube_err("listing the claims"))?
        .items;
    let held = held(&claims, &nodes);
    let live: Vec<&Held> = held.iter().filter(|h| !h.deleting).collect();
    if !live.is_empty() && !delete {
        let live: Vec<Held> = live.into_iter().cloned().collect();
        return Err(VolumesError::Held(refusal(command, program, &live)));
    }
    for h in live {
        let dp = control::requests::delete_by_uid(&h.uid);
        match Api::<PersistentVolumeClaim>::namespaced(client.clone(), &h.namespace)
            .delete(&h.name, &dp)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(kube_err(format!(
                    "deleting claim {}/{}",
                    h.namespace, h.name
                ))(e));
            }
        }
        println!(
            "Claim {}/{} deleted (--delete-remote-volumes): its data on {} goes once its pods \
             are gone",
            h.namespace, h.name, h.node
        );
    }
    wait_copies_deleted(client, &held).await
}

/// Waits until the virtual kubelet reported each copy deleted, or that there is none (an Event
/// on the claim, also once the claim is gone): only then may the offloading go (a provider
/// keeps a namespace holding a copy that is not being deleted).
async fn wait_copies_deleted(client: &Client, held: &[Held]) -> Result<(), VolumesError> {
    let deadline = tokio::time::Instant::now() + COPY_WAIT;
    let mut left: Vec<&Held> = held.iter().collect();
    loop {
        let mut still = Vec::new();
        for h in left {
            if !copy_deleted(client, h).await? {
                still.push(h);
            }
        }
        if still.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let names: Vec<String> = still
                .iter()
                .map(|h| format!("{}/{}", h.namespace, h.name))
                .collect();
            return Err(VolumesError::CopiesKept(names.join(", ")));
        }
        left = still;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

async fn copy_deleted(client: &Client, h: &Held) -> Result<bool, VolumesError> {
    let events = Api::<Event>::namespaced(client.clone(), &h.namespace)
        .list(&ListParams::default().fields(&format!(
            "involvedObject.uid={},reason={}",
            h.uid,
            control::consts::storage::REASON_COPY_DELETED
        )))
        .await
        .map_err(kube_err(format!(
            "listing the Events of claim {}/{}",
            h.namespace, h.name
        )))?;
    Ok(!events.items.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(
        ns: &str,
        name: &str,
        class: &str,
        node: &str,
        deleting: bool,
    ) -> PersistentVolumeClaim {
        let mut c: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "uid": format!("u-{name}"),
                         "annotations": {"volume.kubernetes.io/selected-node": node}},
            "spec": {"storageClassName": class}
        }))
        .unwrap();
        if deleting {
            c.metadata.deletion_timestamp =
                Some(serde_json::from_value(json!("2026-11-30T00:00:00Z")).unwrap());
        }
        c
    }

    #[test]
    fn only_liqo_claims_on_virtual_nodes_are_held_and_the_refusal_names_each() {
        // (One marked for deletion is held too, as going.)
        let nodes = BTreeSet::from(["liqo-milan".to_owned()]);
        let claims = [
            claim("demo", "logs", "liqo", "liqo-milan", false),
            claim("demo", "data", "liqo", "liqo-milan", false),
            claim("demo", "local", "liqo", "n0", false),
            claim("demo", "other", "standard", "liqo-milan", false),
            claim("demo", "going", "liqo", "liqo-milan", true),
        ];
        let h = held(&claims, &nodes);
        let names: Vec<(&str, bool)> = h.iter().map(|h| (h.name.as_str(), h.deleting)).collect();
        assert_eq!(names, [("data", false), ("going", true), ("logs", false)]);
        assert_eq!(h[0].uid, "u-data");
        let live: Vec<Held> = h.into_iter().filter(|h| !h.deleting).collect();
        let line = refusal("unoffload namespace demo", "liqoctl", &live);
        assert_eq!(
            line,
            "refusing to unoffload namespace demo: 2 claim(s) of class liqo hold data on a \
             provider: demo/data (on liqo-milan), demo/logs (on liqo-milan). Nothing was changed. \
             Copy the data out first if you need it, then delete them and their data with \
             liqoctl unoffload namespace demo --delete-remote-volumes"
        );
    }
}
