//! What becomes of a volume of ours once its claim is gone (phase `Released`): with reclaim
//! policy `Delete`, the twin claim first (the one named after the volume, [`decide`]; the real
//! volume's reclaim policy then decides what becomes of the real data), then the volume; with
//! `Retain`, nothing (the operator keeps both). A volume whose claim exists is never touched.
//! And what becomes of a twin claim whose virtual claim was deleted before its volume was made
//! ([`orphan`]): deleted, as its claim was.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::forge;

/// One thing to do about a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing (why, for the log).
    Nothing(&'static str),
    /// Delete the twin claim (UID precondition).
    DeleteTwin {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its UID.
        uid: String,
    },
    /// Delete the volume (UID precondition).
    DeleteVolume {
        /// Its name.
        name: String,
        /// Its UID.
        uid: String,
    },
}

/// What to do about `volume`, given the claim of the twin namespace named after the volume's
/// own name (`twin`, if any: `pvc-<name>` mirrors `<name>`, [`forge::twin_name_of`]; not its
/// claim reference's UID, which `liqoctl move volume` changes). It is deleted first only if it
/// names the claim the volume was bound to (its namespace and name, as the move updates them).
pub fn decide(volume: &PersistentVolume, twin: Option<&PersistentVolumeClaim>) -> Action {
    if !forge::is_ours(volume) {
        return Action::Nothing("not provisioned by liqo.io/storage");
    }
    if volume.metadata.deletion_timestamp.is_some() {
        return Action::Nothing("being deleted");
    }
    let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Released") {
        return Action::Nothing("its claim exists");
    }
    let spec = volume.spec.as_ref();
    if spec.and_then(|s| s.persistent_volume_reclaim_policy.as_deref()) != Some("Delete") {
        return Action::Nothing("reclaim policy is not Delete");
    }
    let claim = spec.and_then(|s| s.claim_ref.as_ref());
    let (ns, name) = (
        claim
            .and_then(|c| c.namespace.as_deref())
            .unwrap_or_default(),
        claim.and_then(|c| c.name.as_deref()).unwrap_or_default(),
    );
    match twin {
        Some(t) if forge::is_twin_of(t, ns, name) => {
            if t.metadata.deletion_timestamp.is_some() {
                Action::Nothing("its twin claim is being deleted")
            } else {
                Action::DeleteTwin {
                    namespace: t.metadata.namespace.clone().unwrap_or_default(),
                    name: t.metadata.name.clone().unwrap_or_default(),
                    uid: t.metadata.uid.clone().unwrap_or_default(),
                }
            }
        }
        _ => Action::DeleteVolume {
            name: volume.metadata.name.clone().unwrap_or_default(),
            uid: volume.metadata.uid.clone().unwrap_or_default(),
        },
    }
}

/// Whether `twin` is left over: the virtual claim it names is gone (or is another claim of
/// that name: its UID is not the twin's name), and no volume was made for it (`volume`: whether
/// `pvc-<twin's name>` exists; if it does, [`decide`] handles the release; the caller also says
/// `true` under `Retain`, which keeps every twin). Then the twin is to be deleted (UID
/// precondition): its claim was deleted by name.
pub fn orphan(
    twin: &PersistentVolumeClaim,
    claim: Option<&PersistentVolumeClaim>,
    volume: bool,
) -> Option<Action> {
    let name = twin.metadata.name.as_deref()?;
    forge::named_claim(&twin.metadata)?;
    if volume || twin.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let live = claim.is_some_and(|c| {
        c.metadata.uid.as_deref() == Some(name) && c.metadata.deletion_timestamp.is_none()
    });
    (!live).then(|| Action::DeleteTwin {
        namespace: twin.metadata.namespace.clone().unwrap_or_default(),
        name: name.to_owned(),
        uid: twin.metadata.uid.clone().unwrap_or_default(),
    })
}
