//! The offloaded pod (§2.3 of the control-plane spec): the ShadowPod forged from a local pod on
//! a virtual node (what is copied, what is stripped), the local status forged from the remote
//! pod's (IPs given already remapped, restarts carried over), and the status of a pod the
//! virtual kubelet cannot offload (`OffloadingBackOff`, `OffloadingAborted`). Pure: no I/O.
//!
//! It never decides whether a pod is offloaded, never maps an IP (the caller gives the IPAM's
//! answers) and never reads a clock (`now` is an input).

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Container, HostIP, Pod, PodIP, PodSpec, PodStatus, Volume},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
};

use crate::{
    api::{
        ClusterId,
        virtualkubelet::{ShadowPod, ShadowPodSpec},
    },
    consts::{
        labels, reflection,
        reflection::{OFFLOADING_ABORTED, OFFLOADING_BACK_OFF},
        virtual_node::NOT_ALLOWED_TAINT,
    },
    shadowpod::token::{self, HomeApi},
};

#[cfg(test)]
mod tests;

/// The ConfigMap every namespace has with the cluster's root CA; reflected under
/// [`remote_config_map_name`] so that it does not collide with the provider's own.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

pub use super::token::{DEFAULT_SERVICE_ACCOUNT, SERVICE_ACCOUNT_VOLUME_PREFIX};

/// Pod phases as the API spells them.
pub mod phases {
    /// Not (yet) running.
    pub const PENDING: &str = "Pending";
    /// Ended with a failure.
    pub const FAILED: &str = "Failed";
    /// Ended successfully.
    pub const SUCCEEDED: &str = "Succeeded";
}

/// The labels every remote object of the reflection carries: origin = home, destination =
/// the provider.
pub fn reflection_labels(home: &ClusterId, foreign: &ClusterId) -> BTreeMap<String, String> {
    BTreeMap::from([
        (reflection::ORIGIN.to_owned(), home.to_string()),
        (reflection::DESTINATION.to_owned(), foreign.to_string()),
    ])
}

/// The label selector of the remote objects of the reflection from `home` to `foreign`.
pub fn reflection_selector(home: &ClusterId, foreign: &ClusterId) -> String {
    format!(
        "{}={home},{}={foreign}",
        reflection::ORIGIN,
        reflection::DESTINATION
    )
}

/// Whether a remote object is ours: it carries both reflection labels with our values.
pub fn is_reflected(
    labels: Option<&BTreeMap<String, String>>,
    home: &ClusterId,
    foreign: &ClusterId,
) -> bool {
    let Some(labels) = labels else { return false };
    reflection_labels(home, foreign)
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
}

/// The remote name of a reflected ConfigMap: the root CA's gets the first five characters of
/// the home cluster's ID appended (`kube-root-ca.crt.<xxxxx>`); any other keeps its name.
pub fn remote_config_map_name(local: &str, home: &ClusterId) -> String {
    if local == ROOT_CA_CONFIG_MAP {
        let id = home.as_str();
        let prefix: String = id.chars().take(5).collect();
        format!("{ROOT_CA_CONFIG_MAP}.{prefix}")
    } else {
        local.to_owned()
    }
}

/// The ShadowPod of `local` in `remote_namespace`: same name; labels and annotations of the
/// local pod plus the reflection labels, minus `liqo.io/shadowPod`, plus the digest of the
/// rest ([`shadow_digest`]); the spec of [`remote_pod_spec`].
pub fn shadow_pod(
    local: &Pod,
    remote_namespace: &str,
    home: &ClusterId,
    foreign: &ClusterId,
    api: Option<&HomeApi>,
) -> ShadowPod {
    let mut labels_out = local.metadata.labels.clone().unwrap_or_default();
    labels_out.remove(labels::SHADOW_POD);
    labels_out.extend(reflection_labels(home, foreign));
    let mut annotations = local.metadata.annotations.clone().unwrap_or_default();
    annotations.remove(reflection::SHADOW_DIGEST);
    let spec = local.spec.clone().unwrap_or_default();
    let name = local.metadata.name.clone().unwrap_or_default();
    let pod = remote_pod_spec(&spec, home, api.map(|a| (a, name.as_str())));
    let digest = shadow_digest(&labels_out, &annotations, &pod);
    annotations.insert(reflection::SHADOW_DIGEST.to_owned(), digest);
    ShadowPod {
        metadata: ObjectMeta {
            name: local.metadata.name.clone(),
            namespace: Some(remote_namespace.to_owned()),
            labels: Some(labels_out),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: ShadowPodSpec { pod },
    }
}

/// The digest of a forged ShadowPod ([`reflection::SHADOW_DIGEST`]): SHA-256 (first 16 bytes,
/// hex) of its labels, its other annotations and its `spec.pod` as JSON. Two forges differ
/// exactly when their digests do (maps serialize in key order, struct fields in a fixed one).
pub fn shadow_digest(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    pod: &PodSpec,
) -> String {
    use sha2::{Digest, Sha256};
    // Serializing string maps and a PodSpec to JSON does not fail.
    let json = serde_json::to_vec(&(labels, annotations, pod)).unwrap_or_default();
    hex::encode(&Sha256::digest(&json)[..16])
}

/// The remote pod's spec from the local one (upstream `RemotePodSpec`): the copied fields
/// only; tolerations without the virtual node's; never affinity, nodeSelector, nodeName,
/// schedulerName, priority or preemption; no provider token automounted; no host namespaces;
/// the `kube-api-access-*` projection's root CA renamed. Its token: with `api` (the home API
/// server and the pod's name), read from the pod's token Secret ([`token::use_secret`]) and
/// every container pointed at the home API server; without, dropped.
pub fn remote_pod_spec(
    local: &PodSpec,
    home: &ClusterId,
    api: Option<(&HomeApi, &str)>,
) -> PodSpec {
    let projected = local
        .volumes
        .iter()
        .flatten()
        .any(|v| v.name.starts_with(SERVICE_ACCOUNT_VOLUME_PREFIX) && v.projected.is_some());
    let api = api.filter(|_| projected);
    let containers = |cs: &Vec<Container>| -> Vec<Container> {
        cs.iter()
            .cloned()
            .map(|mut c| {
                if let Some((a, _)) = api {
                    c.env = token::with_api_env(c.env.take(), a);
                }
                c
            })
            .collect()
    };
    let service_account = local
        .service_account_name
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT.to_owned());
    PodSpec {
        containers: containers(&local.containers),
        init_containers: local.init_containers.as_ref().map(containers),
        volumes: local.volumes.as_ref().map(|v| {
            v.iter()
                .map(|v| remote_volume(v, home, api.map(|(_, pod)| pod)))
                .collect()
        }),
        host_aliases: match api {
            Some((a, _)) => token::host_aliases(local.host_aliases.clone(), a),
            None => local.host_aliases.clone(),
        },
        active_deadline_seconds: local.active_deadline_seconds,
        dns_config: local.dns_config.clone(),
        dns_policy: local.dns_policy.clone(),
        enable_service_links: local.enable_service_links,
        hostname: local.hostname.clone(),
        image_pull_secrets: local.image_pull_secrets.clone(),
        readiness_gates: local.readiness_gates.clone(),
        restart_policy: local.restart_policy.clone(),
        security_context: local.security_context.clone(),
        set_hostname_as_fqdn: local.set_hostname_as_fqdn,
        share_process_namespace: local.share_process_namespace,
        subdomain: local.subdomain.clone(),
        termination_grace_period_seconds: local.termination_grace_period_seconds,
        topology_spread_constraints: local.topology_spread_constraints.clone(),
        service_account_name: Some(service_account),
        tolerations: Some(
            local
                .tolerations
                .iter()
                .flatten()
                .filter(|t| t.key.as_deref() != Some(NOT_ALLOWED_TAINT))
                .cloned()
                .collect::<Vec<_>>(),
        )
        .filter(|t| !t.is_empty()),
        automount_service_account_token: Some(false),
        host_network: Some(false),
        host_ipc: Some(false),
        host_pid: Some(false),
        ..PodSpec::default()
    }
}

/// A volume as the remote pod mounts it: in a `kube-api-access-*` projection the root CA's
/// ConfigMap renamed ([`remote_config_map_name`]) and the ServiceAccount token read from the
/// token Secret of `token_pod` (the provider cannot issue our tokens), or dropped without it;
/// any other volume unchanged.
fn remote_volume(volume: &Volume, home: &ClusterId, token_pod: Option<&str>) -> Volume {
    let mut volume = volume.clone();
    if !volume.name.starts_with(SERVICE_ACCOUNT_VOLUME_PREFIX) {
        return volume;
    }
    if let Some(pod) = token_pod {
        token::use_secret(&mut volume, pod);
    }
    if let Some(projected) = volume.projected.as_mut()
        && let Some(sources) = projected.sources.as_mut()
    {
        sources.retain(|s| s.service_account_token.is_none());
        for source in sources.iter_mut() {
            if let Some(cm) = source.config_map.as_mut() {
                cm.name = remote_config_map_name(&cm.name, home);
            }
        }
    }
    volume
}

/// How the local status is forged from the remote pod's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusInputs<'a> {
    /// The remote pod's IPs as the home cluster reaches them (the IPAM's `MapIp` answers,
    /// or the provider's own without a Liqo network), in the remote order; empty when the
    /// remote pod has none yet.
    pub pod_ips: &'a [String],
    /// The virtual node's IP: every offloaded pod's `hostIP`.
    pub node_ip: &'a str,
    /// Added to every container's `restartCount`: the remote pods replaced so far.
    pub restarts: i32,
    /// The local pod's `metadata.generation` (what a copied `observedGeneration` becomes).
    pub generation: Option<i64>,
}

/// The local pod's status from the remote one (upstream `LocalPodStatus`): the remote status
/// with `podIP`/`podIPs` the mapped IPs (`podIP == podIPs[0]`), `hostIP`/`hostIPs` the
/// virtual node's, every container's `restartCount` plus `restarts`, any
/// `observedGeneration` the local pod's generation, and no `nominatedNodeName` (the provider's
/// scheduler names one of its nodes while it binds, e.g. a pod waiting for its volume; the
/// home pod is bound to the virtual node, and its API server refuses a nomination on a bound
/// pod, 422, which held the whole status back).
pub fn local_status(remote: &PodStatus, input: &StatusInputs<'_>) -> PodStatus {
    let mut status = remote.clone();
    status.nominated_node_name = None;
    if let Some(first) = input.pod_ips.first() {
        status.pod_ip = Some(first.clone());
        status.pod_ips = Some(
            input
                .pod_ips
                .iter()
                .map(|ip| PodIP { ip: ip.clone() })
                .collect(),
        );
    } else {
        status.pod_ip = None;
        status.pod_ips = None;
    }
    status.host_ip = Some(input.node_ip.to_owned());
    status.host_ips = Some(vec![HostIP {
        ip: input.node_ip.to_owned(),
    }]);
    for c in status.container_statuses.iter_mut().flatten() {
        c.restart_count = c.restart_count.saturating_add(input.restarts);
    }
    if status.observed_generation.is_some() {
        status.observed_generation = input.generation;
    }
    for c in status.conditions.iter_mut().flatten() {
        if c.observed_generation.is_some() {
            c.observed_generation = input.generation;
        }
    }
    status
}

/// The remote pods replaced before the first sighting of the current one (upstream
/// `InferAdditionalRestarts`): the local first container's `restartCount` minus the remote
/// one's of the same name, when positive; 0 otherwise (a local status not yet written, a
/// remote restart not yet reported).
pub fn infer_restarts(local: &PodStatus, remote: &PodStatus) -> i32 {
    let Some(first) = local.container_statuses.as_ref().and_then(|c| c.first()) else {
        return 0;
    };
    remote
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == first.name)
        .map_or(0, |c| (first.restart_count - c.restart_count).max(0))
}

/// Why a pod on the virtual node is not offloaded: its phase and reason (upstream fallback):
/// never started → `Pending`/[`OFFLOADING_BACK_OFF`]; started → `Failed`/
/// [`OFFLOADING_ABORTED`] (so that its controller replaces it); `None` for a pod that already
/// succeeded (left as it is).
pub fn rejection(local: &PodStatus) -> Option<(&'static str, &'static str)> {
    let phase = local.phase.as_deref().unwrap_or(phases::PENDING);
    if phase == phases::SUCCEEDED {
        return None;
    }
    let started = phase != phases::PENDING
        || local
            .container_statuses
            .as_ref()
            .is_some_and(|c| !c.is_empty());
    Some(if started {
        (phases::FAILED, OFFLOADING_ABORTED)
    } else {
        (phases::PENDING, OFFLOADING_BACK_OFF)
    })
}

/// The status of a rejected pod (upstream `LocalRejectedPodStatus`): `phase` and `reason`;
/// every true condition false with `reason`, transitioned at `now`; no container ready.
pub fn rejected_status(local: &PodStatus, phase: &str, reason: &str, now: Time) -> PodStatus {
    let mut status = local.clone();
    status.phase = Some(phase.to_owned());
    status.reason = Some(reason.to_owned());
    for c in status.conditions.iter_mut().flatten() {
        if c.status == "True" {
            c.status = "False".to_owned();
            c.reason = Some(reason.to_owned());
            c.last_transition_time = Some(now.clone());
        }
    }
    for c in status.container_statuses.iter_mut().flatten() {
        c.ready = false;
    }
    status
}

/// Whether a pod was rejected for good (`Failed`/[`OFFLOADING_ABORTED`]): its controller made
/// a replacement, it is never offloaded again.
pub fn is_aborted(local: &PodStatus) -> bool {
    local.phase.as_deref() == Some(phases::FAILED)
        && local.reason.as_deref() == Some(OFFLOADING_ABORTED)
}
