//! ServiceAccount tokens and Events back home, on the pod reflection test's clusters and
//! virtual kubelet (API server support on): the offloaded pod's token Secret on milan, read
//! by its ShadowPod's projection, holds a token of its home ServiceAccount that lists pods in
//! its home namespace at rome (as the remote pod would), and is written again at once when
//! deleted on milan; an Event milan records about the remote pod shows on the home pod.

use control::shadowpod::token::{NAMESPACE_KEY, TOKEN_KEY, secret_name};
use k8s_openapi::api::{
    core::v1::{Event as CoreEvent, Pod, Secret},
    events::v1::Event,
};
use kube::{Api, Client, api::ListParams};
use serde_json::json;
use testkit::k8s::{Cluster, account};

use crate::common::{create, eventually, pods::REMOTE_NS};

/// A client of `rome` authenticated by `token` only.
async fn with_token(rome: &Cluster, token: &str) -> Client {
    account::client(rome, token)
        .await
        .expect("a client with the token")
}

/// The token `s` holds, if any.
fn token_of(s: &Secret) -> Option<String> {
    let t = s.data.as_ref()?.get(TOKEN_KEY)?;
    String::from_utf8(t.0.clone())
        .ok()
        .filter(|t| !t.is_empty())
}

/// The checks; returns the token (to check it dies with the home pod).
pub(crate) async fn check(rome_c: &Cluster, rome: &Client, milan: &Client, pod: &str) -> String {
    // The home ServiceAccount may list pods in its namespace.
    account::grant_pod_list(rome, "demo", "default")
        .await
        .expect("granting the pod list");
    let secrets: Api<Secret> = Api::namespaced(milan.clone(), REMOTE_NS);
    let name = secret_name(pod);
    let secret = eventually(60, "the token Secret on milan", || {
        let (secrets, name) = (secrets.clone(), name.clone());
        async move { secrets.get(&name).await.map_err(|e| e.to_string()) }
    })
    .await;
    let owner = secret.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.first().map(|o| o.kind.as_str()), Some("ShadowPod"));
    let token = token_of(&secret).expect("the token Secret holds a token");
    let data = secret.data.clone().unwrap_or_default();
    assert_eq!(data[NAMESPACE_KEY].0, b"demo");
    let as_pod = with_token(rome_c, &token).await;
    let listed = Api::<Pod>::namespaced(as_pod, "demo")
        .list(&ListParams::default())
        .await
        .expect("the token lists pods in its home namespace");
    assert!(
        listed
            .items
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(pod)),
        "{} pods listed",
        listed.items.len()
    );

    // Deleted on milan, the token Secret is written again at once (not at its renewal), with
    // a token.
    let old_uid = secret.metadata.uid.clone();
    secrets
        .delete(&name, &Default::default())
        .await
        .expect("deleting the token Secret");
    let t = std::time::Instant::now();
    eventually(10, "the token Secret written again", || {
        let (secrets, name, old_uid) = (secrets.clone(), name.clone(), old_uid.clone());
        async move {
            match secrets.get_opt(&name).await.map_err(|e| e.to_string())? {
                Some(s) if s.metadata.uid != old_uid && token_of(&s).is_some() => Ok(()),
                other => Err(format!(
                    "{:?}",
                    other.map(|s| (token_of(&s).is_some(), s.metadata.uid))
                )),
            }
        }
    })
    .await;
    println!(
        "TIMING token Secret deleted on milan -> written again: {:.2} s",
        t.elapsed().as_secs_f64()
    );

    // An Event about the remote pod, recorded on milan, shows on the home pod; milan's
    // scheduling (`Scheduled`, recorded before it) does not.
    create(
        &Api::<CoreEvent>::namespaced(milan.clone(), REMOTE_NS),
        json!({"metadata": {"name": format!("{pod}.scheduled")},
               "involvedObject": {"kind": "Pod", "name": pod, "namespace": REMOTE_NS},
               "type": "Normal", "reason": "Scheduled",
               "message": format!("Successfully assigned {REMOTE_NS}/{pod} to node-7"),
               "source": {"component": "default-scheduler"}}),
    )
    .await;
    create(
        &Api::<CoreEvent>::namespaced(milan.clone(), REMOTE_NS),
        json!({"metadata": {"name": format!("{pod}.pulled")},
               "involvedObject": {"kind": "Pod", "name": pod, "namespace": REMOTE_NS},
               "type": "Normal", "reason": "Pulled", "message": "Successfully pulled image \"nginx\"",
               "source": {"component": "kubelet"}}),
    )
    .await;
    let events: Api<Event> = Api::namespaced(rome.clone(), "demo");
    let mirrored = eventually(60, "the remote pod's Event on the home pod", || {
        let events = events.clone();
        async move {
            let list = events
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let pulled = list.items.iter().any(|e| {
                e.reason.as_deref() == Some("Pulled")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
                    && e.note.as_deref().is_some_and(|n| n.starts_with("[milan] "))
            });
            if pulled {
                Ok(list)
            } else {
                Err(format!("{} events", list.items.len()))
            }
        }
    })
    .await;
    let mirrored_scheduling: Vec<_> = mirrored
        .items
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some("Scheduled")
                && e.note.as_deref().is_some_and(|n| n.starts_with("[milan] "))
        })
        .collect();
    assert!(
        mirrored_scheduling.is_empty(),
        "milan's scheduling shows at home: {mirrored_scheduling:?}"
    );
    token
}

/// Whether `token` is refused by rome now (its pod is gone: the bound token died with it).
pub(crate) async fn refused(rome_c: &Cluster, token: &str) -> Result<(), String> {
    let as_pod = with_token(rome_c, token).await;
    match Api::<Pod>::namespaced(as_pod, "demo")
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 401 => Ok(()),
        other => Err(format!("{:?}", other.map(|l| l.items.len()))),
    }
}
