//! The manual's stateful application (chapter 15) adapted to the demo: a database-like service
//! `db` of two replicas, one per cluster (a Deployment on rome's nodes, one on `liqo-milan`),
//! each on its own `liqo` claim, the demo appending what it is sent to a log on it
//! (`--data-dir`). Appends through the Service from a rome pod land in both clusters; each
//! replica's pod deleted is made again on the same node by its ReplicaSet (the data's gravity)
//! and serves the same log. On the lab the quickstart left, with the lab's static volumes.

use std::time::Instant;

use e2e::lab::k8s::{K8sLab, demo};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{PersistentVolumeClaim, Pod, Service},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;

use crate::offload_lab::{run, until};

const NS: &str = demo::NAMESPACE;

fn replica(name: &str, remote: bool) -> Deployment {
    let placement = if remote {
        json!({"nodeSelector": {"liqo.io/type": "virtual-node"},
            "tolerations": [{"key": demo::VIRTUAL_NODE_TAINT, "operator": "Exists", "effect": "NoExecute"}]})
    } else {
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "liqo.io/type", "operator": "DoesNotExist"}]}]}}}})
    };
    let mut spec = json!({
        "securityContext": {"runAsUser": 0},
        "containers": [{"name": "db", "image": demo::IMAGE, "imagePullPolicy": "Never",
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "CLUSTER_NAME", "value": if remote { "milan" } else { "rome" }},
                {"name": "DEMO_DATA_DIR", "value": "/data"}],
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": name}}],
    });
    spec.as_object_mut()
        .unwrap()
        .extend(placement.as_object().unwrap().clone());
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "db", "replica": name}},
            "template": {"metadata": {"labels": {"app": "db", "replica": name}}, "spec": spec}},
    }))
    .unwrap()
}

/// The Ready pod of replica `name`: its name and node.
async fn ready(pods: &Api<Pod>, name: &str) -> (String, String) {
    until(180, &format!("replica {name} Ready"), || async {
        let l = pods
            .list(&ListParams::default().labels(&format!("replica={name}")))
            .await
            .map_err(|e| e.to_string())?;
        let live: Vec<&Pod> = l
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        match live.as_slice() {
            [p] if demo::ready(p) => Ok((p.metadata.name.clone().unwrap(), demo::node_of(p))),
            other => Err(format!("{} pods", other.len())),
        }
    })
    .await
}

/// A request from inside pod `pod` (bash's /dev/tcp): the answer's body.
fn http(k: &K8sLab, pod: &str, host: &str, request: &str) -> String {
    let script = format!(
        "exec 3<>/dev/tcp/{host}/8080 && printf '{request} HTTP/1.0\\r\\nContent-Length: 0\\r\\n\\r\\n' >&3 && sed '1,/^\\r$/d' <&3"
    );
    run(
        k,
        "kubectl",
        "rome",
        &["exec", "-n", NS, pod, "--", "bash", "-c", &script],
    )
}

/// The checks above on lab `k`.
pub(crate) async fn survives_its_pods(k: &K8sLab) {
    let rome = k.client("rome").await.unwrap();
    let pods = Api::<Pod>::namespaced(rome.clone(), NS);
    let claims = Api::<PersistentVolumeClaim>::namespaced(rome.clone(), NS);
    let deployments = Api::<Deployment>::namespaced(rome.clone(), NS);
    let pp = PostParams::default();
    for (name, remote) in [("db-rome", false), ("db-milan", true)] {
        let c = json!({"metadata": {"name": name, "namespace": NS},
            "spec": {"storageClassName": "liqo", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "100Mi"}}}});
        claims
            .create(&pp, &serde_json::from_value(c).unwrap())
            .await
            .unwrap();
        deployments
            .create(&pp, &replica(name, remote))
            .await
            .unwrap();
    }
    let svc = json!({"metadata": {"name": "db", "namespace": NS},
        "spec": {"selector": {"app": "db"}, "ports": [{"port": 8080, "targetPort": 8080}]}});
    Api::<Service>::namespaced(rome.clone(), NS)
        .create(&pp, &serde_json::from_value(svc).unwrap())
        .await
        .unwrap();
    let t = Instant::now();
    let (_, rome_node) = ready(&pods, "db-rome").await;
    let (_, milan_node) = ready(&pods, "db-milan").await;
    assert_eq!(milan_node, "liqo-milan");
    assert_ne!(rome_node, "liqo-milan");
    eprintln!(
        "TIMING both db replicas Ready: {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // Appends through the Service from a rome demo pod: both clusters take some.
    let client = demo::ready_pods(&rome, 4, std::time::Duration::from_secs(30))
        .await
        .unwrap()
        .into_iter()
        .find(|p| demo::node_of(p) != "liqo-milan")
        .expect("a demo pod on rome");
    let client = client.metadata.name.unwrap();
    // Batches of 10 until both clusters took some (kube-proxy learns the second endpoint a
    // moment after its pod is Ready): every append answered, by one replica or the other.
    let mut answers = String::new();
    let mut sent = 0;
    let by = |answers: &str, c: &str| {
        answers
            .lines()
            .filter(|l| l.contains(&format!("cluster={c}")))
            .count()
    };
    while sent < 60 && (by(&answers, "rome") == 0 || by(&answers, "milan") == 0) {
        let script = (sent..sent + 10)
            .map(|i| format!("exec 3<>/dev/tcp/db/8080 && printf 'POST /append?entry=order-{i} HTTP/1.0\\r\\nContent-Length: 0\\r\\n\\r\\n' >&3 && sed '1,/^\\r$/d' <&3 && echo"))
            .collect::<Vec<_>>()
            .join(" && ");
        answers.push_str(&run(
            k,
            "kubectl",
            "rome",
            &["exec", "-n", NS, &client, "--", "bash", "-c", &script],
        ));
        sent += 10;
    }
    let by = |c: &str| by(&answers, c);
    assert_eq!(by("rome") + by("milan"), sent, "{answers}");
    assert!(by("rome") > 0 && by("milan") > 0, "{answers}");
    eprintln!(
        "{sent} appends through the Service: {} by rome, {} by milan",
        by("rome"),
        by("milan")
    );

    // Each replica's pod deleted: made again where its data is, the same log.
    for name in ["db-rome", "db-milan"] {
        let (pod, node) = ready(&pods, name).await;
        let before = http(k, &pod, "127.0.0.1", "GET /log");
        let cluster = if name == "db-rome" { "rome" } else { "milan" };
        assert_eq!(before.lines().count(), by(cluster), "{name}: {before}");
        pods.delete(&pod, &DeleteParams::default()).await.unwrap();
        let t = Instant::now();
        let (again, now) = until(180, &format!("{name} made again"), || async {
            let (p, n) = ready(&pods, name).await;
            if p == pod {
                Err("the old pod".to_owned())
            } else {
                Ok((p, n))
            }
        })
        .await;
        assert_eq!(now, node, "{name} made again elsewhere");
        let after = http(k, &again, "127.0.0.1", "GET /log");
        assert_eq!(after, before, "{name}'s log after its pod was deleted");
        eprintln!(
            "TIMING {name}'s pod deleted, made again on {now} serving its {} lines: {:.1} s",
            after.lines().count(),
            t.elapsed().as_secs_f64()
        );
    }

    for name in ["db-rome", "db-milan"] {
        deployments
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
        claims.delete(name, &DeleteParams::default()).await.unwrap();
    }
    Api::<Service>::namespaced(rome.clone(), NS)
        .delete("db", &DeleteParams::default())
        .await
        .unwrap();
}
