//! What wakes the network manager for one ForeignCluster: a NetworkConfig (ours, labelled
//! `liqo.io/remoteID=<peer>`, or a peer's copy, `liqo.io/originID=<peer>`) or a TunnelEndpoint
//! (`clusterID=<peer>`) event reconciles the ForeignCluster of that peer only; the key Secret
//! and the gateway Services (which concern every peer) wake them all
//! ([`super::controller_trigger`]).

use std::collections::BTreeMap;

use control::{
    api::{
        discovery::ForeignCluster,
        net::{NetworkConfig, TunnelEndpoint},
    },
    consts::{labels, net, values},
};
use kube::{
    Api, Client, ResourceExt,
    api::DynamicObject,
    core::ApiResource,
    runtime::{Controller, reflector::ObjectRef, reflector::Store, watcher},
};

/// The peer a NetworkConfig is about: a copy's origin, else (ours) its remote.
pub fn network_config_peer(labels: &BTreeMap<String, String>) -> Option<&str> {
    let copy = labels.get(labels::REPLICATED).map(String::as_str) == Some(values::TRUE);
    let key = if copy {
        labels::ORIGIN_ID
    } else {
        labels::REMOTE_ID
    };
    labels.get(key).map(String::as_str)
}

/// The peer a TunnelEndpoint is about.
pub fn tunnel_peer(labels: &BTreeMap<String, String>) -> Option<&str> {
    labels.get(net::TEP_CLUSTER_ID_LABEL).map(String::as_str)
}

/// The ForeignClusters of `peer` (by `spec.clusterIdentity.clusterID`) among `fcs`.
pub fn foreign_clusters_of<'a>(
    fcs: impl IntoIterator<Item = &'a ForeignCluster>,
    peer: Option<&str>,
) -> Vec<ObjectRef<ForeignCluster>> {
    let Some(peer) = peer else { return Vec::new() };
    fcs.into_iter()
        .filter(|fc| fc.spec.cluster_identity.cluster_id.as_str() == peer)
        .map(ObjectRef::from_obj)
        .collect()
}

fn mapped(store: &Store<ForeignCluster>, peer: Option<&str>) -> Vec<ObjectRef<ForeignCluster>> {
    let fcs = store.state();
    foreign_clusters_of(fcs.iter().map(AsRef::as_ref), peer)
}

/// The network manager's controller, woken per peer by NetworkConfig and TunnelEndpoint
/// events (read as raw objects: a peer's bad value never breaks the watch).
pub fn watch_peers(c: Controller<ForeignCluster>, client: &Client) -> Controller<ForeignCluster> {
    let nc = ApiResource::erase::<NetworkConfig>(&());
    let tep = ApiResource::erase::<TunnelEndpoint>(&());
    let (s1, s2) = (c.store(), c.store());
    c.watches_with(
        Api::<DynamicObject>::all_with(client.clone(), &nc),
        nc,
        watcher::Config::default(),
        move |o: DynamicObject| mapped(&s1, network_config_peer(o.labels())),
    )
    .watches_with(
        Api::<DynamicObject>::all_with(client.clone(), &tep),
        tep,
        watcher::Config::default(),
        move |o: DynamicObject| mapped(&s2, tunnel_peer(o.labels())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn fc(name: &str, id: &str) -> ForeignCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": name},
            "spec": {"clusterIdentity": {"clusterID": id, "clusterName": name},
                "foreignAuthUrl": "https://127.0.0.1:1"},
        }))
        .unwrap()
    }

    #[test]
    fn each_object_names_its_peer() {
        // Ours: remoteID; a copy: originID (its remoteID is us).
        let ours = l(&[(labels::REPLICATION, "true"), (labels::REMOTE_ID, "milan")]);
        assert_eq!(network_config_peer(&ours), Some("milan"));
        let copy = l(&[
            (labels::REPLICATED, "true"),
            (labels::ORIGIN_ID, "milan"),
            (labels::REMOTE_ID, "rome"),
        ]);
        assert_eq!(network_config_peer(&copy), Some("milan"));
        assert_eq!(network_config_peer(&l(&[])), None);
        assert_eq!(
            tunnel_peer(&l(&[(net::TEP_CLUSTER_ID_LABEL, "milan")])),
            Some("milan")
        );
    }

    #[test]
    fn an_event_wakes_the_peers_foreign_cluster_only() {
        let fcs = [fc("milan", "milan-id"), fc("naples", "naples-id")];
        let refs = foreign_clusters_of(&fcs, Some("milan-id"));
        assert_eq!(refs, [ObjectRef::from_obj(&fcs[0])]);
        assert!(foreign_clusters_of(&fcs, Some("turin-id")).is_empty());
        assert!(foreign_clusters_of(&fcs, None).is_empty());
    }
}
