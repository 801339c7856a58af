//! The storage fabric's guard on the lab's control planes: `liqoctl unoffload namespace` of a
//! namespace whose claim of class `liqo` holds data on milan is refused, naming it, and changes
//! nothing; with `--delete-remote-volumes` the claim, its copy, the placeholder and the remote
//! namespace go. (The unpeer guard is checked at the end of the offload test.)

use std::time::Instant;

use e2e::lab::k8s::K8sLab;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::{Api, Client, api::DeleteParams};
use serde_json::json;

use super::{
    run,
    storage::{bound, claim, create, gone, local_volume, pod, running},
    until,
};

/// `liqoctl unoffload namespace` with a claim of class `liqo` holding data on milan: refused
/// naming it, nothing changed; with `--delete-remote-volumes`: done, the claim, its copy, the
/// placeholder and the remote namespace gone.
pub(crate) async fn unoffload_keeps_remote_data_unless_asked(
    k: &K8sLab,
    rome: &Client,
    milan: &Client,
) {
    const OFF: &str = "storage-off";
    create(
        &Api::<PersistentVolume>::all(milan.clone()),
        local_volume("milan-n0-b", "n0", None),
    )
    .await;
    create(
        &Api::<Namespace>::all(rome.clone()),
        json!({"metadata": {"name": OFF}}),
    )
    .await;
    run(
        k,
        "liqoctl",
        "rome",
        &[
            "offload",
            "namespace",
            OFF,
            "--namespace-mapping-strategy",
            "EnforceSameName",
            "--pod-offloading-strategy",
            "Remote",
            "--timeout",
            "2m",
        ],
    );
    let claims = Api::<PersistentVolumeClaim>::namespaced(rome.clone(), OFF);
    let pods = Api::<Pod>::namespaced(rome.clone(), OFF);
    create(&claims, claim("data")).await;
    let uid = claims.get("data").await.unwrap().metadata.uid.unwrap();
    create(&pods, pod("s-0", "data")).await;
    until(120, "s-0 Running", || running(&pods, "s-0")).await;
    let remote_claims = Api::<PersistentVolumeClaim>::namespaced(milan.clone(), OFF);
    until(60, "the copy bound on milan", || {
        bound(&remote_claims, "data")
    })
    .await;

    let out = k
        .tool("liqoctl", "rome", &["unoffload", "namespace", OFF])
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {err}");
    assert!(
        err.contains("storage-off/data (on liqo-milan)") && err.contains("--delete-remote-volumes"),
        "the refusal names the claim and the way out: {err}"
    );
    // Nothing changed.
    let offloading =
        Api::<control::api::offloading::NamespaceOffloading>::namespaced(rome.clone(), OFF);
    assert!(
        offloading
            .get_opt(control::api::offloading::NAME)
            .await
            .unwrap()
            .is_some(),
        "still offloaded"
    );
    bound(&remote_claims, "data")
        .await
        .expect("the copy is still bound");
    assert!(claims.get_opt("data").await.unwrap().is_some());

    let t = Instant::now();
    let out = run(
        k,
        "liqoctl",
        "rome",
        &["unoffload", "namespace", OFF, "--delete-remote-volumes"],
    );
    assert!(out.contains("Claim storage-off/data deleted"), "{out}");
    gone(
        &Api::<Namespace>::all(milan.clone()),
        OFF,
        "the remote namespace",
    )
    .await;
    println!(
        "TIMING unoffload --delete-remote-volumes, the data gone on milan: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // The home claim goes with its last pod (s-0, OffloadingAborted: a bare pod, nobody
    // replaces it), then its placeholder.
    assert!(
        claims
            .get("data")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some(),
        "the home claim is marked for deletion"
    );
    pods.delete("s-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    gone(
        &Api::<PersistentVolume>::all(rome.clone()),
        &format!("pvc-{uid}"),
        "the placeholder",
    )
    .await;
    until(60, "the claim gone at home", || {
        let claims = claims.clone();
        async move {
            match claims.get_opt("data").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("still there".into()),
            }
        }
    })
    .await;
    Api::<Namespace>::all(rome.clone())
        .delete(OFF, &DeleteParams::default())
        .await
        .unwrap();
}
