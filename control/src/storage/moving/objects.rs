//! The objects a move makes (the new claim, the token's Secret, the receiver's Service, the
//! two Jobs), the claim of the original name re-bound to the new volume, and the manifest line
//! `liqo-mover` prints.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    batch::v1::Job,
    core::v1::{PersistentVolumeClaim, Secret, Service},
};
use serde_json::{Value, json};

use super::{Image, MOUNT, MOVE_OF, Names, PORT, PROGRAM, ROLE, TOKEN_ENV};
use crate::{
    consts::{storage as consts, virtual_node},
    storage::forge,
};

/// An object that could not be made from its inputs.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// The claim has no namespace.
    #[error("the claim has no namespace")]
    Namespace,
    /// A forged manifest is not a valid object (a bug: it names the kind).
    #[error("forging the {0}")]
    Invalid(&'static str, #[source] serde_json::Error),
}

fn namespace(claim: &PersistentVolumeClaim) -> Result<&str, ForgeError> {
    claim
        .metadata
        .namespace
        .as_deref()
        .ok_or(ForgeError::Namespace)
}

fn typed<K: serde::de::DeserializeOwned>(kind: &'static str, v: Value) -> Result<K, ForgeError> {
    serde_json::from_value(v).map_err(|e| ForgeError::Invalid(kind, e))
}

/// The spec of a new claim holding what `claim` holds: class `liqo`, its access modes and
/// volume mode, the size it got (its capacity) or else asked.
fn spec_like(claim: &PersistentVolumeClaim) -> Value {
    let spec = claim.spec.clone().unwrap_or_default();
    let size = claim
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref()?.get("storage").cloned())
        .or_else(|| {
            spec.resources
                .as_ref()?
                .requests
                .as_ref()?
                .get("storage")
                .cloned()
        });
    json!({
        "storageClassName": consts::CLASS,
        "accessModes": spec.access_modes,
        "volumeMode": spec.volume_mode,
        "resources": {"requests": {"storage": size}},
    })
}

/// The move's new claim: class `liqo`, the original's size and modes, its node selected (the
/// target), named [`Names::base`].
pub fn temp_claim(
    claim: &PersistentVolumeClaim,
    target: &str,
    names: &Names,
) -> Result<PersistentVolumeClaim, ForgeError> {
    typed(
        "claim",
        json!({
            "metadata": {
                "name": names.base,
                "namespace": namespace(claim)?,
                "labels": names.labels(),
                "annotations": {consts::SELECTED_NODE: target},
            },
            "spec": spec_like(claim),
        }),
    )
}

/// The Secret holding the token both Jobs present (the receiver accepts only it).
pub fn token_secret(
    claim: &PersistentVolumeClaim,
    names: &Names,
    token: &str,
) -> Result<Secret, ForgeError> {
    typed(
        "Secret",
        json!({
            "metadata": {"name": names.base, "namespace": namespace(claim)?, "labels": names.labels()},
            "type": "Opaque",
            "stringData": {TOKEN_ENV: token},
        }),
    )
}

/// The receiver's ClusterIP Service (the sender reaches it by name, also from a provider:
/// the Service is reflected there).
pub fn service(claim: &PersistentVolumeClaim, names: &Names) -> Result<Service, ForgeError> {
    typed(
        "Service",
        json!({
            "metadata": {"name": names.base, "namespace": namespace(claim)?, "labels": names.labels()},
            "spec": {
                "selector": {MOVE_OF: names.uid, ROLE: "receive"},
                "ports": [{"name": "mover", "port": PORT, "targetPort": PORT, "protocol": "TCP"}],
            },
        }),
    )
}

/// A Job of the move running `liqo-mover args...` with claim `volume` mounted at [`MOUNT`].
#[allow(
    clippy::too_many_arguments,
    reason = "one private forge of the two Jobs, each argument named at its two calls"
)]
fn job(
    claim: &PersistentVolumeClaim,
    names: &Names,
    image: &Image,
    role: &str,
    args: Vec<String>,
    volume: &str,
    read_only: bool,
    placement: Value,
    deadline: u64,
) -> Result<Job, ForgeError> {
    let mut pod_labels = names.labels();
    pod_labels.insert(ROLE.to_owned(), role.to_owned());
    let mut command = vec![PROGRAM.to_owned()];
    command.extend(args);
    let mut spec = json!({
        "restartPolicy": "Never",
        "enableServiceLinks": false,
        "automountServiceAccountToken": false,
        "containers": [{
            "name": "mover",
            "image": image.name,
            "imagePullPolicy": image.pull_policy,
            "command": command,
            "env": [
                {"name": TOKEN_ENV, "valueFrom": {"secretKeyRef": {"name": names.base, "key": TOKEN_ENV}}},
                {"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            ],
            "ports": [{"containerPort": PORT, "protocol": "TCP"}],
            // Root: every file is read, and written back with its owner and mode.
            "securityContext": {"runAsUser": 0, "runAsGroup": 0, "allowPrivilegeEscalation": false},
            "volumeMounts": [{"name": "data", "mountPath": MOUNT, "readOnly": read_only}],
        }],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": volume, "readOnly": read_only}}],
    });
    if let (Some(s), Value::Object(p)) = (spec.as_object_mut(), placement) {
        s.extend(p);
    }
    typed(
        "Job",
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": names.job(role), "namespace": namespace(claim)?, "labels": names.labels()},
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": deadline,
                "template": {"metadata": {"labels": pod_labels}, "spec": spec},
            },
        }),
    )
}

/// The variable holding the pod's own address (downward API `status.podIP`): where the
/// receiver listens.
pub(super) const POD_IP_ENV: &str = "POD_IP";

/// The receiver: on node `target`, the new claim mounted, listening on [`PORT`]; stops after
/// `deadline` seconds.
pub fn receiver_job(
    claim: &PersistentVolumeClaim,
    names: &Names,
    image: &Image,
    target: &str,
    deadline: u64,
) -> Result<Job, ForgeError> {
    let args = ["receive", "--dir", MOUNT, "--listen"]
        .map(str::to_owned)
        .into_iter()
        .chain([
            // The pod's own address only (not every interface): the sender reaches it through
            // the Service (from a provider, through the fabric), and it accepts only a caller
            // presenting the move's token. Kubernetes expands $(POD_IP) from the downward API.
            format!("$({POD_IP_ENV}):{PORT}"),
            "--timeout-seconds".into(),
            deadline.to_string(),
        ])
        .collect();
    let placement = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [target]}]}]}}}});
    let volume = names.base.clone();
    job(
        claim, names, image, "receive", args, &volume, false, placement, deadline,
    )
}

/// The sender: the original claim mounted read-only, wherever its volume pins it (a virtual
/// node's taint tolerated: the pod then runs on the provider, next to the data).
pub fn sender_job(
    claim: &PersistentVolumeClaim,
    names: &Names,
    image: &Image,
    deadline: u64,
) -> Result<Job, ForgeError> {
    let args = ["send", "--dir", MOUNT, "--to"]
        .map(str::to_owned)
        .into_iter()
        .chain([
            format!("{}:{PORT}", names.base),
            "--connect-timeout-seconds".into(),
            deadline.to_string(),
        ])
        .collect();
    let placement =
        json!({"tolerations": [{"key": virtual_node::NOT_ALLOWED_TAINT, "operator": "Exists"}]});
    let volume = claim.metadata.name.clone().unwrap_or_default();
    job(
        claim, names, image, "send", args, &volume, true, placement, deadline,
    )
}

/// The claim of `original`'s name, namespace, labels, annotations (but binding ones) and
/// spec, bound to `volume` (which is reserved for it) on node `node`.
pub fn rebound_claim(
    original: &PersistentVolumeClaim,
    volume: &str,
    node: &str,
) -> Result<PersistentVolumeClaim, ForgeError> {
    let mut annotations: BTreeMap<String, String> = original
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !forge::is_binding_annotation(k))
        .collect();
    annotations.insert(consts::SELECTED_NODE.to_owned(), node.to_owned());
    let mut spec = spec_like(original);
    spec["volumeName"] = json!(volume);
    typed(
        "claim",
        json!({
            "metadata": {
                "name": original.metadata.name,
                "namespace": namespace(original)?,
                "labels": original.metadata.labels,
                "annotations": annotations,
            },
            "spec": spec,
        }),
    )
}

/// What `liqo-mover` printed about the files it read (the sender) or re-read from disk (the
/// receiver): `manifest sha256=<hex> files=<n> ... bytes=<n>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The sha256 over every entry.
    pub digest: String,
    /// How many regular files.
    pub files: u64,
    /// How many bytes they hold.
    pub bytes: u64,
}

/// The last manifest line of `log`, if any.
pub fn manifest(log: &str) -> Option<Manifest> {
    let line = log.lines().rev().find(|l| l.starts_with("manifest "))?;
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('='))
    };
    let digest =
        field("sha256").filter(|d| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()))?;
    Some(Manifest {
        digest: digest.to_owned(),
        files: field("files")?.parse().ok()?,
        bytes: field("bytes")?.parse().ok()?,
    })
}
