//! What `offload namespace` writes and prints, and where an offloading (or an unoffloading)
//! stands, decided from the NamespaceOffloading alone. Pure: it reads no clock and talks to
//! nothing; the waiting loop in [`crate::offload`] prints the lines and stops on done, failed
//! or timeout.

use control::{
    api::offloading::{
        ConditionStatus, NAME, NamespaceMappingStrategy, NamespaceOffloading,
        NamespaceOffloadingSpec, OffloadingPhase, PodOffloadingStrategy,
        RemoteNamespaceConditionType as Type,
    },
    offloading::status::CREATION_LOOP_BACK_OFF,
};
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorTerm};
use kube::api::ObjectMeta;

use crate::cli::OutputFormat;

/// The NamespaceOffloading `offloading` of namespace `ns`. No selector terms gives an explicit
/// empty `clusterSelector` (all clusters), so that applying it also clears a selector set before.
pub fn namespace_offloading(
    ns: &str,
    mapping: NamespaceMappingStrategy,
    pods: PodOffloadingStrategy,
    terms: &[NodeSelectorTerm],
) -> NamespaceOffloading {
    NamespaceOffloading {
        metadata: ObjectMeta {
            name: Some(NAME.to_owned()),
            namespace: Some(ns.to_owned()),
            ..ObjectMeta::default()
        },
        spec: NamespaceOffloadingSpec {
            namespace_mapping_strategy: mapping,
            pod_offloading_strategy: pods,
            cluster_selector: Some(NodeSelector {
                node_selector_terms: terms.to_vec(),
            }),
        },
        status: None,
    }
}

/// Why an object could not be printed.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// As YAML.
    #[error("rendering as YAML")]
    Yaml(#[source] serde_saphyr::SerializeError),
    /// As JSON.
    #[error("rendering as JSON")]
    Json(#[source] serde_json::Error),
}

/// The object as `-o yaml` or `-o json` prints it (ending with a newline).
pub fn render<T: serde::Serialize>(obj: &T, format: OutputFormat) -> Result<String, RenderError> {
    match format {
        OutputFormat::Yaml => serde_saphyr::to_string(obj).map_err(RenderError::Yaml),
        OutputFormat::Json => serde_json::to_string_pretty(obj)
            .map(|s| s + "\n")
            .map_err(RenderError::Json),
    }
}

/// The selector terms in kubectl's syntax, for the applied line: one term as is, several as
/// `[term] OR [term]`; `all clusters` without any.
pub fn describe_terms(terms: &[NodeSelectorTerm]) -> String {
    let term = |t: &NodeSelectorTerm| {
        t.match_expressions
            .iter()
            .flatten()
            .map(|r| {
                let values = r.values.as_deref().unwrap_or_default();
                let joined = values.join(",");
                match (r.operator.as_str(), values) {
                    ("In", [v]) => format!("{}={v}", r.key),
                    ("NotIn", [v]) => format!("{}!={v}", r.key),
                    ("In", _) => format!("{} in ({joined})", r.key),
                    ("NotIn", _) => format!("{} notin ({joined})", r.key),
                    ("Exists", _) => r.key.clone(),
                    ("DoesNotExist", _) => format!("!{}", r.key),
                    ("Gt", _) => format!("{}>{joined}", r.key),
                    ("Lt", _) => format!("{}<{joined}", r.key),
                    (op, _) => format!("{} {op} ({joined})", r.key),
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    match terms {
        [] => "all clusters".to_owned(),
        [one] => term(one),
        many => many
            .iter()
            .map(|t| format!("[{}]", term(t)))
            .collect::<Vec<_>>()
            .join(" OR "),
    }
}

/// Where an offloading stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Not yet: the phase of the current generation, if the controller has observed it.
    Waiting(Option<OffloadingPhase>),
    /// Ready or NoClusterSelected: the line to print.
    Done(String),
    /// Failed: the error line.
    Failed(String),
}

/// The phase of the object's current generation (`None` while the controller has not
/// observed it).
pub fn current_phase(obj: &NamespaceOffloading) -> Option<OffloadingPhase> {
    let status = obj.status.as_ref()?;
    let generation = obj.metadata.generation?;
    (status.observed_generation == Some(generation))
        .then_some(status.offloading_phase)
        .flatten()
}

/// The clusters (NamespaceMap names) whose `OffloadingRequired` is True, in key order.
pub fn selected_clusters(obj: &NamespaceOffloading) -> Vec<&str> {
    obj.status
        .iter()
        .flat_map(|s| &s.remote_namespaces_conditions)
        .filter(|(_, conds)| {
            conds
                .iter()
                .any(|c| c.type_ == Type::OffloadingRequired && c.status == ConditionStatus::True)
        })
        .map(|(k, _)| k.as_str())
        .collect()
}

/// The selected clusters whose `Ready` is not True: `<cluster>: <reason>: <message>` each.
pub fn not_ready_clusters(obj: &NamespaceOffloading, only_failed: bool) -> Vec<String> {
    let Some(status) = &obj.status else {
        return Vec::new();
    };
    selected_clusters(obj)
        .into_iter()
        .filter_map(|k| {
            let ready = status
                .remote_namespaces_conditions
                .get(k)?
                .iter()
                .find(|c| c.type_ == Type::Ready && c.status != ConditionStatus::True);
            let ready = ready?;
            let reason = ready.reason.as_deref().unwrap_or("no reason");
            if only_failed && reason != CREATION_LOOP_BACK_OFF.reason {
                return None;
            }
            let message = ready.message.as_deref().unwrap_or("no message");
            Some(format!("{k}: {reason}: {message}"))
        })
        .collect()
}

/// Where the offloading of namespace `ns` stands.
pub fn progress(ns: &str, obj: &NamespaceOffloading) -> Outcome {
    if obj.metadata.deletion_timestamp.is_some() {
        return Outcome::Failed(format!(
            "the NamespaceOffloading of namespace {ns:?} is being deleted (an unoffload is in \
             progress): wait until it is gone, then offload again"
        ));
    }
    let phase = current_phase(obj);
    let remote = obj
        .status
        .as_ref()
        .and_then(|s| s.remote_namespace_name.as_deref())
        .unwrap_or(ns);
    match phase {
        Some(OffloadingPhase::Ready) => Outcome::Done(format!(
            "Namespace {ns:?} offloaded to {} (remote namespace {remote:?})",
            selected_clusters(obj).join(", ")
        )),
        Some(OffloadingPhase::NoClusterSelected) => Outcome::Done(format!(
            "Namespace {ns:?} offloading enabled, but no cluster is selected (phase \
             NoClusterSelected): no virtual node matches the cluster selector"
        )),
        Some(p @ (OffloadingPhase::SomeFailed | OffloadingPhase::AllFailed)) => {
            let failing = not_ready_clusters(obj, true);
            Outcome::Failed(format!(
                "offloading namespace {ns:?} failed (phase {p:?}): {}",
                if failing.is_empty() {
                    "no cluster reports why".to_owned()
                } else {
                    failing.join("; ")
                }
            ))
        }
        other => Outcome::Waiting(other),
    }
}

/// The timeout error of `offload namespace`, naming the phase it was stuck in.
pub fn offload_timeout_line(ns: &str, timeout: &str, last: Option<&NamespaceOffloading>) -> String {
    let head = format!("timed out after {timeout} waiting for namespace {ns:?} to be offloaded");
    let Some(obj) = last else {
        return format!("{head}: the NamespaceOffloading was never seen");
    };
    match current_phase(obj) {
        None if obj.status.is_none() => format!(
            "{head}: the NamespaceOffloading has no status (is the liqo-controller-manager \
             running?)"
        ),
        None => format!(
            "{head}: the controller has not observed the latest change yet (status for \
             generation {:?}, object at {:?})",
            obj.status.as_ref().and_then(|s| s.observed_generation),
            obj.metadata.generation
        ),
        Some(phase) => {
            let waiting = not_ready_clusters(obj, false);
            if waiting.is_empty() {
                format!("{head}: stuck in phase {phase:?}")
            } else {
                format!("{head}: stuck in phase {phase:?}; {}", waiting.join("; "))
            }
        }
    }
}

/// The timeout error of `unoffload namespace`: the phase and the clusters still reported.
pub fn unoffload_timeout_line(ns: &str, timeout: &str, last: &NamespaceOffloading) -> String {
    let phase = last
        .status
        .as_ref()
        .and_then(|s| s.offloading_phase)
        .map_or_else(|| "no phase".to_owned(), |p| format!("phase {p:?}"));
    let clusters: Vec<&str> = last
        .status
        .iter()
        .flat_map(|s| s.remote_namespaces_conditions.keys())
        .map(String::as_str)
        .collect();
    let mut line = format!(
        "timed out after {timeout} waiting for the offloading of namespace {ns:?} to be \
         removed: stuck in {phase}"
    );
    if !clusters.is_empty() {
        line.push_str(&format!(
            "; clusters still reported: {}",
            clusters.join(", ")
        ));
    }
    if let Some(f) = &last.metadata.finalizers
        && !f.is_empty()
    {
        line.push_str(&format!("; finalizers: {}", f.join(", ")));
    }
    line
}
