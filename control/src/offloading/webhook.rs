//! The two admission webhooks of namespace offloading, as pure functions: the pod mutation
//! ([`mutate`]: the virtual-node [`toleration`] and the node affinity [`imposed`] by the
//! namespace's NamespaceOffloading) and the NamespaceOffloading validation ([`validate`]).
//! [`review`] turns them into AdmissionReview answers (JSON patch, warnings, denials).
//!
//! Unlike upstream Liqo v0.5.4 (`webhooks/pod/mutations.go`), the toleration is never
//! duplicated, the merge keeps `matchFields` (DaemonSet pods stay pinned) and is skipped when
//! the pod already implies the imposed selector, so mutating twice equals mutating once.
//!
//! It never serves HTTP, reads certificates or looks a NamespaceOffloading up: the
//! controller-manager does, and calls these.

pub mod review;

#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
    Toleration,
};
use serde::{Deserialize, Serialize};

use crate::{
    api::{
        discovery::ClusterIdentity,
        offloading::{self as api, NamespaceOffloading, NamespaceOffloadingSpec},
        offloading::{NamespaceMappingStrategy, PodOffloadingStrategy},
    },
    consts::{labels, values, virtual_node},
    names::NamespaceName,
    selector::{self, IN, NOT_IN},
};

/// Denial of a NamespaceOffloading not named `offloading` (upstream's text).
pub const WRONG_NAME: &str = "NamespaceOffloading name must match offloading";
/// Denial of a changed `namespaceMappingStrategy` (upstream's text).
pub const MAPPING_CHANGED: &str =
    "The NamespaceMappingStrategy value cannot be modified after creation";
/// Warning when the pod strategy is tightened (upstream's text; seed §18.2.2).
pub const POD_STRATEGY_TIGHTENED: &str = "The PodOffloadingStrategy was mutated to a more \
     restrictive setting: existing pods violating this policy might still be running";

/// The toleration of the virtual nodes' taint, added to every pod that may be offloaded:
/// `{key: virtual-node.liqo.io/not-allowed, operator: Exists, effect: NoExecute}`.
pub fn toleration() -> Toleration {
    Toleration {
        key: Some(virtual_node::NOT_ALLOWED_TAINT.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: Some("NoExecute".to_owned()),
        value: None,
        toleration_seconds: None,
    }
}

fn node_type(operator: &str) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: labels::NODE_TYPE.to_owned(),
        operator: operator.to_owned(),
        values: Some(vec![values::VIRTUAL_NODE.to_owned()]),
    }
}

/// The required node affinity a pod strategy imposes, as upstream builds it:
/// - `Local`: none;
/// - `LocalAndRemote`: none without selector terms; otherwise the selector's terms and one
///   more selecting every local node (`liqo.io/type NotIn [virtual-node]`);
/// - `Remote`: `liqo.io/type In [virtual-node]` appended to every term (one term if none).
pub fn imposed(spec: &NamespaceOffloadingSpec) -> Option<NodeSelector> {
    let mut terms = spec
        .cluster_selector
        .as_ref()
        .map(|s| s.node_selector_terms.clone())
        .unwrap_or_default();
    match spec.pod_offloading_strategy {
        PodOffloadingStrategy::Local => return None,
        PodOffloadingStrategy::LocalAndRemote if terms.is_empty() => return None,
        PodOffloadingStrategy::LocalAndRemote => terms.push(NodeSelectorTerm {
            match_expressions: Some(vec![node_type(NOT_IN)]),
            match_fields: None,
        }),
        PodOffloadingStrategy::Remote => {
            if terms.is_empty() {
                terms.push(NodeSelectorTerm::default());
            }
            for t in &mut terms {
                t.match_expressions
                    .get_or_insert_with(Vec::new)
                    .push(node_type(IN));
            }
        }
    }
    Some(NodeSelector {
        node_selector_terms: terms,
    })
}

/// Whether the pod's selector already implies the imposed one: every pod term contains all
/// the requirements of some imposed term.
fn implies(pod: &NodeSelector, imposed: &NodeSelector) -> bool {
    let contains = |outer: &Option<Vec<NodeSelectorRequirement>>,
                    inner: &Option<Vec<NodeSelectorRequirement>>| {
        let outer = outer.as_deref().unwrap_or_default();
        inner.iter().flatten().all(|r| outer.contains(r))
    };
    pod.node_selector_terms.iter().all(|p| {
        imposed.node_selector_terms.iter().any(|i| {
            contains(&p.match_expressions, &i.match_expressions)
                && contains(&p.match_fields, &i.match_fields)
        })
    })
}

/// The pod spec as the pod webhook leaves it:
/// - `Local`: unchanged;
/// - otherwise the [`toleration`] unless an equal one is there, and the [`imposed`] selector
///   set as required node affinity, or merged ([`selector::merge`], the cartesian product)
///   into the pod's own unless the pod's already implies it.
///
/// Preferred affinity, pod (anti-)affinity and `nodeSelector` are left as they are.
pub fn mutate(spec: &NamespaceOffloadingSpec, pod: &PodSpec) -> PodSpec {
    let mut out = pod.clone();
    if spec.pod_offloading_strategy == PodOffloadingStrategy::Local {
        return out;
    }
    let tolerations = out.tolerations.get_or_insert_with(Vec::new);
    let toleration = toleration();
    if !tolerations.contains(&toleration) {
        tolerations.push(toleration);
    }
    let Some(imposed) = imposed(spec) else {
        return out;
    };
    let node_affinity = out
        .affinity
        .get_or_insert_with(Affinity::default)
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    let required = &mut node_affinity.required_during_scheduling_ignored_during_execution;
    *required = Some(match required.take() {
        Some(own) if !own.node_selector_terms.is_empty() => {
            if implies(&own, &imposed) {
                own
            } else {
                selector::merge(&own, &imposed)
            }
        }
        _ => imposed,
    });
    out
}

/// An admission operation (AdmissionReview `request.operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// CREATE.
    Create,
    /// UPDATE.
    Update,
    /// DELETE.
    Delete,
    /// CONNECT.
    Connect,
}

/// What a validating webhook answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted, with warnings shown to the client (kubectl prints `Warning: …`).
    Allow {
        /// The warnings, possibly none.
        warnings: Vec<String>,
    },
    /// Refused (HTTP 403), with this message after the apiserver's `admission webhook
    /// "nsoff.validate.liqo.io" denied the request: `.
    Deny {
        /// Why.
        message: String,
    },
}

impl Verdict {
    fn deny(message: impl Into<String>) -> Self {
        Verdict::Deny {
            message: message.into(),
        }
    }
}

/// The NamespaceOffloading validating webhook. Denies, in this order:
/// 1. a name other than `offloading` (upstream's text);
/// 2. on UPDATE, a changed `namespaceMappingStrategy` (upstream's text);
/// 3. an invalid `clusterSelector`, naming `spec.clusterSelector.nodeSelectorTerms[i]…`
///    (pod validation would otherwise refuse every pod of the namespace);
/// 4. on CREATE, a `DefaultName` remote name that is not a DNS label (over 63 characters).
///
/// Warns when the pod strategy is tightened (upstream's text). An UPDATE that leaves the
/// spec as it was (finalizers, labels) is always allowed, so an object admitted while the
/// webhook was down can still be finalized. `new.metadata.namespace` must be set (the
/// request's namespace: see [`review::validate_nsoff`]).
pub fn validate(
    op: Operation,
    new: &NamespaceOffloading,
    old: Option<&NamespaceOffloading>,
    local: &ClusterIdentity,
) -> Verdict {
    if new.metadata.name.as_deref() != Some(api::NAME) {
        return Verdict::deny(WRONG_NAME);
    }
    let old = old.filter(|_| op == Operation::Update);
    if let Some(old) = old {
        if old.spec == new.spec {
            return Verdict::Allow { warnings: vec![] };
        }
        if old.spec.namespace_mapping_strategy != new.spec.namespace_mapping_strategy {
            return Verdict::deny(MAPPING_CHANGED);
        }
    }
    if let Some(sel) = &new.spec.cluster_selector
        && let Err(e) = selector::validate(sel)
    {
        return Verdict::deny(format!(
            "invalid clusterSelector: {}",
            e.under("spec.clusterSelector.")
        ));
    }
    if op == Operation::Create
        && new.spec.namespace_mapping_strategy == NamespaceMappingStrategy::DefaultName
        && let Some(Ok(ns)) = new
            .metadata
            .namespace
            .as_deref()
            .map(str::parse::<NamespaceName>)
        && let Err(e) = super::remote_namespace(&ns, NamespaceMappingStrategy::DefaultName, local)
    {
        return Verdict::deny(format!(
            "namespaceMappingStrategy DefaultName names the remote namespace {e}: use \
             EnforceSameName or a shorter namespace name"
        ));
    }
    let mut warnings = vec![];
    if let Some(old) = old
        && new.spec.pod_offloading_strategy != PodOffloadingStrategy::LocalAndRemote
        && old.spec.pod_offloading_strategy != new.spec.pod_offloading_strategy
    {
        warnings.push(POD_STRATEGY_TIGHTENED.to_owned());
    }
    Verdict::Allow { warnings }
}
