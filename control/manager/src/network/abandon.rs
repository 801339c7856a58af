//! Letting a ForeignCluster go without the network teardown, when that teardown cannot run:
//! the network manager is off (no `--ipam-address`: nothing would ever drop
//! `net.liqo.io/network-manager`), or the IPAM has failed for longer than the grace while the
//! ForeignCluster is being deleted (the teardown needs it first). The finalizer goes with a
//! Warning Event on the ForeignCluster saying the peer's ranges were not released.
//! [`abandon`] decides (pure); [`Unmanaged`] is the small controller run when the manager is
//! off; the network manager's own reconcile calls [`drop_finalizer`].

use std::{sync::Arc, time::Duration};

use control::{api::discovery::ForeignCluster, consts::net};
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, Resource, ResourceExt,
    runtime::{
        controller::Action as Requeue,
        events::{Event, EventType, Recorder, Reporter},
    },
};

use crate::{
    context::Context,
    error::Error,
    kit::{set_finalizers, with_finalizer},
};

/// The reason of the Warning Event on a ForeignCluster let go without releasing its ranges.
pub const REASON_NOT_RELEASED: &str = "NetworkNotReleased";

/// Why the ForeignCluster's network finalizer is dropped without a teardown, if it is:
/// only while it is being deleted and holds the finalizer; at once when the network manager
/// is off; when the IPAM has failed since `failing_since` for at least `grace`.
pub fn abandon(
    deleting: bool,
    has_finalizer: bool,
    manager_on: bool,
    failing_since: Option<Timestamp>,
    now: Timestamp,
    grace: Duration,
) -> Option<String> {
    if !deleting || !has_finalizer {
        return None;
    }
    if !manager_on {
        return Some(
            "the network manager is off (no --ipam-address): the peer's IPAM ranges and network objects were not released"
                .to_owned(),
        );
    }
    let since = failing_since?;
    let failed: Duration = now.duration_since(since).try_into().ok()?;
    (failed >= grace).then(|| {
        format!(
            "liqo-ipam has failed for {} s (grace {} s): the peer's IPAM ranges were not released",
            failed.as_secs(),
            grace.as_secs()
        )
    })
}

/// Drops `net.liqo.io/network-manager` from `fc` and says why in a Warning Event.
pub async fn drop_finalizer(
    ctx: &Context,
    recorder: &Recorder,
    fc: &ForeignCluster,
    why: String,
) -> Result<(), Error> {
    let fcs: Api<ForeignCluster> = Api::all(ctx.client.clone());
    let list = with_finalizer(fc.finalizers(), net::NETWORK_MANAGER_FINALIZER, false);
    set_finalizers(&fcs, &fc.name_any(), fc.resource_version().as_deref(), list).await?;
    tracing::warn!(name = %fc.name_any(), reason = %why, "network finalizer dropped without a teardown");
    let ev = Event {
        type_: EventType::Warning,
        reason: REASON_NOT_RELEASED.into(),
        note: Some(why),
        action: "Reconcile".into(),
        secondary: None,
    };
    // The finalizer is gone already: the Event's failure is logged, never retried.
    if let Err(e) = recorder.publish(&ev, &fc.object_ref(&())).await {
        tracing::warn!(error = %e, "publishing an Event failed");
    }
    Ok(())
}

/// The controller run instead of the network manager when it is off.
pub struct Unmanaged {
    /// The shared context.
    pub ctx: Arc<Context>,
    recorder: Recorder,
}

impl Unmanaged {
    /// Its Event recorder is the controller-manager's.
    pub fn new(ctx: Arc<Context>) -> Self {
        let recorder = Recorder::new(
            ctx.client.clone(),
            Reporter {
                controller: crate::FIELD_MANAGER.into(),
                instance: None,
            },
        );
        Unmanaged { ctx, recorder }
    }
}

/// One reconcile: a deleted ForeignCluster loses the network finalizer it still holds.
pub async fn reconcile_unmanaged(
    fc: Arc<ForeignCluster>,
    u: Arc<Unmanaged>,
) -> Result<Requeue, Error> {
    let has = fc
        .finalizers()
        .iter()
        .any(|f| f == net::NETWORK_MANAGER_FINALIZER);
    let deleting = fc.meta().deletion_timestamp.is_some();
    let now = Timestamp::now();
    if let Some(why) = abandon(deleting, has, false, None, now, Duration::ZERO) {
        drop_finalizer(&u.ctx, &u.recorder, &fc, why).await?;
    }
    Ok(Requeue::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn only_a_deleted_cluster_holding_the_finalizer_is_let_go() {
        let now = t("2026-11-23T08:10:00Z");
        let g = Duration::from_secs(300);
        assert_eq!(abandon(false, true, false, None, now, g), None);
        assert_eq!(abandon(true, false, false, None, now, g), None);
        let why = abandon(true, true, false, None, now, g).unwrap();
        assert!(
            why.contains("--ipam-address") && why.contains("not released"),
            "{why}"
        );
    }

    #[test]
    fn a_failing_ipam_is_waited_for_the_grace() {
        let now = t("2026-11-23T08:10:00Z");
        let g = Duration::from_secs(300);
        assert_eq!(abandon(true, true, true, None, now, g), None);
        let recent = Some(t("2026-11-23T08:06:00Z"));
        assert_eq!(abandon(true, true, true, recent, now, g), None);
        let long = Some(t("2026-11-23T08:05:00Z"));
        let why = abandon(true, true, true, long, now, g).unwrap();
        assert!(
            why.contains("300 s") && why.contains("not released"),
            "{why}"
        );
        // Not deleting: the finalizer stays however long the IPAM fails.
        assert_eq!(abandon(false, true, true, long, now, g), None);
    }
}
