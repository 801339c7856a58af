//! The offer's inputs, and how they are read from Kubernetes objects: a node's allocatable,
//! readiness and whether it is a virtual node; a pod's node, phase, labels and effective
//! requests (Kubernetes' rule: the larger of the containers' sum and each init container,
//! sidecars counted alongside both, pod-level requests where set, plus the overhead).

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Container, Node, Pod, PodSpec},
    apimachinery::pkg::api::resource::Quantity,
};

use crate::{
    consts::{labels, values},
    quantity::{Amount, InvalidQuantity, Resources},
};

/// A node, as the offer sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInput {
    /// Its name.
    pub name: String,
    /// `status.allocatable`.
    pub allocatable: Resources,
    /// A virtual node (`liqo.io/type=virtual-node`): another cluster, never offered.
    pub is_virtual: bool,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
}

/// A pod, as the offer sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodInput {
    /// `spec.nodeName`.
    pub node: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its effective requests ([`pod_requests`]).
    pub requests: Resources,
}

/// A quantity of an object that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {field}")]
pub struct BadInput {
    /// `node <name>` or `pod <namespace>/<name>`.
    pub object: String,
    /// The field (`status.allocatable.cpu`, `spec.containers[1].resources.requests.memory`).
    pub field: String,
    /// The refused quantity.
    #[source]
    pub source: InvalidQuantity,
}

type Located<T> = Result<T, (String, InvalidQuantity)>;

fn amounts(field: &str, list: Option<&BTreeMap<String, Quantity>>) -> Located<Resources> {
    list.into_iter()
        .flatten()
        .map(|(name, q)| match Amount::from_quantity(q) {
            Ok(a) => Ok((name.clone(), a)),
            Err(e) => Err((format!("{field}.{name}"), e)),
        })
        .collect()
}

impl NodeInput {
    /// Reads a Node.
    pub fn from_node(node: &Node) -> Result<Self, BadInput> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let status = node.status.as_ref();
        let allocatable = amounts(
            "status.allocatable",
            status.and_then(|s| s.allocatable.as_ref()),
        )
        .map_err(|(field, source)| BadInput {
            object: format!("node {name}"),
            field,
            source,
        })?;
        let is_virtual = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::NODE_TYPE))
            .is_some_and(|t| t == values::VIRTUAL_NODE);
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        Ok(Self {
            name,
            allocatable,
            is_virtual,
            ready,
        })
    }
}

impl PodInput {
    /// Reads a Pod.
    pub fn from_pod(pod: &Pod) -> Result<Self, BadInput> {
        let requests = match &pod.spec {
            Some(spec) => pod_requests(spec).map_err(|e| BadInput {
                object: format!(
                    "pod {}/{}",
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                    pod.metadata.name.as_deref().unwrap_or_default()
                ),
                ..e
            })?,
            None => Resources::new(),
        };
        Ok(Self {
            node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            requests,
        })
    }
}

fn container_requests(field: &str, c: &Container) -> Located<Resources> {
    amounts(
        &format!("{field}.resources.requests"),
        c.resources.as_ref().and_then(|r| r.requests.as_ref()),
    )
}

fn plus(mut a: Resources, b: &Resources) -> Resources {
    for (name, amount) in b {
        let slot = a.entry(name.clone()).or_default();
        *slot = slot.plus(*amount);
    }
    a
}

fn max(mut a: Resources, b: &Resources) -> Resources {
    for (name, amount) in b {
        let slot = a.entry(name.clone()).or_default();
        *slot = (*slot).max(*amount);
    }
    a
}

/// A pod's effective requests, as the scheduler counts them: the app containers' sum, sidecars
/// (init containers with `restartPolicy: Always`) added to it; the larger of that and each
/// init container's request (plus the sidecars started before it); pod-level requests
/// (`spec.resources`) replacing the aggregate for the resources they set; plus the overhead.
/// An error names the field of the bad quantity (its object reads `pod spec`).
pub fn pod_requests(spec: &PodSpec) -> Result<Resources, BadInput> {
    spec_requests(spec).map_err(|(field, source)| BadInput {
        object: "pod spec".into(),
        field,
        source,
    })
}

fn spec_requests(spec: &PodSpec) -> Located<Resources> {
    let mut reqs = Resources::new();
    for (i, c) in spec.containers.iter().enumerate() {
        reqs = plus(
            reqs,
            &container_requests(&format!("spec.containers[{i}]"), c)?,
        );
    }
    let mut sidecars = Resources::new();
    let mut init_max = Resources::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let r = container_requests(&format!("spec.initContainers[{i}]"), c)?;
        let during = if c.restart_policy.as_deref() == Some("Always") {
            reqs = plus(reqs, &r);
            sidecars = plus(sidecars, &r);
            sidecars.clone()
        } else {
            plus(r, &sidecars)
        };
        init_max = max(init_max, &during);
    }
    reqs = max(reqs, &init_max);
    let pod_level = amounts(
        "spec.resources.requests",
        spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
    )?;
    reqs.extend(pod_level);
    let overhead = amounts("spec.overhead", spec.overhead.as_ref())?;
    Ok(plus(reqs, &overhead))
}

#[cfg(test)]
mod tests;
