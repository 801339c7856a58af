//! The operators' objects and command lines in the harness test: TunnelEndpoints made by hand,
//! their connection and finalizers read back.

use std::path::Path;

use control::{
    api::net::{ConnectionStatus, TunnelEndpoint},
    consts::net,
};
use kube::{
    Api, Client,
    api::{DynamicObject, PostParams},
};
use liqo_peering::{Peering, Peerings};
use liqo_types::{PeerView, PublicKey};

use super::wait::eventually;

/// The nodes the test makes: the gateway's, and another.
pub(crate) const NODES: [&str; 2] = ["ops-gw", "ops-n1"];

pub(crate) fn key(b: u8) -> PublicKey {
    PublicKey([b; 32])
}

/// A TunnelEndpoint to `peer` in `liqo-tenant-<peer>`; `b` makes its ranges and key.
pub(crate) fn tep(peer: &str, b: u8, public_key: &str) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "net.liqo.io/v1alpha1", "kind": "TunnelEndpoint",
        "metadata": {"name": peer, "namespace": format!("liqo-tenant-{peer}"),
            "labels": {net::TEP_CLUSTER_ID_LABEL: peer}},
        "spec": {
            "clusterID": peer,
            "localPodCIDR": "10.244.0.0/16", "localNATPodCIDR": "10.50.0.0/16",
            "localExternalCIDR": "10.201.0.0/16", "localNATExternalCIDR": "None",
            "remotePodCIDR": "10.244.0.0/16", "remoteNATPodCIDR": format!("10.{b}.0.0/16"),
            "remoteExternalCIDR": "10.201.0.0/16",
            "remoteNATExternalCIDR": format!("10.{}.0.0/16", u16::from(b) + 100),
            "endpointIP": "198.18.0.2", "backendType": "wireguard",
            "backend_config": {"publicKey": public_key, "port": "51840"},
        },
    }))
    .unwrap()
}

/// The record milan's TunnelEndpoint stands for, written out by hand.
pub(crate) fn milan_peering() -> Peerings {
    let c = |s: &str| s.parse().unwrap();
    Peerings::from([(
        "milan".parse().unwrap(),
        Peering {
            view: PeerView {
                remote_pods: c("10.71.0.0/16"),
                remote_external: c("10.171.0.0/16"),
                local_pods_at_peer: c("10.50.0.0/16"),
                local_external_at_peer: c("10.201.0.0/16"),
            },
            public_key: key(71),
            endpoint: Some("198.18.0.2:51840".parse().unwrap()),
        },
    )])
}

pub(crate) fn teps(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &liqo_netops::kube::tep_resource())
}

pub(crate) async fn create_tep(client: &Client, obj: &DynamicObject) {
    let ns = obj.metadata.namespace.clone().unwrap();
    teps(client, &ns)
        .create(&PostParams::default(), obj)
        .await
        .unwrap();
}

/// The TunnelEndpoint's connection state and message, or why not yet.
pub(crate) async fn connection(
    client: &Client,
    peer: &str,
) -> Result<(ConnectionStatus, String), String> {
    let t = Api::<TunnelEndpoint>::namespaced(client.clone(), &format!("liqo-tenant-{peer}"))
        .get(peer)
        .await
        .map_err(|e| e.to_string());
    // A TunnelEndpoint with a bad field does not decode typed: read its status untyped.
    let status = match t {
        Ok(t) => serde_json::to_value(t.status).unwrap(),
        Err(_) => teps(client, &format!("liqo-tenant-{peer}"))
            .get(peer)
            .await
            .map_err(|e| e.to_string())?
            .data["status"]
            .clone(),
    };
    let c = &status["connection"];
    let s: ConnectionStatus = serde_json::from_value(c["status"].clone())
        .map_err(|_| format!("no connection: {status}"))?;
    Ok((
        s,
        c["statusMessage"].as_str().unwrap_or_default().to_owned(),
    ))
}

pub(crate) async fn want(client: &Client, peer: &str, state: ConnectionStatus, message: &str) {
    eventually(30, &format!("{peer} {state:?} ({message})"), || async {
        match connection(client, peer).await? {
            (s, m) if s == state && m.contains(message) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

pub(crate) async fn finalizers(client: &Client, peer: &str) -> Option<Vec<String>> {
    teps(client, &format!("liqo-tenant-{peer}"))
        .get_opt(peer)
        .await
        .unwrap()
        .map(|o| o.metadata.finalizers.unwrap_or_default())
}

pub(crate) async fn gone(client: &Client, peer: &str) {
    eventually(30, &format!("TunnelEndpoint {peer} gone"), || async {
        match finalizers(client, peer).await {
            None => Ok(()),
            Some(f) => Err(format!("still there, finalizers {f:?}")),
        }
    })
    .await;
}

pub(crate) fn s(x: impl std::fmt::Display) -> String {
    x.to_string()
}

pub(crate) fn gateway_args(
    base: &Path,
    files: Option<(&Path, &str, &Path, &str)>,
    metrics: u16,
) -> Vec<String> {
    let mut a = vec![
        s("-n"),
        s("liqo"),
        s("--node-name"),
        s(NODES[0]),
        s("--base-config"),
        s(base.display()),
        s("--metrics-listen"),
        format!("127.0.0.1:{metrics}"),
    ];
    match files {
        None => a.push(s("--fake-dataplane")),
        Some((config, url, key, ipam)) => a.extend([
            s("--config"),
            s(config.display()),
            s("--gateway-status-url"),
            s(url),
            s("--private-key-file"),
            s(key.display()),
            s("--ipam-address"),
            s(ipam),
        ]),
    }
    a
}

pub(crate) fn route_args(node: &str, base: &Path, files: Option<(&Path, &str)>) -> Vec<String> {
    let mut a = vec![
        s("--node-name"),
        s(node),
        s("--base-config"),
        s(base.display()),
    ];
    match files {
        None => a.push(s("--fake-dataplane")),
        Some((config, url)) => a.extend([
            s("--config"),
            s(config.display()),
            s("--overlay-status-url"),
            s(url),
        ]),
    }
    a
}

/// Waits until every finalizer of `which` is on `peer`'s TunnelEndpoint.
pub(crate) async fn held(client: &Client, peer: &str, which: &[&str]) {
    eventually(30, &format!("the finalizers on {peer}"), || async {
        let f = finalizers(client, peer).await.unwrap_or_default();
        if which.iter().all(|x| f.iter().any(|y| y == x)) {
            Ok(())
        } else {
            Err(format!("{f:?}"))
        }
    })
    .await;
}
