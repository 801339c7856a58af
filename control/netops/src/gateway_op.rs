//! The gateway operator: every TunnelEndpoint → the gateway's config file (through
//! [`gateway::render`], i.e. the core's `control::network::plan::gateway_peers`), written
//! atomically; the gateway's `/status` → each TunnelEndpoint's `status.connection` and
//! `status.gatewayIP`; finalizer `net.liqo.io/gateway-operator` on each until the gateway
//! dropped its peer.
//!
//! The key comes first in every reconcile ([`k::keys::next`]): a rotation asked for, or the key
//! Secret deleted, makes a new key, written to the gateway's key file (0600) before the config
//! naming its public key (`publicKey`), so the gateway switches live on the config change. The
//! TunnelEndpoints' statuses are then read from the gateway running the new key (every session
//! starts anew), and only then is its public half published (`wireguard-pubkey`, which the
//! network manager sends to the peers): a key the gateway refused is never announced.

use std::{sync::Arc, time::Duration};

use control::{
    api::net::{ConnectionStatus, TunnelEndpointStatus},
    consts::net,
};
use k8s_openapi::api::core::v1::Node;
use kube::{api::DynamicObject, runtime::controller::Action};

use control::network::{
    gateway::{self, Observed},
    release::{self, Release},
    tunnel::{self, Tep},
};

use crate::{
    error::OpError,
    files,
    kube::{self as k, KubeError},
    runner,
};

/// How soon to look again while a TunnelEndpoint waits on the gateway.
pub const PENDING: Duration = Duration::from_secs(1);
/// How soon to look again when all is settled (a handshake ages, the IPAM's endpoints change).
pub const SETTLED: Duration = Duration::from_secs(10);

mod ctx;
mod ipam;
mod key;
pub mod standby;

pub use crate::runner::Dataplane;
pub use ctx::{Ctx, KeyState, MANAGER, Settings};

/// One reconcile of the gateway of `node` (the operator's own Node).
pub async fn reconcile(node: Arc<Node>, ctx: Arc<Ctx>) -> Result<Action, OpError> {
    ctx.metrics.reconciles.inc();
    let s = &ctx.settings;
    // The key first: a new one reaches the gateway with this reconcile's config.
    let (public_key, switched) = key::ensure(&ctx).await?;
    let k::Snapshot {
        objects: objs,
        teps,
        mut peerings,
        left_out,
    } = k::TepRecords {
        client: ctx.client.clone(),
    }
    .read()
    .await?;
    // The finalizer first: a peer is rendered only once its deletion waits for the gateway.
    let mut first_error = k::hold_first(
        &ctx.client,
        &objs,
        &teps,
        &mut peerings,
        MANAGER,
        net::GATEWAY_FINALIZER,
    )
    .await;
    // The IPAM down must not stop peers from being rendered: its last answer is kept.
    let mut endpoints = match ctx.endpoints().await {
        Ok(e) => {
            *ctx.last_endpoints.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
            e
        }
        Err(e) => {
            tracing::warn!(error = %liqo_types::chain(&e), "asking the IPAM; its last answer is kept");
            ctx.last_endpoints
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_default()
        }
    };
    if endpoints.local_external_cidr.is_none() {
        endpoints.local_external_cidr = tunnel::local_external(&teps);
    }
    let key_file = match &s.dataplane {
        Dataplane::Files {
            private_key_file: Some(p),
            ..
        } => Some(p.display().to_string()),
        _ => None,
    };
    let rendered = gateway::render(
        &s.base,
        key_file.as_deref(),
        Some(public_key),
        &peerings,
        &endpoints,
    )?;
    for (m, e) in &rendered.refused_endpoints {
        tracing::warn!(ip = %m.ip, external_ip = %m.external_ip, error = %e, "endpoint mapping left out");
    }
    let status;
    let why;
    let (written, seen) = match &s.dataplane {
        Dataplane::Fake => (files::digest(&rendered.text), Observed::Fake),
        Dataplane::Files {
            config,
            status: url,
            ..
        } => {
            let files::Ensured { digest: d, written } =
                files::ensure_config(config, &rendered.text)?;
            if written {
                ctx.metrics.writes.inc();
                tracing::info!(config = %config.display(), digest = %d, peers = rendered.peers.len(), "gateway config written");
            }
            // After a switch, or while the key is not announced yet, the statuses written
            // next must be read from the gateway running it.
            let unannounced = ctx.key_state().published != Some(public_key);
            status =
                key::gateway_status(url, (switched || unannounced).then_some(public_key)).await;
            let seen = match &status {
                Ok(st) => Observed::Status(st),
                Err(e) => {
                    why = liqo_types::chain(e);
                    Observed::Unreachable(&why)
                }
            };
            (d, seen)
        }
    };
    let gateway_ip = runner::internal_ip(&node);
    let mut pending = 0;
    let mut refused = 0;
    let mut tep_failed = false;
    // Where peers reach a NodePort gateway: its node (the network manager reads it).
    if let Some(ip) = gateway_ip.as_deref() {
        match k::service::annotate_node_ip(&ctx.client, &s.namespace, ip, MANAGER).await {
            Ok(names) if !names.is_empty() => {
                tracing::info!(services = ?names, %ip, "gateway Service annotated with its node's address");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %liqo_types::chain(&e), "annotating the gateway Service");
                first_error.get_or_insert(e);
            }
        }
    }
    for (obj, t) in objs.iter().zip(&teps) {
        let r = one(
            &ctx,
            obj,
            t,
            &rendered,
            &written,
            seen,
            gateway_ip.as_deref(),
            &left_out,
        )
        .await;
        match r {
            Ok(Some(ConnectionStatus::Connected)) => {}
            Ok(Some(ConnectionStatus::Error)) => refused += 1,
            Ok(_) => pending += 1,
            Err(e) => {
                tracing::warn!(tep = %t.key(), error = %liqo_types::chain(&e), "writing a TunnelEndpoint");
                first_error.get_or_insert(e);
                tep_failed = true;
            }
        }
    }
    match key::announce(&ctx, public_key, seen, tep_failed).await {
        Ok(true) => {}
        Ok(false) => pending += 1,
        Err(e) => {
            first_error.get_or_insert(e);
        }
    }
    ctx.metrics
        .peers
        .set(rendered.peers.len().try_into().unwrap_or(i64::MAX));
    ctx.metrics.refused.set(refused);
    ctx.metrics.pending.set(pending);
    if let Some(e) = first_error {
        return Err(e.into());
    }
    Ok(Action::requeue(if pending > 0 { PENDING } else { SETTLED }))
}

/// Finalizer and status of one TunnelEndpoint; returns its connection (`None` while it is
/// deleted and not yet released).
#[allow(
    clippy::too_many_arguments,
    reason = "one call site; the reconcile's values"
)]
async fn one(
    ctx: &Ctx,
    obj: &DynamicObject,
    t: &Tep,
    rendered: &gateway::Rendered,
    written: &str,
    seen: Observed<'_>,
    gateway_ip: Option<&str>,
    left_out: &std::collections::BTreeMap<String, liqo_types::FieldError>,
) -> Result<Option<ConnectionStatus>, KubeError> {
    let owns = k::owns_finalizer(&obj.metadata, MANAGER, net::GATEWAY_FINALIZER);
    if t.deleting {
        if !owns {
            return Ok(Some(ConnectionStatus::Connected));
        }
        if gateway::released(t, rendered, written, seen) {
            k::hold_finalizer(&ctx.client, obj, MANAGER, net::GATEWAY_FINALIZER, false).await?;
            tracing::info!(tep = %t.key(), "the gateway dropped the peer; finalizer released");
            return Ok(Some(ConnectionStatus::Connected));
        }
        let why = gateway::failing(seen, written);
        let now = k8s_openapi::jiff::Timestamp::now();
        if let Release::Forced(note) =
            release::unconfirmed(t, why.as_deref(), now, ctx.settings.release_grace)
        {
            tracing::warn!(tep = %t.key(), %note, "finalizer released without the gateway");
            k::warning(&ctx.recorder, obj, "ReleasedUnconfirmed", "Release", note).await;
            k::hold_finalizer(&ctx.client, obj, MANAGER, net::GATEWAY_FINALIZER, false).await?;
            return Ok(Some(ConnectionStatus::Connected));
        }
        return Ok(None);
    }
    let left = left_out.get(&t.key()).or_else(|| {
        t.parsed
            .as_ref()
            .ok()
            .and_then(|p| rendered.refused.get(&p.peer))
    });
    let c = gateway::connection(t, left, written, seen);
    let state = c.status;
    let want = TunnelEndpointStatus {
        connection: Some(c.clone()),
        gateway_ip: gateway_ip.map(str::to_owned),
        ..TunnelEndpointStatus::default()
    };
    if t.status.connection != want.connection || t.status.gateway_ip != want.gateway_ip {
        if state == Some(ConnectionStatus::Error) {
            let note = c.status_message.clone().unwrap_or_default();
            tracing::warn!(tep = %t.key(), message = %note, "TunnelEndpoint refused");
            k::warning(&ctx.recorder, obj, "Refused", "Render", note).await;
        }
        let status = serde_json::to_value(&want).expect("a status encodes");
        k::apply_status(&ctx.client, obj, MANAGER, status).await?;
    }
    Ok(state)
}
