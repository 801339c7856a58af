//! Whether each component of the release is ready (pure): a Deployment when its current
//! generation is observed and every replica is updated and available; a DaemonSet when every
//! node it is scheduled to runs the current pod and it is available there.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};

/// One component's readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// `Deployment/<name>` or `DaemonSet/<name>`.
    pub name: String,
    /// Pods ready (available and of the current spec).
    pub ready: i32,
    /// Pods wanted.
    pub wanted: i32,
    /// Whether it is ready.
    pub done: bool,
}

impl std::fmt::Display for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.name, self.ready, self.wanted)
    }
}

/// A Deployment's readiness.
pub fn deployment(d: &Deployment) -> Component {
    let wanted = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let st = d.status.clone().unwrap_or_default();
    let observed = st.observed_generation.unwrap_or(-1) >= d.metadata.generation.unwrap_or(0);
    let ready = st
        .updated_replicas
        .unwrap_or(0)
        .min(st.available_replicas.unwrap_or(0));
    Component {
        name: format!("Deployment/{}", d.metadata.name.clone().unwrap_or_default()),
        ready,
        wanted,
        done: observed
            && ready >= wanted
            && st.replicas.unwrap_or(0) == wanted
            && st.unavailable_replicas.unwrap_or(0) == 0,
    }
}

/// A DaemonSet's readiness.
pub fn daemon_set(d: &DaemonSet) -> Component {
    let st = d.status.clone().unwrap_or_default();
    let wanted = st.desired_number_scheduled;
    let observed = st.observed_generation.unwrap_or(-1) >= d.metadata.generation.unwrap_or(0);
    let ready = st
        .updated_number_scheduled
        .unwrap_or(0)
        .min(st.number_available.unwrap_or(0));
    Component {
        name: format!("DaemonSet/{}", d.metadata.name.clone().unwrap_or_default()),
        ready,
        wanted,
        done: observed && ready >= wanted,
    }
}
