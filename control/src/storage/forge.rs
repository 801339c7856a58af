//! The storage fabric's objects, made whole from their inputs.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{
        HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
        ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
        PersistentVolumeSpec, VolumeNodeAffinity, VolumeResourceRequirements,
    },
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::ObjectMeta},
};

use super::{StorageError, describe};
use crate::{
    consts::{labels, storage as consts, virtual_node::HOSTNAME},
    selector,
};

/// The prefix of a volume's name before its claim's UID.
const VOLUME_PREFIX: &str = "pvc-";

/// The name of the volume provisioned for the claim of UID `uid` (as the external
/// provisioner names them).
pub fn volume_name(uid: &str) -> String {
    format!("{VOLUME_PREFIX}{uid}")
}

/// The inverse of [`volume_name`]: the name of the twin claim (in the twin namespace) that a
/// volume of ours mirrors, from the volume's own name (`pvc-<uid>` -> `<uid>`, the UID of the
/// claim it was provisioned for). Not its claim reference's UID: `liqoctl move volume`
/// re-binds a volume to a new claim of the same name (another UID), its twin keeping its name.
/// `None` for a name without the prefix (or nothing after it).
pub fn twin_name_of(volume: &PersistentVolume) -> Option<&str> {
    volume
        .metadata
        .name
        .as_deref()?
        .strip_prefix(VOLUME_PREFIX)
        .filter(|n| !n.is_empty())
}

/// What the forges need of a claim: fields the API server always sets.
struct Claim<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
    spec: &'a PersistentVolumeClaimSpec,
}

fn claim(c: &PersistentVolumeClaim) -> Result<Claim<'_>, StorageError> {
    let missing = |field| StorageError::Missing {
        object: describe("PersistentVolumeClaim", &c.metadata),
        field,
    };
    Ok(Claim {
        namespace: c
            .metadata
            .namespace
            .as_deref()
            .ok_or(missing("metadata.namespace"))?,
        name: c.metadata.name.as_deref().ok_or(missing("metadata.name"))?,
        uid: c.metadata.uid.as_deref().ok_or(missing("metadata.uid"))?,
        spec: c.spec.as_ref().ok_or(missing("spec"))?,
    })
}

/// The size `claim` asks for (`spec.resources.requests.storage`).
pub(super) fn requested(c: &PersistentVolumeClaim) -> Result<Quantity, StorageError> {
    c.spec
        .as_ref()
        .and_then(|s| {
            s.resources
                .as_ref()?
                .requests
                .as_ref()?
                .get("storage")
                .cloned()
        })
        .ok_or_else(|| StorageError::Missing {
            object: describe("PersistentVolumeClaim", &c.metadata),
            field: "spec.resources.requests.storage",
        })
}

/// The claim reference a volume bound to `c` carries.
fn claim_ref(c: &Claim<'_>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: Some(c.namespace.into()),
        name: Some(c.name.into()),
        uid: Some(c.uid.into()),
        ..ObjectReference::default()
    }
}

/// The claim reference a volume bound to `c` carries (API version, kind, namespace, name,
/// UID).
pub(super) fn reference(c: &PersistentVolumeClaim) -> Result<ObjectReference, StorageError> {
    Ok(claim_ref(&claim(c)?))
}

/// How a twin claim (and a volume we provision) names its virtual claim: the namespace as a
/// label (selectable), the name as an annotation (a claim's name may be longer than a label
/// value).
fn names_claim(meta: &mut ObjectMeta, namespace: &str, name: &str) {
    meta.labels.get_or_insert_default().insert(
        consts::VIRTUAL_PVC_NAMESPACE.to_owned(),
        namespace.to_owned(),
    );
    meta.annotations
        .get_or_insert_default()
        .insert(consts::VIRTUAL_PVC_NAME.to_owned(), name.to_owned());
}

/// The virtual claim (namespace, name) a twin claim or a volume of ours names, if it does.
pub fn named_claim(meta: &ObjectMeta) -> Option<(&str, &str)> {
    let ns = meta.labels.as_ref()?.get(consts::VIRTUAL_PVC_NAMESPACE)?;
    let name = meta.annotations.as_ref()?.get(consts::VIRTUAL_PVC_NAME)?;
    Some((ns, name))
}

/// Whether `twin` names `virtual_claim` as the claim it backs.
pub fn is_twin_of(twin: &PersistentVolumeClaim, namespace: &str, name: &str) -> bool {
    named_claim(&twin.metadata) == Some((namespace, name))
}

/// The twin claim of `virtual_claim`, bound on physical node `node`: named after its UID in
/// `namespace` (`liqo-storage`), of class `class` (none: the cluster's default), the same
/// size, access modes and volume mode, its node selected already (so a `WaitForFirstConsumer`
/// class provisions it there without a pod).
pub fn twin_claim(
    virtual_claim: &PersistentVolumeClaim,
    node: &str,
    class: Option<&str>,
    namespace: &str,
) -> Result<PersistentVolumeClaim, StorageError> {
    let c = claim(virtual_claim)?;
    let size = requested(virtual_claim)?;
    let mut metadata = ObjectMeta {
        name: Some(c.uid.to_owned()),
        namespace: Some(namespace.to_owned()),
        annotations: Some(BTreeMap::from([(
            consts::SELECTED_NODE.to_owned(),
            node.to_owned(),
        )])),
        ..ObjectMeta::default()
    };
    names_claim(&mut metadata, c.namespace, c.name);
    Ok(PersistentVolumeClaim {
        metadata,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: c.spec.access_modes.clone(),
            volume_mode: c.spec.volume_mode.clone(),
            storage_class_name: class.map(str::to_owned),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_owned(), size)])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    })
}

/// The affinity that keeps a volume off virtual nodes.
fn physical_only() -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: labels::NODE_TYPE.to_owned(),
                operator: "DoesNotExist".to_owned(),
                values: None,
            }]),
            match_fields: None,
        }],
    }
}

/// The metadata of a volume we provision for `c`.
fn volume_meta(c: &Claim<'_>) -> ObjectMeta {
    let mut meta = ObjectMeta {
        name: Some(volume_name(c.uid)),
        annotations: Some(BTreeMap::from([(
            consts::PROVISIONED_BY.to_owned(),
            consts::PROVISIONER.to_owned(),
        )])),
        ..ObjectMeta::default()
    };
    names_claim(&mut meta, c.namespace, c.name);
    meta
}

/// The virtual volume of `virtual_claim`, mirroring `real` (the volume its twin claim is bound
/// to): the same source, size, modes and mount options, bound to the virtual claim, of class
/// `liqo` with reclaim policy `reclaim`, its node affinity the real one's with
/// `liqo.io/type DoesNotExist` added to every term (data gravity: never a virtual node).
pub fn virtual_volume(
    virtual_claim: &PersistentVolumeClaim,
    real: &PersistentVolume,
    reclaim: &str,
) -> Result<PersistentVolume, StorageError> {
    let c = claim(virtual_claim)?;
    let mut spec = real.spec.clone().ok_or_else(|| StorageError::Missing {
        object: describe("PersistentVolume", &real.metadata),
        field: "spec",
    })?;
    let required = spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.clone())
        .unwrap_or(NodeSelector {
            node_selector_terms: Vec::new(),
        });
    spec.node_affinity = Some(VolumeNodeAffinity {
        required: Some(selector::merge(&required, &physical_only())),
    });
    spec.claim_ref = Some(claim_ref(&c));
    spec.storage_class_name = Some(consts::CLASS.to_owned());
    spec.persistent_volume_reclaim_policy = Some(reclaim.to_owned());
    spec.volume_attributes_class_name = None;
    Ok(PersistentVolume {
        metadata: volume_meta(&c),
        spec: Some(spec),
        status: None,
    })
}

/// The placeholder volume of `virtual_claim` bound on virtual node `node`: its data lives on
/// the provider (the copy of the claim there), so it is never mounted here; its affinity pins
/// every later consumer to `node` (data gravity).
pub fn placeholder_volume(
    virtual_claim: &PersistentVolumeClaim,
    node: &str,
    reclaim: &str,
) -> Result<PersistentVolume, StorageError> {
    let c = claim(virtual_claim)?;
    let size = requested(virtual_claim)?;
    Ok(PersistentVolume {
        metadata: volume_meta(&c),
        spec: Some(PersistentVolumeSpec {
            access_modes: c.spec.access_modes.clone(),
            volume_mode: c.spec.volume_mode.clone(),
            capacity: Some(BTreeMap::from([("storage".to_owned(), size)])),
            claim_ref: Some(claim_ref(&c)),
            storage_class_name: Some(consts::CLASS.to_owned()),
            persistent_volume_reclaim_policy: Some(reclaim.to_owned()),
            host_path: Some(HostPathVolumeSource {
                path: consts::PLACEHOLDER_PATH.to_owned(),
                type_: None,
            }),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: HOSTNAME.to_owned(),
                            operator: "In".to_owned(),
                            values: Some(vec![node.to_owned()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    })
}

/// Whether `v` was provisioned by us.
pub fn is_ours(v: &PersistentVolume) -> bool {
    v.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(consts::PROVISIONED_BY))
        .map(String::as_str)
        == Some(consts::PROVISIONER)
}

/// Whether a claim annotation is Kubernetes' binding bookkeeping (not carried to a copy).
pub fn is_binding_annotation(key: &str) -> bool {
    consts::BINDING_ANNOTATION_PREFIXES
        .iter()
        .any(|p| key.starts_with(p))
}

/// The spec of the provider's copy of a claim bound on a virtual node: the size, access modes
/// and volume mode asked, of class `class` (the offer's default; none: the provider's
/// default); no selector, data source or volume name (they name local objects).
pub fn remote_claim_spec(
    local: &PersistentVolumeClaimSpec,
    class: Option<&str>,
) -> PersistentVolumeClaimSpec {
    PersistentVolumeClaimSpec {
        access_modes: local.access_modes.clone(),
        volume_mode: local.volume_mode.clone(),
        resources: local.resources.clone(),
        storage_class_name: class.map(str::to_owned),
        ..PersistentVolumeClaimSpec::default()
    }
}
