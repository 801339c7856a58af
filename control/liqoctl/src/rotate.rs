//! `liqoctl rotate-key`: a new WireGuard key for this cluster's gateway, without an outage
//! beyond the seconds the peers take to learn it.
//!
//! liqoctl never sees a private key: it asks for a rotation on the key Secret (annotation
//! `net.liqo.io/rotate-key`, a fresh value); the gateway operator makes the new key, stores it,
//! hands it to the gateway (which switches live and never uses the old key again) and, once the
//! gateway reports it, publishes its public half (Secret `wireguard-pubkey`), which the network
//! manager sends to every peer. liqoctl waits for that publication, then for every
//! TunnelEndpoint to be Connected again (a handshake with the new key), printing each peer as
//! it comes back.

use std::{collections::BTreeMap, time::Duration};

use control::{
    api::{
        discovery::ForeignCluster,
        net::{ConnectionStatus, TunnelEndpoint},
    },
    consts::net,
};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;

use crate::{client::ApiFailure, consts::FIELD_MANAGER};

/// Why a rotation failed.
#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    /// There is no key to rotate.
    #[error(
        "no Secret {ns}/{name}: the gateway operator has not made the gateway's key (is it \
         running?)",
        name = net::PRIVATE_KEY_SECRET
    )]
    NoKey {
        /// The Liqo namespace.
        ns: String,
    },
    /// An apiserver call failed.
    #[error("{what}")]
    Kube {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: ApiFailure,
    },
    /// `--timeout` passed.
    #[error("{0}")]
    Timeout(String),
}

fn failed(what: impl Into<String>) -> impl FnOnce(kube::Error) -> RotateError {
    let what = what.into();
    move |e| RotateError::Kube {
        what,
        source: e.into(),
    }
}

/// How often the Secrets and the TunnelEndpoints are read while waiting.
const POLL: Duration = Duration::from_millis(100);

fn public_key(s: &Secret) -> Option<String> {
    s.data
        .as_ref()?
        .get(net::PUBLIC_KEY)
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
        .map(|k| k.trim().to_owned())
}

fn annotation<'a>(s: &'a Secret, key: &str) -> Option<&'a str> {
    s.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Asks for a new key and waits (`timeout` in all) until the gateway runs it and every peer is
/// connected again.
pub async fn rotate(client: &Client, ns: &str, timeout: Duration) -> Result<(), RotateError> {
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let read = |name: &'static str| {
        let secrets = secrets.clone();
        async move {
            secrets
                .get_opt(name)
                .await
                .map_err(failed(format!("reading Secret {ns}/{name}")))
        }
    };
    if read(net::PRIVATE_KEY_SECRET).await?.is_none() {
        return Err(RotateError::NoKey { ns: ns.to_owned() });
    }
    let old = read(net::PUBLIC_KEY_SECRET)
        .await?
        .as_ref()
        .and_then(public_key);
    // A value never used before: the time, to the nanosecond.
    let request = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = json!({"metadata": {"annotations": {net::ROTATE_KEY_ANNOTATION: request}}});
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    secrets
        .patch(net::PRIVATE_KEY_SECRET, &pp, &Patch::Merge(&patch))
        .await
        .map_err(failed(format!(
            "asking for a rotation on Secret {ns}/{}",
            net::PRIVATE_KEY_SECRET
        )))?;
    println!(
        "Key rotation asked for (request {request}); current public key {}",
        old.as_deref().unwrap_or("(none published)")
    );

    // The operator served the request, and the gateway reports the new key.
    let new = loop {
        let served = read(net::PRIVATE_KEY_SECRET)
            .await?
            .is_some_and(|s| annotation(&s, net::KEY_ROTATED_ANNOTATION) == Some(&request));
        let published = read(net::PUBLIC_KEY_SECRET).await?;
        let key = published.as_ref().and_then(public_key);
        if served && key.is_some() && key != old {
            break key.unwrap_or_default();
        }
        if tokio::time::Instant::now() >= deadline {
            let step = if served {
                "the gateway to run the new key (Secret wireguard-pubkey unchanged)"
            } else {
                "the gateway operator to make the new key"
            };
            return Err(RotateError::Timeout(format!(
                "Timed out after {} waiting for {step}",
                humantime::format_duration(timeout)
            )));
        }
        tokio::time::sleep(POLL).await;
    };
    let switched = tokio::time::Instant::now();
    println!(
        "The gateway runs the new key: public key {new} ({:.1} s after the request)",
        (switched - started).as_secs_f64()
    );

    let names: BTreeMap<String, String> = Api::<ForeignCluster>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(failed("listing ForeignClusters"))?
        .items
        .into_iter()
        .filter_map(|fc| {
            let name = fc.metadata.name?;
            Some((fc.spec.cluster_identity.cluster_id.to_string(), name))
        })
        .collect();
    let teps: Api<TunnelEndpoint> = Api::all(client.clone());
    let mut back = std::collections::BTreeSet::new();
    loop {
        let all = teps
            .list(&ListParams::default())
            .await
            .map_err(failed("listing TunnelEndpoints"))?
            .items;
        let mut waiting = Vec::new();
        for t in &all {
            let id = t.spec.cluster_id.to_string();
            let peer = names.get(&id).cloned().unwrap_or_else(|| id.clone());
            let conn = t.status.as_ref().and_then(|s| s.connection.as_ref());
            if conn.and_then(|c| c.status) == Some(ConnectionStatus::Connected) {
                if back.insert(id) {
                    println!(
                        "Peer {peer:?} reconnected ({:.1} s after the switch)",
                        switched.elapsed().as_secs_f64()
                    );
                }
            } else {
                let why = conn
                    .and_then(|c| c.status_message.clone())
                    .unwrap_or_else(|| "no status yet".into());
                waiting.push(format!("{peer:?} ({why})"));
            }
        }
        if waiting.is_empty() {
            println!(
                "Key rotated: {} peer(s) connected with the new key, {:.1} s after the switch",
                all.len(),
                switched.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(RotateError::Timeout(format!(
                "Timed out after {} waiting for peers to reconnect with the new key: {}",
                humantime::format_duration(timeout),
                waiting.join(", ")
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}
