//! The storage fabric's guard for `unoffload namespace` and `unpeer`: the claims of class
//! `liqo` whose data lives on a provider (bound on a virtual node) are found first; the command
//! is refused naming each (and how to move it home or let it go) unless
//! `--delete-remote-volumes` was given, which deletes them by name before going on (their
//! copies on the provider, and the data, go with them).
//!
//! It never deletes a claim that was not named in what it printed, nor one bound on a node of
//! this cluster.

use std::collections::BTreeSet;

use control::{
    api::discovery::ForeignCluster,
    consts::{labels, values},
    storage,
};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Preconditions},
};

use crate::client::ApiFailure;

/// Why the guard stopped a command.
#[derive(Debug, thiserror::Error)]
pub enum VolumesError {
    /// Claims hold data on a provider, and `--delete-remote-volumes` was not given.
    #[error("{0}")]
    Held(String),
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
}

/// The claims among `claims` of class `liqo` bound on one of `virtual_nodes`, by namespace and
/// name (those already being deleted are going anyway).
pub fn held(claims: &[PersistentVolumeClaim], virtual_nodes: &BTreeSet<String>) -> Vec<Held> {
    let mut out: Vec<Held> = claims
        .iter()
        .filter(|c| storage::is_virtual(c) && c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| {
            let node = storage::selected_node(c)?;
            virtual_nodes.contains(node).then(|| Held {
                namespace: c.namespace().unwrap_or_default(),
                name: c.name_any(),
                uid: c.uid().unwrap_or_default(),
                node: node.to_owned(),
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
    let first = &held[0];
    format!(
        "refusing to {command}: {} claim(s) of class liqo hold data on a provider: {}. Nothing was \
         changed. Move each home first ({program} move volume {} --namespace {} --node <a node \
         of this cluster>), or delete them and their data with {command} \
         --delete-remote-volumes",
        held.len(),
        list.join(", "),
        first.name,
        first.namespace,
    )
}

async fn virtual_nodes(
    client: &Client,
    peer: Option<&str>,
) -> Result<BTreeSet<String>, VolumesError> {
    let mut selector = format!("{}={}", labels::NODE_TYPE, values::VIRTUAL_NODE);
    if let Some(fc) = peer {
        let found = Api::<ForeignCluster>::all(client.clone())
            .get_opt(fc)
            .await
            .map_err(kube_err(format!("reading ForeignCluster {fc}")))?;
        let Some(found) = found else {
            // No such peer: nothing of it to guard (the command itself reports the name).
            return Ok(BTreeSet::new());
        };
        selector.push_str(&format!(
            ",{}={}",
            labels::REMOTE_CLUSTER_ID,
            found.spec.cluster_identity.cluster_id
        ));
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
    let (namespace, peer) = match scope {
        Scope::Namespace(ns) => (Some(ns), None),
        Scope::Peer(fc) => (None, Some(fc)),
    };
    let nodes = virtual_nodes(client, peer).await?;
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
    if held.is_empty() {
        return Ok(());
    }
    if !delete {
        return Err(VolumesError::Held(refusal(command, program, &held)));
    }
    for h in &held {
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(h.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
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
    Ok(())
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
        let nodes = BTreeSet::from(["liqo-milan".to_owned()]);
        let claims = [
            claim("demo", "logs", "liqo", "liqo-milan", false),
            claim("demo", "data", "liqo", "liqo-milan", false),
            claim("demo", "local", "liqo", "n0", false),
            claim("demo", "other", "standard", "liqo-milan", false),
            claim("demo", "going", "liqo", "liqo-milan", true),
        ];
        let h = held(&claims, &nodes);
        let names: Vec<&str> = h.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["data", "logs"]);
        assert_eq!(h[0].uid, "u-data");
        let line = refusal("unoffload namespace demo", "liqoctl", &h);
        assert_eq!(
            line,
            "refusing to unoffload namespace demo: 2 claim(s) of class liqo hold data on a \
             provider: demo/data (on liqo-milan), demo/logs (on liqo-milan). Nothing was changed. \
             Move each home first (liqoctl move volume data --namespace demo --node <a node of \
             this cluster>), or delete them and their data with unoffload namespace demo \
             --delete-remote-volumes"
        );
    }
}
