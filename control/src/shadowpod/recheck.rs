//! When the consumer's virtual kubelet looks at a pod again with no event to bring it: the
//! remote name probed for a ShadowPod whose pod does not come ([`probe_foreign`]), the local
//! pod's label written alone when no status write carried it ([`label_in`]). Both count from
//! the ShadowPod's creation; pure, time as an input.

use std::time::Duration;

use k8s_openapi::{
    api::core::v1::Pod,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
};

use super::{
    consumer::{is_aborted, is_reflected},
    reflection::{Context, terminating},
};
use crate::consts::{labels, values};

/// The probe after which a ShadowPod without a remote Pod of ours has the remote name looked
/// up (§2.3 step 1 for Pods: the remote watches only see our labels).
pub const PROBE_AFTER: Duration = Duration::from_secs(30);

/// How long a local pod may go without its `liqo.io/shadowPod` label once its ShadowPod
/// exists, waiting for a status write to carry it (a remote pod reports within a second or
/// two; this is for one that never does, or whose status write refused the label and was
/// written without it). Five minutes: on a provider that takes its time (10,000 pods created
/// at once ran after two minutes at p99), a shorter wait put a write of its own on most pods,
/// adding to the home API server's load when it was highest; nothing reads the label sooner
/// (a home pod is on a virtual node, which no ResourceOffer counts).
pub const LABEL_AFTER: Duration = Duration::from_secs(300);

/// How old the ShadowPod `shadow` is at `now` (`None`: no creation time).
fn age(shadow: &ObjectMeta, now: &Time) -> Option<Duration> {
    let created = shadow.creation_timestamp.as_ref()?;
    Some(Duration::try_from(now.0.duration_since(created.0)).unwrap_or_default())
}

/// When to look the remote name up for a foreign Pod: `None` never (no live ShadowPod of
/// ours, or its pod is there), `Some(ZERO)` now, else after the delay returned.
pub fn probe_foreign(
    shadow: Option<&ObjectMeta>,
    current: Option<&Pod>,
    now: &Time,
) -> Option<Duration> {
    let s = shadow?;
    if current.is_some() || terminating(s) {
        return None;
    }
    Some(PROBE_AFTER.saturating_sub(age(s, now).unwrap_or(PROBE_AFTER)))
}

/// When the local pod's label is due alone (`Action::LabelLocal`): `None` for a pod labelled
/// already, going or aborted, or without a live ShadowPod of ours; else the time left until
/// its ShadowPod is [`LABEL_AFTER`] old (`ZERO`: now). The caller queues the pod again then.
pub fn label_in(local: &Pod, shadow: Option<&ObjectMeta>, ctx: &Context<'_>) -> Option<Duration> {
    let s = shadow?;
    let aborted = local.status.as_ref().is_some_and(is_aborted);
    if labelled(local)
        || aborted
        || terminating(&local.metadata)
        || terminating(s)
        || !is_reflected(s.labels.as_ref(), ctx.home, ctx.foreign)
    {
        return None;
    }
    Some(LABEL_AFTER.saturating_sub(age(s, &ctx.now).unwrap_or(LABEL_AFTER)))
}

/// Whether the local pod has the `liqo.io/shadowPod=true` label.
pub(super) fn labelled(local: &Pod) -> bool {
    local
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::SHADOW_POD))
        .is_some_and(|v| v == values::TRUE)
}
