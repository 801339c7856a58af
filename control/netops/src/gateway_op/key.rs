//! The gateway's key in the operator's reconcile: a new key (a rotation asked for, or the key
//! Secret deleted) is written to the key file before the config naming it, the gateway's status
//! is read until it runs it, and its public half is announced (`wireguard-pubkey`) only once the
//! gateway runs it and every TunnelEndpoint's status was written from that gateway: a peer is
//! never told of a key our gateway does not answer with, and `liqoctl rotate-key` never reads
//! a status from before the switch as one after it.

use std::time::Duration;

use liqo_types::PublicKey;

use super::ctx::{Ctx, KeyState, MANAGER};
use control::network::gateway::Observed;

use crate::{
    error::OpError,
    files::{self, FilesError},
    kube::{self as k, KubeError},
    runner::Dataplane,
};

/// How long a reconcile waits for the gateway to report the key it is to run (the config watch
/// reacts within milliseconds).
const KEY_SWITCH_WAIT: Duration = Duration::from_secs(3);

impl Ctx {
    pub(super) fn key_state(&self) -> KeyState {
        *self.key.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The key the gateway must run: a new one (rotated, or its Secret deleted) is written to the
/// key file first. Returns its public half and whether it changed.
pub(super) async fn ensure(ctx: &Ctx) -> Result<(PublicKey, bool), OpError> {
    let (key, why) = k::keys::next(&ctx.client, &ctx.settings.namespace).await?;
    let public = key.public();
    let old = ctx.key_state().current;
    if public == old {
        return Ok((public, false));
    }
    if let Dataplane::Files {
        private_key_file: Some(path),
        ..
    } = &ctx.settings.dataplane
    {
        let text = format!("{}\n", key.to_base64());
        files::write_atomic_mode(path, text.as_bytes(), 0o600)?;
    }
    drop(key);
    ctx.key.lock().unwrap_or_else(|p| p.into_inner()).current = public;
    ctx.metrics.key_rotations.inc();
    tracing::info!(old = %old, new = %public, why = why.as_deref().unwrap_or("the key Secret holds another key"), "gateway key rotated");
    Ok((public, true))
}

/// The gateway's `/status`; when `key` is given, read again until it reports that key or
/// [`KEY_SWITCH_WAIT`] passed.
pub(super) async fn gateway_status(
    url: &files::StatusUrl,
    key: Option<PublicKey>,
) -> Result<liqo_gateway_api::status::Status, FilesError> {
    let deadline = tokio::time::Instant::now() + KEY_SWITCH_WAIT;
    loop {
        let status = files::fetch_async::<liqo_gateway_api::status::Status>(url).await;
        let done = match (&status, key) {
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

/// Whether the public key may be announced now: the gateway runs it (`seen`; no data plane:
/// always) and no TunnelEndpoint status failed to be written in this reconcile.
pub(super) fn may_announce(public_key: &PublicKey, seen: Observed<'_>, tep_failed: bool) -> bool {
    let runs = match seen {
        Observed::Fake => true,
        Observed::Status(st) => st.public_key == public_key.to_string(),
        Observed::Unreachable(_) => false,
    };
    runs && !tep_failed
}

/// Announces `public_key` when it is not yet and [`may_announce`]; `Ok(false)`: still to do.
pub(super) async fn announce(
    ctx: &Ctx,
    public_key: PublicKey,
    seen: Observed<'_>,
    tep_failed: bool,
) -> Result<bool, KubeError> {
    if ctx.key_state().published == Some(public_key) {
        return Ok(true);
    }
    if !may_announce(&public_key, seen, tep_failed) {
        return Ok(false);
    }
    let since = k8s_openapi::jiff::Timestamp::now().to_string();
    k::keys::publish(
        &ctx.client,
        &ctx.settings.namespace,
        MANAGER,
        &public_key,
        &since,
    )
    .await?;
    ctx.key.lock().unwrap_or_else(|p| p.into_inner()).published = Some(public_key);
    tracing::info!(%public_key, "the gateway runs its key: public key published");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_announced_only_once_the_gateway_runs_it_and_every_status_is_written() {
        let key = liqo_gateway_api::keys::PrivateKey::generate()
            .unwrap()
            .public();
        let other = liqo_gateway_api::keys::PrivateKey::generate()
            .unwrap()
            .public();
        let status = |k: PublicKey| liqo_gateway_api::status::Status {
            public_key: k.to_string(),
            ..serde_json::from_value(serde_json::json!({
                "publicKey": "", "listenPort": 1, "noRoute": 0, "peers": [],
                "reload": {"source": "f"}
            }))
            .unwrap()
        };
        let (runs, old) = (status(key), status(other));
        assert!(may_announce(&key, Observed::Status(&runs), false));
        assert!(
            !may_announce(&key, Observed::Status(&old), false),
            "still the old key"
        );
        assert!(
            !may_announce(&key, Observed::Status(&runs), true),
            "a status not written"
        );
        assert!(!may_announce(&key, Observed::Unreachable("down"), false));
        assert!(may_announce(&key, Observed::Fake, false));
    }
}
