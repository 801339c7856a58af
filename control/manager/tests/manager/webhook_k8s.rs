//! The admission webhooks of `liqo-controller-manager` (run as a process by `testkit::liqo::install`,
//! under its ServiceAccount bound by the chart's ClusterRole) on a real apiserver: the chart's
//! configurations get the controller-manager's CA; pods in labelled namespaces get the seed's
//! node affinity and toleration per strategy; a pod whose own affinity contradicts the strategy
//! stays unschedulable; NamespaceOffloading edits are checked and the tightening warning reaches
//! the client; with the server down only labelled namespaces refuse pods; a cleared caBundle is
//! set again; a restart reuses the Secret's CA.

use crate::common;

use axum::http;
use common::{ONE, POOL, eventually};
use control::{
    consts::webhook,
    offloading::webhook::{POD_STRATEGY_TIGHTENED, toleration},
};
use k8s_openapi::api::{
    admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
    core::v1::{Namespace, Pod, Secret},
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use testkit::{k8s, liqo};

const MANAGER: &str = "liqo-controller-manager";

fn region() -> Value {
    json!({"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "liqo.io/region", "operator": "In", "values": ["us-west-1"]},
    ]}]})
}

/// Namespace `name`, labelled for scheduling when `labelled`, with NamespaceOffloading
/// `offloading` of `spec` (none when `None`).
async fn namespace(client: &Client, name: &str, labelled: bool, spec: Option<Value>) {
    let labels = if labelled {
        json!({"liqo.io/scheduling-enabled": "true"})
    } else {
        json!({})
    };
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    if let Some(spec) = spec {
        let api: Api<control::api::offloading::NamespaceOffloading> =
            Api::namespaced(client.clone(), name);
        let o = serde_json::from_value(json!({
            "apiVersion": "offloading.liqo.io/v1alpha1", "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading", "namespace": name},
            "spec": spec,
        }))
        .unwrap();
        api.create(&PostParams::default(), &o).await.unwrap();
    }
}

fn pod(name: &str, affinity: Option<Value>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "registry.example/app:1"}]});
    if let Some(a) = affinity {
        spec["affinity"] = a;
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

async fn create_pod(client: &Client, ns: &str, p: &Pod) -> Result<Pod, kube::Error> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), p)
        .await
}

/// The created pod's required node selector terms and whether it tolerates the virtual nodes.
fn mutation(p: &Pod) -> (Option<Value>, bool) {
    let spec = p.spec.clone().unwrap();
    let terms = spec
        .affinity
        .and_then(|a| a.node_affinity)
        .and_then(|n| n.required_during_scheduling_ignored_during_execution)
        .map(|s| serde_json::to_value(s.node_selector_terms).unwrap());
    let tolerates = spec.tolerations.unwrap_or_default().contains(&toleration());
    (terms, tolerates)
}

async fn secret_ca(client: &Client) -> (Vec<u8>, String) {
    let s = Api::<Secret>::namespaced(client.clone(), liqo::NAMESPACE)
        .get(webhook::CERTS_SECRET)
        .await
        .unwrap();
    (
        s.data.unwrap()["ca.crt"].0.clone(),
        s.metadata.resource_version.unwrap(),
    )
}

/// The controller-manager's log, for failure messages.
fn manager_log(c: &k8s::Cluster) -> String {
    let path = c.dir.join("liqo").join(format!("{MANAGER}.log"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| format!("{}: {e}", path.display()))
}

/// The caBundle of every webhook of both configurations.
async fn bundles(client: &Client) -> Vec<Option<Vec<u8>>> {
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(webhook::CONFIGURATION)
        .await
        .unwrap();
    let v = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get(webhook::CONFIGURATION)
        .await
        .unwrap();
    let mut out: Vec<_> = m
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|w| w.client_config.ca_bundle.map(|b| b.0))
        .collect();
    out.extend(
        v.webhooks
            .unwrap_or_default()
            .into_iter()
            .map(|w| w.client_config.ca_bundle.map(|b| b.0)),
    );
    out
}

/// A merge patch of NamespaceOffloading `offloading` in `ns`: the status and the `Warning`
/// headers of the answer.
async fn patch_nsoff(client: &Client, ns: &str, patch: Value) -> (u16, Vec<String>, String) {
    let req = http::Request::patch(format!(
        "/apis/offloading.liqo.io/v1alpha1/namespaces/{ns}/namespaceoffloadings/offloading"
    ))
    .header("content-type", "application/merge-patch+json")
    .body(kube::client::Body::from(
        serde_json::to_vec(&patch).unwrap(),
    ))
    .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .collect();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
        .unwrap_or_default();
    (status, warnings, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhooks_mutate_pods_check_namespaceoffloadings_and_survive_restarts() {
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, ONE).await.unwrap();
    let mut installed = liqo::install(
        &set,
        &bins,
        &liqo::Options {
            start: vec![MANAGER.to_owned()],
            ..liqo::Options::default()
        },
    )
    .await
    .unwrap();
    let c = &set.clusters[0];
    let client = c.client().await.unwrap();

    // The CA of the Secret in every webhook of both configurations (set before ready).
    let (ca, rv) = secret_ca(&client).await;
    assert!(String::from_utf8_lossy(&ca).starts_with("-----BEGIN CERTIFICATE-----"));
    assert_eq!(
        bundles(&client).await,
        vec![Some(ca.clone()); 2],
        "{}",
        manager_log(c)
    );

    // The seed's three examples, and LocalAndRemote without a selector.
    let cases = [
        (
            "wh-lr",
            json!({"podOffloadingStrategy": "LocalAndRemote", "clusterSelector": region()}),
            Some(json!([
                {"matchExpressions": [{"key": "liqo.io/region", "operator": "In", "values": ["us-west-1"]}]},
                {"matchExpressions": [{"key": "liqo.io/type", "operator": "NotIn", "values": ["virtual-node"]}]},
            ])),
            true,
        ),
        (
            "wh-lr0",
            json!({"podOffloadingStrategy": "LocalAndRemote"}),
            None,
            true,
        ),
        (
            "wh-local",
            json!({"podOffloadingStrategy": "Local", "clusterSelector": region()}),
            None,
            false,
        ),
        (
            "wh-remote",
            json!({"podOffloadingStrategy": "Remote", "clusterSelector": region()}),
            Some(json!([
                {"matchExpressions": [
                    {"key": "liqo.io/region", "operator": "In", "values": ["us-west-1"]},
                    {"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]},
                ]},
            ])),
            true,
        ),
    ];
    for (ns, spec, terms, tolerates) in cases {
        namespace(&client, ns, true, Some(spec)).await;
        let p = create_pod(&client, ns, &pod("p", None)).await.unwrap();
        assert_eq!(mutation(&p), (terms, tolerates), "namespace {ns}");
        let n = p.spec.unwrap().tolerations.unwrap_or_default().len();
        assert!(n <= 3, "{ns}: the toleration once among the defaults: {n}");
    }

    // A pod that wants local nodes only, under Remote: admitted, never scheduled.
    let local_only = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
    {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "liqo.io/type", "operator": "NotIn", "values": ["virtual-node"]},
    ]}]}}});
    create_pod(&client, "wh-remote", &pod("conflict", Some(local_only)))
        .await
        .unwrap();
    let pods = Api::<Pod>::namespaced(client.clone(), "wh-remote");
    eventually(30, "the conflicting pod unschedulable", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("conflict").await.map_err(|e| e.to_string())?;
            let status = p.status.unwrap_or_default();
            let unschedulable = status.conditions.unwrap_or_default().iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            });
            if unschedulable && status.phase.as_deref() == Some("Pending") {
                Ok(())
            } else {
                Err(format!("phase {:?}", status.phase))
            }
        }
    })
    .await;
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), "wh-remote");
    eventually(
        30,
        "a FailedScheduling event for the conflicting pod",
        || {
            let events = events.clone();
            async move {
                let l = events
                    .list(&kube::api::ListParams::default().fields("involvedObject.name=conflict"))
                    .await
                    .map_err(|e| e.to_string())?;
                l.items
                    .iter()
                    .any(|e| e.reason.as_deref() == Some("FailedScheduling"))
                    .then_some(())
                    .ok_or_else(|| format!("{} events", l.items.len()))
            }
        },
    )
    .await;

    // A changed mapping strategy is refused naming the field.
    let (status, _, body) = patch_nsoff(
        &client,
        "wh-local",
        json!({"spec": {"namespaceMappingStrategy": "EnforceSameName"}}),
    )
    .await;
    assert_eq!(status / 100, 4, "{body}");
    assert!(
        body.to_lowercase().contains("namespacemappingstrategy"),
        "{body}"
    );
    // A second NamespaceOffloading (so not named offloading) is refused.
    let api: Api<control::api::offloading::NamespaceOffloading> =
        Api::namespaced(client.clone(), "wh-local");
    let second = serde_json::from_value(json!({
        "apiVersion": "offloading.liqo.io/v1alpha1", "kind": "NamespaceOffloading",
        "metadata": {"name": "second", "namespace": "wh-local"}, "spec": {},
    }))
    .unwrap();
    // Refused by the CRD's CEL rule (object validation runs before validating admission) or,
    // were that rule gone, by the webhook: either way a 4xx naming the rule.
    match api.create(&PostParams::default(), &second).await {
        Err(kube::Error::Api(s)) => {
            assert!(s.code / 100 == 4, "{s:?}");
            assert!(
                s.message
                    .contains("a NamespaceOffloading must be named 'offloading'")
                    || s.message.contains(control::offloading::webhook::WRONG_NAME),
                "{s:?}"
            );
        }
        other => panic!("a second NamespaceOffloading: {other:?}"),
    }
    // Tightening the pod strategy: admitted, with the warning shown to the client.
    let (status, warnings, body) = patch_nsoff(
        &client,
        "wh-lr0",
        json!({"spec": {"podOffloadingStrategy": "Remote"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        warnings.iter().any(|w| w.contains(POD_STRATEGY_TIGHTENED)),
        "{warnings:?}"
    );

    // A cleared caBundle is set again (the patch's answer shows it cleared: a read after it
    // could already see the keeper's fix).
    let cleared = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(
            webhook::CONFIGURATION,
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([
                    {"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"},
                ]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        cleared.webhooks.unwrap()[0].client_config.ca_bundle,
        None,
        "cleared"
    );
    eventually(20, "the caBundle set again", || {
        let client = client.clone();
        let ca = ca.clone();
        async move {
            let b = bundles(&client).await;
            (b == vec![Some(ca); 2])
                .then_some(())
                .ok_or(format!("{b:?}"))
        }
    })
    .await;

    // The server down: unlabelled namespaces admit pods, labelled ones refuse them.
    namespace(&client, "wh-plain", false, None).await;
    let killed = liqo::kill9_component(&installed, &c.name, MANAGER).unwrap();
    create_pod(&client, "wh-plain", &pod("p", None))
        .await
        .expect("an unlabelled namespace needs no webhook");
    let e = create_pod(&client, "wh-lr", &pod("down", None))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(r#"failed calling webhook "pod.mutate.liqo.io""#),
        "{e}"
    );

    // A restart reuses the Secret (same CA, not rewritten) and serves again.
    liqo::restart_component(&set, &mut installed, killed)
        .await
        .unwrap();
    assert_eq!(secret_ca(&client).await, (ca.clone(), rv));
    assert_eq!(bundles(&client).await, vec![Some(ca); 2]);
    let p = create_pod(&client, "wh-lr", &pod("again", None))
        .await
        .unwrap();
    assert!(mutation(&p).1, "mutated after the restart");
    set.release().await.unwrap();
}
