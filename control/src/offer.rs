//! The ResourceOffer a provider makes to a consumer, as a pure function of what its nodes and
//! pods are ([`NodeInput`], [`PodInput`]; [`input`] builds them from Kubernetes objects):
//!
//! offer = Σ allocatable of the Ready, non-virtual nodes
//!         − requests of the Running pods on them (shadow pods excluded)
//!         + requests of those pods the consumer itself offloaded here
//!           (`virtualkubelet.liqo.io/origin=<consumer>`: they are its own usage),
//!
//! each resource scaled by the sharing percentage as upstream Liqo v0.5 scales it: cpu in
//! milli-units, memory in megabytes (10⁶), any other resource in whole units, each rounded up
//! before scaling and truncated after. A resource that would go negative offers 0. Only the
//! resources some node declares are offered.
//!
//! [`changed_beyond`] says whether a new offer moved far enough from the published one to be
//! written (upstream's update threshold, default [`DEFAULT_UPDATE_THRESHOLD`]).

pub mod input;
mod stored;

use std::{collections::BTreeMap, fmt, str::FromStr};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub use input::{BadInput, NodeInput, PodInput, pod_requests};
pub use stored::OfferPod;

use crate::{
    api::ClusterId,
    consts::{labels, values},
    quantity::{self, Amount, InvalidQuantity},
};

pub use crate::quantity::Resources;

/// The resource name of CPU.
pub const CPU: &str = "cpu";
/// The resource name of memory.
pub const MEMORY: &str = "memory";
/// Upstream's default for `--offer-update-threshold-percentage`.
pub const DEFAULT_UPDATE_THRESHOLD: Percent = Percent(5);

/// A percentage, 0 to 100 (the sharing percentage, the update threshold).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Percent(u8);

/// A percentage out of 0..=100 (names the refused text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad percentage {0:?}: a whole number from 0 to 100")]
pub struct InvalidPercent(pub String);

impl Percent {
    /// The percentage, if within 0..=100.
    pub const fn new(value: u8) -> Option<Self> {
        if value <= 100 {
            Some(Percent(value))
        } else {
            None
        }
    }

    /// Its value.
    pub const fn get(self) -> u8 {
        self.0
    }
}

impl FromStr for Percent {
    type Err = InvalidPercent;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<u8>()
            .ok()
            .and_then(Percent::new)
            .ok_or_else(|| InvalidPercent(s.to_owned()))
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What is left for the consumer before scaling: allocatable of the Ready non-virtual nodes,
/// minus what the Running non-shadow pods on them request, plus what the consumer's own
/// offloaded pods among them request. The pods are borrowed (a provider's store holds
/// thousands: none is copied).
pub fn available<'a>(
    nodes: &[NodeInput],
    pods: impl IntoIterator<Item = &'a PodInput>,
    consumer: &ClusterId,
) -> Resources {
    let counted: BTreeMap<&str, &NodeInput> = nodes
        .iter()
        .filter(|n| n.ready && !n.is_virtual)
        .map(|n| (n.name.as_str(), n))
        .collect();
    let mut total = Resources::new();
    for node in counted.values() {
        add(&mut total, &node.allocatable);
    }
    for pod in pods {
        let on_counted = pod.node.as_deref().is_some_and(|n| counted.contains_key(n));
        let running = pod.phase.as_deref() == Some("Running");
        let shadow = pod.labels.get(labels::SHADOW_POD).map(String::as_str) == Some(values::TRUE);
        if !on_counted || !running || shadow {
            continue;
        }
        let theirs =
            pod.labels.get(labels::OFFLOADED_ORIGIN).map(String::as_str) == Some(consumer.as_str());
        if !theirs {
            subtract_known(&mut total, &pod.requests);
        }
    }
    total
}

/// `into += amounts`.
fn add(into: &mut Resources, amounts: &Resources) {
    for (name, amount) in amounts {
        let slot = into.entry(name.clone()).or_default();
        *slot = slot.plus(*amount);
    }
}

/// `into -= amounts`, for the resources `into` has (a request for a resource no node
/// declares is not offered).
fn subtract_known(into: &mut Resources, amounts: &Resources) {
    for (name, amount) in amounts {
        if let Some(slot) = into.get_mut(name) {
            *slot = slot.minus(*amount);
        }
    }
}

/// The unit exponent a resource is offered in: cpu milli (-3), memory mega (6), others 0.
fn unit(name: &str) -> i32 {
    match name {
        CPU => -3,
        MEMORY => 6,
        _ => 0,
    }
}

/// Scales resources by the sharing percentage into the offer's quantities (canonical decimal:
/// `2400m`, `1536M`, `99`).
pub fn scale(resources: &Resources, sharing: Percent) -> BTreeMap<String, Quantity> {
    resources
        .iter()
        .map(|(name, amount)| {
            let exp = unit(name);
            let whole = amount.ceil_scaled(exp).max(0);
            let scaled = whole.saturating_mul(i128::from(sharing.0)) / 100;
            (name.clone(), quantity::decimal(scaled, exp))
        })
        .collect()
}

/// The offer for a consumer: [`available`] scaled by [`scale`] (the ResourceOffer's
/// `spec.resourceQuota.hard`).
pub fn offer<'a>(
    nodes: &[NodeInput],
    pods: impl IntoIterator<Item = &'a PodInput>,
    consumer: &ClusterId,
    sharing: Percent,
) -> BTreeMap<String, Quantity> {
    scale(&available(nodes, pods, consumer), sharing)
}

/// Whether `new` differs from the published `old` enough to be written: a resource appeared
/// or disappeared, or one moved by more than `threshold` percent of its published amount
/// (any move of a resource published as 0). Compared exactly, not in rounded units.
pub fn changed_beyond(
    old: &BTreeMap<String, Quantity>,
    new: &BTreeMap<String, Quantity>,
    threshold: Percent,
) -> Result<bool, InvalidQuantity> {
    if !old.keys().eq(new.keys()) {
        return Ok(true);
    }
    for (name, new) in new {
        let new = Amount::from_quantity(new)?.nanos();
        let old = Amount::from_quantity(&old[name])?.nanos();
        let moved = new.abs_diff(old).saturating_mul(100);
        let allowed = old.unsigned_abs().saturating_mul(u128::from(threshold.0));
        if moved > allowed {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests;
