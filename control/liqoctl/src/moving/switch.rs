//! The switch, once the copy is verified: the new volume kept (`Retain`) and marked with the
//! claim it goes to, the move's claim deleted, the volume reserved for the original name, the
//! original deleted (its data with it), a claim of the original name bound to the new volume,
//! and the volume given back its reclaim policy. Each step is finished by the next `move
//! volume` of the claim if this one is killed ([`kept_for`], [`finish`]).

use std::time::{Duration, Instant};

use control::{
    consts::storage as consts,
    requests::delete_by_uid,
    storage::{
        forge,
        moving::{self, MOVED_CLAIM, MOVED_FROM_UID, Names, RECLAIM_BEFORE},
    },
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use super::{MoveError, io, kube_err};

/// How long a claim's deletion or binding is waited for.
const WAIT: Duration = Duration::from_secs(120);

/// The claim a volume kept by a move goes to (none: not kept by a move).
fn record(volume: &PersistentVolume) -> Result<Option<PersistentVolumeClaim>, MoveError> {
    let Some(a) = volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MOVED_CLAIM))
    else {
        return Ok(None);
    };
    serde_json::from_str(a).map(Some).map_err(|e| {
        MoveError::Wait(format!(
            "annotation {MOVED_CLAIM} of volume {} is not a claim ({e}): a move kept its data \
             there; fix or remove the annotation",
            volume.name_any()
        ))
    })
}

/// The volume a move kept for claim `ns/name`, if one did.
pub(super) async fn kept_for(
    client: &Client,
    ns: &str,
    name: &str,
) -> Result<Option<PersistentVolume>, MoveError> {
    let all = Api::<PersistentVolume>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(kube_err("listing the PersistentVolumes"))?
        .items;
    for v in all {
        if record(&v)?.is_some_and(|c| {
            c.metadata.namespace.as_deref() == Some(ns) && c.metadata.name.as_deref() == Some(name)
        }) {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

/// Deletes a copy kept by an earlier move that was killed before the original went (the
/// original may have changed since): its twin claim, then the volume.
pub(super) async fn discard(client: &Client, volume: &PersistentVolume) -> Result<(), MoveError> {
    let name = volume.name_any();
    println!("Discarding volume {name}, the copy of an earlier move killed before the switch");
    if let Some(twin) = forge::twin_name_of(volume) {
        match Api::<PersistentVolumeClaim>::namespaced(client.clone(), consts::NAMESPACE)
            .delete(twin, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(kube_err(format!("deleting twin claim {twin}"))(e)),
        }
    }
    Api::<PersistentVolume>::all(client.clone())
        .delete(&name, &delete_by_uid(volume.uid().unwrap_or_default()))
        .await
        .map(drop)
        .map_err(kube_err(format!("deleting volume {name}")))
}

async fn patch_volume(
    client: &Client,
    name: &str,
    patch: serde_json::Value,
) -> Result<PersistentVolume, MoveError> {
    Api::<PersistentVolume>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(kube_err(format!("updating volume {name}")))
}

/// Waits until claim `ns/name` of UID `uid` is gone.
pub(super) async fn gone(
    client: &Client,
    ns: &str,
    name: &str,
    uid: Option<&str>,
) -> Result<(), MoveError> {
    let api = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns);
    let deadline = Instant::now() + WAIT;
    loop {
        let c = api
            .get_opt(name)
            .await
            .map_err(kube_err(format!("reading claim {ns}/{name}")))?;
        if c.is_none_or(|c| c.metadata.uid.as_deref() != uid) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(MoveError::Wait(format!(
                "claim {ns}/{name} was not gone within {WAIT:?} (a pod still mounts it?)"
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Switches `original` to the verified copy in the move's claim (`names`) on `node`.
pub(super) async fn switch(
    client: &Client,
    original: &PersistentVolumeClaim,
    names: &Names,
    node: &str,
    seen: &std::collections::BTreeSet<String>,
) -> Result<(), MoveError> {
    let ns = original.metadata.namespace.as_deref().unwrap_or_default();
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns);
    let temp = claims
        .get(&names.base)
        .await
        .map_err(kube_err(format!("reading claim {ns}/{}", names.base)))?;
    let volume = temp
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .ok_or_else(|| MoveError::Copy(format!("claim {ns}/{} is not bound", names.base)))?;
    io::delete_jobs(client, ns, names, io::PODS_GONE).await?;
    let v = Api::<PersistentVolume>::all(client.clone())
        .get(&volume)
        .await
        .map_err(kube_err(format!("reading volume {volume}")))?;
    let policy = v
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.clone())
        .unwrap_or_else(|| "Delete".into());
    let goes_to = serde_json::to_string(&moving::rebound_claim(original, &volume, node)?)
        .map_err(|e| MoveError::Copy(format!("recording the claim to make: {e}")))?;
    // From here on the copy is kept whatever becomes of the claims.
    patch_volume(
        client,
        &volume,
        json!({
            "metadata": {"annotations": {MOVED_CLAIM: goes_to, RECLAIM_BEFORE: policy,
                MOVED_FROM_UID: original.uid().unwrap_or_default()}},
            "spec": {"persistentVolumeReclaimPolicy": "Retain"},
        }),
    )
    .await?;
    let switch_err = |e: MoveError| MoveError::Switch {
        volume: volume.clone(),
        source: Box::new(e),
    };
    claims
        .delete(&names.base, &delete_by_uid(temp.uid().unwrap_or_default()))
        .await
        .map_err(kube_err(format!("deleting claim {ns}/{}", names.base)))
        .map_err(switch_err)?;
    gone(client, ns, &names.base, temp.uid().as_deref())
        .await
        .map_err(switch_err)?;
    // A pod that used the original since the check (mounting it now, or made since, even
    // finished) may have written what the copy lacks: the original stays, the copy goes.
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing the pods of {ns}")))
        .map_err(switch_err)?
        .items;
    let by: Vec<String> = moving::used_since(&original.name_any(), &names.uid, &pods, seen)
        .iter()
        .map(|p| p.name_any())
        .collect();
    if !by.is_empty() {
        let v = Api::<PersistentVolume>::all(client.clone())
            .get(&volume)
            .await
            .map_err(kube_err(format!("reading volume {volume}")))
            .map_err(switch_err)?;
        discard(client, &v).await.map_err(switch_err)?;
        return Err(MoveError::Copy(format!(
            "pod(s) {} used {ns}/{} during the copy: the copy is discarded",
            by.join(", "),
            original.name_any()
        )));
    }
    // The original goes, and its data with it: the copy is verified and kept.
    claims
        .delete(
            &original.name_any(),
            &delete_by_uid(original.uid().unwrap_or_default()),
        )
        .await
        .map_err(kube_err(format!(
            "deleting claim {ns}/{}",
            original.name_any()
        )))
        .map_err(switch_err)?;
    gone(client, ns, &original.name_any(), original.uid().as_deref())
        .await
        .map_err(switch_err)?;
    let v = Api::<PersistentVolume>::all(client.clone())
        .get(&volume)
        .await
        .map_err(kube_err(format!("reading volume {volume}")))
        .map_err(switch_err)?;
    finish(client, &v).await
}

/// Ends a move whose copy is in `volume` (kept, [`MOVED_CLAIM`] naming the claim): the
/// volume reserved for the claim, the claim made (or found) and bound, its twin and the
/// volume naming it, the reclaim policy restored.
pub(super) async fn finish(client: &Client, volume: &PersistentVolume) -> Result<(), MoveError> {
    let name = volume.name_any();
    let err = |e: MoveError| MoveError::Switch {
        volume: name.clone(),
        source: Box::new(e),
    };
    let claim = record(volume)?.ok_or_else(|| {
        MoveError::Wait(format!(
            "volume {name} has no {MOVED_CLAIM}: no move kept it"
        ))
    })?;
    let (ns, cname) = (
        claim.metadata.namespace.clone().unwrap_or_default(),
        claim.metadata.name.clone().unwrap_or_default(),
    );
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
    let existing = claims
        .get_opt(&cname)
        .await
        .map_err(kube_err(format!("reading claim {ns}/{cname}")))
        .map_err(err)?;
    if let Some(c) = &existing
        && c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) != Some(name.as_str())
    {
        // Made again by someone since the original went: never bound over, never discarded.
        return Err(MoveError::Conflict(format!(
            "claim {ns}/{cname} (UID {}) was made again while the move switched: the verified \
             copy stays in volume {name} (Retain); delete claim {ns}/{cname}, then run move \
             volume again to bind the copy to a claim of that name",
            c.uid().unwrap_or_default()
        )));
    }
    if existing.is_none() {
        if !moving::reserved_for(volume, &ns, &cname) {
            patch_volume(client, &name, moving::reserve_patch(&ns, &cname))
                .await
                .map_err(err)?;
        }
        claims
            .create(&PostParams::default(), &claim)
            .await
            .map_err(kube_err(format!("creating claim {ns}/{cname}")))
            .map_err(err)?;
    }
    let deadline = Instant::now() + WAIT;
    loop {
        let c = claims
            .get(&cname)
            .await
            .map_err(kube_err(format!("reading claim {ns}/{cname}")))
            .map_err(err)?;
        let bound_here = c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == Some(&name);
        if bound_here && c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound") {
            break;
        }
        if Instant::now() >= deadline {
            return Err(err(MoveError::Wait(format!(
                "claim {ns}/{cname} was not bound to volume {name} within {WAIT:?}"
            ))));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The twin and the volume name the claim they back now.
    let names_it = json!({"metadata": {"annotations": {consts::VIRTUAL_PVC_NAME: cname}}});
    if let Some(twin) = forge::twin_name_of(volume) {
        Api::<PersistentVolumeClaim>::namespaced(client.clone(), consts::NAMESPACE)
            .patch(twin, &PatchParams::default(), &Patch::Merge(&names_it))
            .await
            .map_err(kube_err(format!(
                "updating twin claim {}/{twin}",
                consts::NAMESPACE
            )))
            .map_err(err)?;
    }
    let policy = volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECLAIM_BEFORE))
        .cloned()
        .unwrap_or_else(|| "Delete".into());
    patch_volume(client, &name, json!({
        "metadata": {"annotations": {MOVED_CLAIM: null, RECLAIM_BEFORE: null, MOVED_FROM_UID: null,
            consts::VIRTUAL_PVC_NAME: cname}},
        "spec": {"persistentVolumeReclaimPolicy": policy},
    }))
    .await
    .map_err(err)?;
    println!("Claim {ns}/{cname} is bound to volume {name}, which holds the moved data");
    // A move finished by a later run leaves no Secret or Service of its own behind.
    if let Some(uid) = volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MOVED_FROM_UID))
    {
        io::clean(client, &ns, &Names::new(uid), false).await?;
    }
    Ok(())
}
