//! `peer out-of-band`, `peer` and `unpeer`: write the ForeignCluster (and the remote token),
//! then watch the ForeignCluster and print each stage as [`crate::stages`] decides it, until
//! done, failed or `--timeout`. Their error, shared with [`crate::unpeer`] and the in-band
//! commands, is [`error`]'s.

use std::time::Duration;

use control::{
    api::{
        ClusterId, ClusterName,
        discovery::{
            ClusterIdentity, ForeignCluster, ForeignClusterSpec, NetworkingEnabled, PeeringEnabled,
        },
    },
    consts::labels,
    identity::AuthToken,
};
use futures::StreamExt;
use k8s_openapi::{api::core::v1::Node, apimachinery::pkg::apis::meta::v1::Time};
use kube::{
    Api, Client, Resource,
    api::{ListParams, Patch, PatchParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;

use crate::{
    cli::values::AuthUrl,
    consts::FIELD_MANAGER,
    stages::{self, NodeState, Outcome, Progress, Stage},
};

pub mod error;

pub use error::PeerError;
use error::kube_err;

/// How the peer is reached: its auth service, and in-band also the proxy to its API server.
#[derive(Debug, Clone, Copy)]
pub struct Reach<'a> {
    /// `spec.foreignAuthUrl`.
    pub auth_url: &'a str,
    /// `spec.foreignProxyUrl` (in-band only).
    pub proxy_url: Option<&'a str>,
}

/// The server-side apply body of a ForeignCluster, for `peer out-of-band` and `peer in-band`:
/// the cluster ID, the URLs and outgoing as given; the cluster name (else `peer`'s), incoming
/// (else `Auto`) and `insecureSkipTLSVerify` (else `true`: the auth service's certificate is
/// self-signed, and in-band its address is a mapped one) kept from `existing`. In-band (a proxy URL) also sets networking `Yes`:
/// the API traffic needs the tunnel.
pub fn foreign_cluster_apply(
    name: &str,
    peer: &ClusterIdentity,
    reach: Reach<'_>,
    outgoing: PeeringEnabled,
    existing: Option<&ForeignClusterSpec>,
) -> serde_json::Value {
    let peer = ClusterIdentity {
        cluster_id: peer.cluster_id.clone(),
        cluster_name: existing
            .map_or(&peer.cluster_name, |s| &s.cluster_identity.cluster_name)
            .clone(),
    };
    let incoming = existing.map_or(PeeringEnabled::Auto, |s| s.incoming_peering_enabled);
    let insecure = existing.is_none_or(|s| s.insecure_skip_tls_verify);
    let mut body = json!({
        "apiVersion": ForeignCluster::api_version(&()),
        "kind": ForeignCluster::kind(&()),
        "metadata": {
            "name": name,
            "labels": { labels::CLUSTER_ID: peer.cluster_id },
        },
        "spec": {
            "clusterIdentity": peer,
            "foreignAuthUrl": reach.auth_url,
            "outgoingPeeringEnabled": outgoing,
            "incomingPeeringEnabled": incoming,
            "insecureSkipTLSVerify": insecure,
        },
    });
    if let Some(proxy) = reach.proxy_url {
        body["spec"]["foreignProxyUrl"] = json!(proxy);
        body["spec"]["networkingEnabled"] = json!(NetworkingEnabled::Yes);
    }
    body
}

/// What `peer out-of-band` was given.
#[derive(Debug)]
pub struct OutOfBand<'a> {
    /// The ForeignCluster's name (the remote cluster's name).
    pub name: &'a ClusterName,
    /// The remote auth URL.
    pub auth_url: &'a AuthUrl,
    /// The remote cluster ID.
    pub cluster_id: &'a ClusterId,
    /// The remote token.
    pub token: &'a AuthToken,
    /// How long to wait.
    pub timeout: Duration,
}

/// `peer out-of-band`: checks everything before writing anything (own ID, name clash, that the
/// auth service at `--auth-url` answers for `--cluster-id`, the ForeignCluster by a server-side
/// dry run), then the token, the ForeignCluster, and waits.
pub async fn out_of_band(client: &Client, ns: &str, args: &OutOfBand<'_>) -> Result<(), PeerError> {
    let local = liqo_auth::cluster::local_identity(client, ns)
        .await
        .map_err(PeerError::Identity)?;
    if local.cluster_id == *args.cluster_id {
        return Err(PeerError::OwnCluster(args.cluster_id.clone()));
    }
    let fcs: Api<ForeignCluster> = Api::all(client.clone());
    // By spec, not by the `discovery.liqo.io/cluster-id` label: the controller adds that label
    // only on its first reconcile.
    let by_id = fcs
        .list(&ListParams::default())
        .await
        .map_err(kube_err("listing ForeignClusters"))?
        .items
        .into_iter()
        .filter(|fc| fc.spec.cluster_identity.cluster_id == *args.cluster_id)
        .min_by_key(|fc| {
            (
                fc.metadata.creation_timestamp.clone().map(|t| t.0),
                fc.metadata.name.clone(),
            )
        });
    let existing = match by_id {
        Some(fc) => Some(fc),
        None => fcs
            .get_opt(args.name.as_str())
            .await
            .map_err(kube_err(format!("reading ForeignCluster {}", args.name)))?,
    };
    if let Some(fc) = &existing
        && fc.spec.cluster_identity.cluster_id != *args.cluster_id
    {
        return Err(PeerError::NameTaken {
            name: args.name.to_string(),
            existing: fc.spec.cluster_identity.cluster_id.to_string(),
            wanted: args.cluster_id.clone(),
        });
    }
    let fc_name = existing
        .as_ref()
        .and_then(|fc| fc.metadata.name.clone())
        .unwrap_or_else(|| args.name.to_string());
    if fc_name != args.name.as_str() {
        println!(
            "ForeignCluster {fc_name:?} exists for cluster ID {}: updating it",
            args.cluster_id
        );
    }
    let spec = existing.as_ref().map(|fc| &fc.spec);
    let peer = ClusterIdentity {
        cluster_id: args.cluster_id.clone(),
        cluster_name: args.name.clone(),
    };
    let reach = Reach {
        auth_url: args.auth_url.as_str(),
        proxy_url: None,
    };
    let body = foreign_cluster_apply(&fc_name, &peer, reach, PeeringEnabled::Yes, spec);
    let what = format!("writing ForeignCluster {fc_name}");
    let since = stages::since_now();
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    // The apiserver checks the object (schema, auth URL pattern) before anything is written.
    fcs.patch(&fc_name, &apply.clone().dry_run(), &Patch::Apply(&body))
        .await
        .map_err(kube_err(what.clone()))?;
    // Who answers at --auth-url, before anything is written. The controller-manager checks it
    // again before it sends any token, so an auth service out of reach from here (a URL only
    // the cluster resolves) is a warning, not a refusal.
    let insecure = spec.is_none_or(|s| s.insecure_skip_tls_verify);
    let url = args.auth_url.as_str();
    match liqo_auth::client::AuthClient::new(insecure).ids(url).await {
        Ok(info) => {
            control::identity::check::auth_service(url, args.cluster_id, &info)
                .map_err(PeerError::WrongCluster)?;
            println!(
                "The auth service at {url} answers for cluster {} ({}), as --cluster-id says",
                info.cluster_id, info.cluster_name
            );
        }
        Err(e) => eprintln!(
            "Warning: cannot ask the auth service at {url} which cluster it is ({}); the \
             controller-manager checks it before it sends any token",
            liqo_types::chain(&e)
        ),
    }
    // A new peer: the token first (the controller-manager starts when the ForeignCluster
    // appears). An existing one (a URL or token given again): the ForeignCluster first, so
    // that the new token, which is tried at once, goes to the new URL, never the old one.
    let exists = fcs
        .get_opt(&fc_name)
        .await
        .map_err(kube_err(what.clone()))?
        .is_some();
    let write_token = || async {
        liqo_auth::tokens::write_remote_token(client, ns, args.cluster_id, args.token)
            .await
            .map_err(PeerError::Token)
    };
    if !exists {
        write_token().await?;
    }
    let fc = fcs
        .patch(&fc_name, &apply, &Patch::Apply(&body))
        .await
        .map_err(kube_err(what))?;
    if exists {
        write_token().await?;
    }
    println!("Peering enabled: ForeignCluster {fc_name:?} has outgoing peering Yes");
    wait_peering(client, &fc, args.timeout, &since).await
}

/// `peer <name>`: outgoing `Yes` on an existing ForeignCluster, then waits.
pub async fn enable(client: &Client, name: &str, timeout: Duration) -> Result<(), PeerError> {
    let since = stages::since_now();
    let fc = set_outgoing(client, name, PeeringEnabled::Yes).await?;
    println!("Peering enabled: ForeignCluster {name:?} has outgoing peering Yes");
    wait_peering(client, &fc, timeout, &since).await
}

/// Outgoing `No` on ForeignCluster `name`, then waits for `OutgoingPeering` None; returns the
/// remote cluster's name.
pub async fn disable_outgoing(
    client: &Client,
    name: &str,
    timeout: Duration,
) -> Result<String, PeerError> {
    let fc = set_outgoing(client, name, PeeringEnabled::No).await?;
    println!("Peering disabled: ForeignCluster {name:?} has outgoing peering No");
    let cluster = fc.spec.cluster_identity.cluster_name.to_string();
    wait(
        client,
        name,
        &cluster,
        timeout,
        Stage::OutgoingTeardown,
        |fc, _| stages::unpeering(fc.status.as_ref()),
        false,
    )
    .await?;
    Ok(cluster)
}

/// `unpeer [out-of-band] <name>`: outgoing `No`, then waits for `OutgoingPeering` None. A
/// ForeignCluster that never authenticated (refused, unreachable, another cluster) and that
/// the remote cluster does not consume is then removed with everything it made
/// ([`crate::unpeer`]); an authenticated one stays (its identity is reused when peering again).
pub async fn disable(
    client: &Client,
    ns: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), PeerError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let cluster = disable_outgoing(client, name, timeout).await?;
    let fcs: Api<ForeignCluster> = Api::all(client.clone());
    let now = fcs
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading ForeignCluster {name}")))?
        .ok_or_else(|| PeerError::Deleted(name.to_owned()))?;
    match crate::unpeer::removable(now.status.as_ref()) {
        Some(why) => {
            println!("ForeignCluster {name:?} {why}: removing it and what it made");
            crate::unpeer::remove(client, ns, &now, deadline).await?;
        }
        None => println!(
            "ForeignCluster {name:?} kept: its identity at the remote cluster is reused when \
             peering again"
        ),
    }
    println!("Peering with the remote cluster {cluster:?} removed");
    Ok(())
}

async fn set_outgoing(
    client: &Client,
    name: &str,
    enabled: PeeringEnabled,
) -> Result<ForeignCluster, PeerError> {
    let fcs: Api<ForeignCluster> = Api::all(client.clone());
    if fcs
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading ForeignCluster {name}")))?
        .is_none()
    {
        return Err(PeerError::NotFound(name.to_owned()));
    }
    let patch = json!({ "spec": { "outgoingPeeringEnabled": enabled } });
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    fcs.patch(name, &pp, &Patch::Merge(&patch))
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 404 => PeerError::NotFound(name.to_owned()),
            e => PeerError::Kube {
                what: format!("writing ForeignCluster {name}"),
                source: e.into(),
            },
        })
}

pub(crate) async fn wait_peering(
    client: &Client,
    fc: &ForeignCluster,
    timeout: Duration,
    since: &Time,
) -> Result<(), PeerError> {
    let name = fc.metadata.name.clone().unwrap_or_default();
    let cluster = fc.spec.cluster_identity.cluster_name.to_string();
    let retried = std::cell::Cell::new(false);
    wait(
        client,
        &name,
        &cluster,
        timeout,
        Stage::Authentication,
        |fc, node| {
            if !stages::refused(fc.status.as_ref()) {
                retried.set(true);
            }
            let since = stages::Since {
                at: since,
                retried: retried.get(),
            };
            stages::peering(fc.status.as_ref(), node, Some(since))
        },
        true,
    )
    .await?;
    println!("Peering with the remote cluster {cluster:?} established");
    Ok(())
}

/// The virtual node of a remote cluster (by its label), Ready or not.
async fn node_state(client: &Client, cluster_id: &ClusterId) -> NodeState {
    let nodes: Api<Node> = Api::all(client.clone());
    let lp = ListParams::default().labels(&format!("{}={cluster_id}", labels::REMOTE_CLUSTER_ID));
    match nodes.list(&lp).await {
        Ok(l) => match l.items.first() {
            None => NodeState::Absent,
            Some(n) => {
                let ready = n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                if ready {
                    NodeState::Ready
                } else {
                    NodeState::NotReady
                }
            }
        },
        Err(e) => {
            // The node stage is not waited for: a failed look-up reads as no node.
            tracing::debug!(error = %liqo_types::chain(&e), "listing virtual nodes");
            NodeState::Absent
        }
    }
}

/// Watches ForeignCluster `name`, printing the stages `decide` passes, until done (Ok), failed
/// or deleted or `timeout` (Err).
async fn wait(
    client: &Client,
    name: &str,
    cluster: &str,
    timeout: Duration,
    first: Stage,
    decide: impl Fn(&ForeignCluster, NodeState) -> Progress,
    look_for_node: bool,
) -> Result<(), PeerError> {
    let fcs: Api<ForeignCluster> = Api::all(client.clone());
    let mut stream = watcher::watch_object(fcs, name).default_backoff().boxed();
    let mut printed = 0;
    let mut last = Outcome::Waiting(first, None);
    let mut watch_error = None;
    let deadline = tokio::time::Instant::now() + timeout;
    let print = |progress: &Progress, printed: &mut usize| {
        for p in progress.passed.iter().skip(*printed) {
            println!("{}", p.line(cluster));
        }
        *printed = (*printed).max(progress.passed.len());
    };
    loop {
        let event = match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_elapsed) => break,
            Ok(None) => break,
            Ok(Some(event)) => event,
        };
        let fc = match event {
            Ok(Some(fc)) => fc,
            Ok(None) => return Err(PeerError::Deleted(name.to_owned())),
            Err(e) => {
                let e = liqo_types::chain(&e);
                tracing::debug!(error = %e, "watching ForeignCluster {name}");
                watch_error = Some(e);
                continue;
            }
        };
        let mut progress = decide(&fc, NodeState::Absent);
        if look_for_node && progress.outcome == Outcome::Done {
            let node = node_state(client, &fc.spec.cluster_identity.cluster_id).await;
            progress = decide(&fc, node);
        }
        print(&progress, &mut printed);
        match progress.outcome {
            Outcome::Done => return Ok(()),
            Outcome::Failed(stage, seen) => {
                return Err(PeerError::Stage(stages::failure_line(
                    stage, &seen, cluster,
                )));
            }
            waiting => last = waiting,
        }
    }
    let timeout = humantime::format_duration(timeout).to_string();
    let mut line = match last {
        Outcome::Waiting(stage, seen) => {
            stages::timeout_line(stage, seen.as_ref(), cluster, &timeout)
        }
        _ => format!("Timed out after {timeout} waiting for ForeignCluster {name:?}"),
    };
    if let Some(e) = watch_error {
        line.push_str(&format!(
            "; the last watch of ForeignCluster {name:?} failed: {e}"
        ));
    }
    Err(PeerError::Timeout(line))
}

#[cfg(test)]
mod tests;
