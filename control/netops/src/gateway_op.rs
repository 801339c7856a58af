//! The gateway operator: every TunnelEndpoint → the gateway's config file (through
//! [`gateway_plan::render`], i.e. the core's [`liqo_peering::plan::gateway_peers`]), written
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
use gateway::config::File;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Client,
    api::DynamicObject,
    runtime::{
        controller::Action,
        events::{Recorder, Reporter},
    },
};
use liqo_types::PublicKey;

use crate::{
    error::OpError,
    files,
    gateway_plan::{self, Endpoints, Observed},
    kube::{self as k, KubeError},
    metrics::Metrics,
    release::{self, Release},
    runner,
    tep::{self, Tep},
};

/// The field manager (and program) name.
pub const MANAGER: &str = "liqo-gateway-operator";
/// How soon to look again while a TunnelEndpoint waits on the gateway.
pub const PENDING: Duration = Duration::from_secs(1);
/// How soon to look again when all is settled (a handshake ages, the IPAM's endpoints change).
pub const SETTLED: Duration = Duration::from_secs(10);

pub use crate::runner::Dataplane;

/// What the operator is told.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Liqo namespace (Secrets, Lease).
    pub namespace: String,
    /// The node the gateway runs on.
    pub node_name: String,
    /// The gateway's fixed settings (no peers).
    pub base: File,
    /// The IPAM service, for the endpoint mappings (checked: [`crate::cli::Ipam::options`]).
    pub ipam: Option<ipam::service::client::ClientOptions>,
    /// The data plane.
    pub dataplane: Dataplane,
    /// How long a deleted TunnelEndpoint waits for a gateway that cannot be read or refuses its
    /// file before its finalizer is released anyway (with a Warning Event).
    pub release_grace: Duration,
}

/// How long a reconcile that switched the key waits for the gateway to report it (the config
/// watch reacts within milliseconds).
const KEY_SWITCH_WAIT: Duration = Duration::from_secs(3);

/// The gateway's key, as the operator knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyState {
    /// The public half of the key the gateway is to run (written to its key file).
    pub current: PublicKey,
    /// The public key last published in `wireguard-pubkey`.
    pub published: Option<PublicKey>,
}

/// The operator's state.
pub struct Ctx {
    /// Its client.
    pub client: Client,
    /// Its settings.
    pub settings: Settings,
    /// The gateway's key.
    pub key: std::sync::Mutex<KeyState>,
    /// Its metrics.
    pub metrics: Metrics,
    ipam: tokio::sync::Mutex<Option<ipam::service::client::Client>>,
    /// The IPAM's answer last read: kept while the IPAM cannot be asked.
    last_endpoints: std::sync::Mutex<Option<Endpoints>>,
    recorder: Recorder,
}

impl Ctx {
    /// A context; `public_key` is the key the gateway runs, published already.
    pub fn new(client: Client, settings: Settings, public_key: PublicKey, metrics: Metrics) -> Ctx {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: MANAGER.into(),
                instance: Some(settings.node_name.clone()),
            },
        );
        Ctx {
            recorder,
            client,
            settings,
            key: std::sync::Mutex::new(KeyState {
                current: public_key,
                published: Some(public_key),
            }),
            metrics,
            ipam: tokio::sync::Mutex::new(None),
            last_endpoints: std::sync::Mutex::new(None),
        }
    }

    async fn endpoints(&self) -> Result<Endpoints, OpError> {
        let Some(opts) = &self.settings.ipam else {
            return Ok(Endpoints::default());
        };
        let mut guard = self.ipam.lock().await;
        let client = match guard.as_mut() {
            Some(c) => c,
            None => {
                let c = ipam::service::client::connect(opts)
                    .await
                    .map_err(|source| OpError::IpamConnect {
                        address: opts.server.clone(),
                        source,
                    })?;
                guard.insert(c)
            }
        };
        match client.list(ipam::service::proto::Empty {}).await {
            Ok(l) => Endpoints::from_list(&l.into_inner()).map_err(OpError::IpamAnswer),
            Err(s) => {
                // Connect again next time.
                *guard = None;
                Err(OpError::IpamCall(s.message().to_owned()))
            }
        }
    }

    fn key_state(&self) -> KeyState {
        *self.key.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The key the gateway must run: a new one (rotated, or its Secret deleted) is written to
    /// the key file first. Returns its public half and whether it changed.
    async fn ensure_key(&self) -> Result<(PublicKey, bool), OpError> {
        let (key, why) = k::keys::next(&self.client, &self.settings.namespace).await?;
        let public = key.public();
        let old = self.key_state().current;
        if public == old {
            return Ok((public, false));
        }
        if let Dataplane::Files {
            private_key_file: Some(path),
            ..
        } = &self.settings.dataplane
        {
            let text = format!("{}\n", key.to_base64());
            files::write_atomic_mode(path, text.as_bytes(), 0o600)?;
        }
        drop(key);
        self.key.lock().unwrap_or_else(|p| p.into_inner()).current = public;
        self.metrics.key_rotations.inc();
        tracing::info!(old = %old, new = %public, why = why.as_deref().unwrap_or("the key Secret holds another key"), "gateway key rotated");
        Ok((public, true))
    }
}

/// One reconcile of the gateway of `node` (the operator's own Node).
pub async fn reconcile(node: Arc<Node>, ctx: Arc<Ctx>) -> Result<Action, OpError> {
    ctx.metrics.reconciles.inc();
    let s = &ctx.settings;
    // The key first: a new one reaches the gateway with this reconcile's config.
    let (public_key, switched) = ctx.ensure_key().await?;
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
        endpoints.local_external_cidr = tep::local_external(&teps);
    }
    let key_file = match &s.dataplane {
        Dataplane::Files {
            private_key_file: Some(p),
            ..
        } => Some(p.display().to_string()),
        _ => None,
    };
    let rendered = gateway_plan::render(
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
            status = gateway_status(url, switched.then_some(public_key)).await;
            let seen = match &status {
                Ok(st) => Observed::Status(st),
                Err(why) => Observed::Unreachable(why),
            };
            (d, seen)
        }
    };
    let gateway_ip = runner::internal_ip(&node);
    let mut pending = 0;
    let mut refused = 0;
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
            }
        }
    }
    // The public key is announced once the gateway runs the key (after the TunnelEndpoints
    // say so: a peer is never told of a key our gateway does not answer with).
    let runs = match seen {
        Observed::Fake => true,
        Observed::Status(st) => st.public_key == public_key.to_string(),
        Observed::Unreachable(_) => false,
    };
    if ctx.key_state().published != Some(public_key) {
        if runs {
            let since = k8s_openapi::jiff::Timestamp::now().to_string();
            match k::keys::publish(&ctx.client, &s.namespace, MANAGER, &public_key, &since).await {
                Ok(_) => {
                    ctx.key.lock().unwrap_or_else(|p| p.into_inner()).published = Some(public_key);
                    tracing::info!(%public_key, "the gateway runs its new key: public key published");
                }
                Err(e) => {
                    tracing::warn!(error = %liqo_types::chain(&e), "publishing the gateway's public key");
                    first_error.get_or_insert(e);
                }
            }
        } else {
            pending += 1;
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

/// The gateway's `/status`; after a key switch (`new_key`), read again until it reports that
/// key or [`KEY_SWITCH_WAIT`] passed (the statuses written next must be the new key's).
async fn gateway_status(
    url: &files::StatusUrl,
    new_key: Option<PublicKey>,
) -> Result<gateway::status::Status, String> {
    let deadline = tokio::time::Instant::now() + KEY_SWITCH_WAIT;
    loop {
        let status = files::fetch_async::<gateway::status::Status>(url)
            .await
            .map_err(|e| liqo_types::chain(&e).to_string());
        let done = match (&status, new_key) {
            (_, None) => true,
            (Ok(st), Some(k)) => st.public_key == k.to_string(),
            (Err(_), Some(_)) => false,
        };
        if done || tokio::time::Instant::now() >= deadline {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    rendered: &gateway_plan::Rendered,
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
        if gateway_plan::released(t, rendered, written, seen) {
            k::hold_finalizer(&ctx.client, obj, MANAGER, net::GATEWAY_FINALIZER, false).await?;
            tracing::info!(tep = %t.key(), "the gateway dropped the peer; finalizer released");
            return Ok(Some(ConnectionStatus::Connected));
        }
        let why = gateway_plan::failing(seen, written);
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
    let c = gateway_plan::connection(t, left, written, seen);
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
