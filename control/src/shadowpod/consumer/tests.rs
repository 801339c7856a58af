use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition};
use serde_json::{Value, json};

use super::*;

const HOME: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
const FOREIGN: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";

fn ids() -> (ClusterId, ClusterId) {
    (HOME.parse().unwrap(), FOREIGN.parse().unwrap())
}

/// A pod as the home API server returns it after admission: defaults, the ServiceAccount
/// volume, the virtual node's toleration, scheduling fields.
fn local_pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "web-1", "namespace": "demo", "uid": "u-local", "resourceVersion": "7",
            "labels": {"app": "web", "liqo.io/shadowPod": "true"},
            "annotations": {"note": "kept"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs"}]
        },
        "spec": {
            "containers": [{"name": "nginx", "image": "nginx:1", "volumeMounts": [
                {"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
            "initContainers": [{"name": "init", "image": "busybox"}],
            "volumes": [
                {"name": "kube-api-access-abcde", "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
                ]}},
                {"name": "other-kube-root", "configMap": {"name": "kube-root-ca.crt"}},
                {"name": "data", "emptyDir": {}}
            ],
            "tolerations": [
                {"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists", "effect": "NoExecute"},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]}]}]}}},
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "nodeName": "liqo-milan",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "priorityClassName": "high",
            "preemptionPolicy": "PreemptLowerPriority",
            "hostNetwork": true, "hostPID": true, "hostIPC": true,
            "automountServiceAccountToken": true,
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "enableServiceLinks": true,
            "hostname": "web-1", "subdomain": "web",
            "activeDeadlineSeconds": 600,
            "securityContext": {"runAsUser": 1000},
            "imagePullSecrets": [{"name": "pull"}],
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}],
            "readinessGates": [{"conditionType": "x/ready"}],
            "shareProcessNamespace": false,
            "setHostnameAsFQDN": false,
            "dnsConfig": {"nameservers": ["1.1.1.1"]},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
        },
        "status": {"phase": "Pending"}
    }))
    .unwrap()
}

#[test]
fn the_shadow_pod_copies_the_listed_fields_and_strips_the_rest() {
    let (home, foreign) = ids();
    let shadow = shadow_pod(&local_pod(), "demo-rome", &home, &foreign, None);
    let digest = shadow_digest(
        shadow.metadata.labels.as_ref().unwrap(),
        &[("note".to_owned(), "kept".to_owned())].into(),
        &shadow.spec.pod,
    );
    let got = serde_json::to_value(&shadow).unwrap();
    let expected = json!({
        "apiVersion": "virtualkubelet.liqo.io/v1alpha1",
        "kind": "ShadowPod",
        "metadata": {
            "name": "web-1", "namespace": "demo-rome",
            "labels": {"app": "web", "virtualkubelet.liqo.io/origin": HOME,
                       "virtualkubelet.liqo.io/destination": FOREIGN},
            "annotations": {"note": "kept", "reflection.liqo.io/shadowpod-digest": digest}
        },
        "spec": {"pod": {
            "containers": [{"name": "nginx", "image": "nginx:1", "volumeMounts": [
                {"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
            "initContainers": [{"name": "init", "image": "busybox"}],
            "volumes": [
                {"name": "kube-api-access-abcde", "projected": {"sources": [
                    {"configMap": {"name": "kube-root-ca.crt.0a1b2", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
                ]}},
                {"name": "other-kube-root", "configMap": {"name": "kube-root-ca.crt"}},
                {"name": "data", "emptyDir": {}}
            ],
            "tolerations": [
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "hostNetwork": false, "hostPID": false, "hostIPC": false,
            "automountServiceAccountToken": false,
            "serviceAccountName": "default",
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "enableServiceLinks": true,
            "hostname": "web-1", "subdomain": "web",
            "activeDeadlineSeconds": 600,
            "securityContext": {"runAsUser": 1000},
            "imagePullSecrets": [{"name": "pull"}],
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}],
            "readinessGates": [{"conditionType": "x/ready"}],
            "shareProcessNamespace": false,
            "setHostnameAsFQDN": false,
            "dnsConfig": {"nameservers": ["1.1.1.1"]},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
        }}
    });
    assert_eq!(
        got,
        expected,
        "{}",
        serde_json::to_string_pretty(&got).unwrap()
    );
    assert!(is_reflected(
        shadow.metadata.labels.as_ref(),
        &home,
        &foreign
    ));
}

#[test]
fn a_named_service_account_is_kept_and_no_tolerations_stay_absent() {
    let (home, _) = ids();
    let mut spec = local_pod().spec.unwrap();
    spec.service_account_name = Some("builder".into());
    spec.tolerations = Some(vec![spec.tolerations.unwrap().remove(0)]);
    let remote = remote_pod_spec(&spec, &home, None);
    assert_eq!(remote.service_account_name.as_deref(), Some("builder"));
    assert_eq!(remote.tolerations, None);
    assert_eq!(remote.node_name, None);
    assert_eq!(remote.affinity, None);
    assert_eq!(remote.priority_class_name, None);
}

#[test]
fn reflected_means_both_labels_with_our_values() {
    let (home, foreign) = ids();
    let ours = reflection_labels(&home, &foreign);
    assert!(is_reflected(Some(&ours), &home, &foreign));
    let mut other = ours.clone();
    other.insert(reflection::DESTINATION.into(), "someone-else".into());
    assert!(!is_reflected(Some(&other), &home, &foreign));
    let mut half = ours.clone();
    half.remove(reflection::ORIGIN);
    assert!(!is_reflected(Some(&half), &home, &foreign));
    assert!(!is_reflected(None, &home, &foreign));
    assert_eq!(
        reflection_selector(&home, &foreign),
        format!(
            "virtualkubelet.liqo.io/origin={HOME},virtualkubelet.liqo.io/destination={FOREIGN}"
        )
    );
    assert_eq!(remote_config_map_name("app-config", &home), "app-config");
}

fn remote_status() -> PodStatus {
    serde_json::from_value(json!({
        "phase": "Running",
        "podIP": "10.244.0.17", "podIPs": [{"ip": "10.244.0.17"}],
        "hostIP": "172.18.0.4", "hostIPs": [{"ip": "172.18.0.4"}],
        "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}],
        "containerStatuses": [
            {"name": "nginx", "image": "nginx:1", "imageID": "", "ready": true, "restartCount": 2},
            {"name": "side", "image": "side", "imageID": "", "ready": true, "restartCount": 0}
        ]
    }))
    .unwrap()
}

#[test]
fn the_local_status_has_mapped_ips_the_node_ip_and_restarts_added() {
    let ips = ["10.201.0.17".to_owned()];
    let got = local_status(
        &remote_status(),
        &StatusInputs {
            pod_ips: &ips,
            node_ip: "127.0.0.1",
            restarts: 3,
            generation: Some(4),
        },
    );
    let v = serde_json::to_value(&got).unwrap();
    assert_eq!(v["podIP"], "10.201.0.17");
    assert_eq!(v["podIPs"], json!([{"ip": "10.201.0.17"}]));
    assert_eq!(v["hostIP"], "127.0.0.1");
    assert_eq!(v["hostIPs"], json!([{"ip": "127.0.0.1"}]));
    assert_eq!(v["phase"], "Running");
    assert_eq!(v["observedGeneration"], 4);
    assert_eq!(v["conditions"][0]["observedGeneration"], 4);
    let restarts: Vec<Value> = v["containerStatuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["restartCount"].clone())
        .collect();
    assert_eq!(restarts, [json!(5), json!(3)]);
}

#[test]
fn the_providers_nomination_stays_there() {
    let mut remote = remote_status();
    remote.phase = Some("Pending".into());
    remote.nominated_node_name = Some("n1".into());
    let got = local_status(
        &remote,
        &StatusInputs {
            pod_ips: &[],
            node_ip: "127.0.0.1",
            restarts: 0,
            generation: None,
        },
    );
    assert_eq!(got.nominated_node_name, None);
    assert_eq!(got.phase.as_deref(), Some("Pending"));
}

#[test]
fn a_remote_pod_without_ips_gives_none() {
    let mut remote = remote_status();
    remote.pod_ip = None;
    remote.pod_ips = None;
    remote.observed_generation = None;
    let got = local_status(
        &remote,
        &StatusInputs {
            pod_ips: &[],
            node_ip: "192.168.1.1",
            restarts: 0,
            generation: Some(9),
        },
    );
    assert_eq!(got.pod_ip, None);
    assert_eq!(got.pod_ips, None);
    assert_eq!(got.host_ip.as_deref(), Some("192.168.1.1"));
    assert_eq!(got.observed_generation, None);
}

fn with_restarts(counts: &[(&str, i32)]) -> PodStatus {
    PodStatus {
        container_statuses: Some(
            counts
                .iter()
                .map(|(n, c)| ContainerStatus {
                    name: (*n).into(),
                    restart_count: *c,
                    ..ContainerStatus::default()
                })
                .collect(),
        ),
        ..PodStatus::default()
    }
}

#[test]
fn restarts_are_inferred_from_the_first_container() {
    assert_eq!(
        infer_restarts(
            &with_restarts(&[("a", 5)]),
            &with_restarts(&[("b", 0), ("a", 1)])
        ),
        4
    );
    // A remote restart not yet reported locally: no negative gap.
    assert_eq!(
        infer_restarts(&with_restarts(&[("a", 0)]), &with_restarts(&[("a", 2)])),
        0
    );
    assert_eq!(
        infer_restarts(&PodStatus::default(), &with_restarts(&[("a", 2)])),
        0
    );
    assert_eq!(
        infer_restarts(&with_restarts(&[("x", 7)]), &with_restarts(&[("a", 0)])),
        0
    );
}

#[test]
fn rejection_depends_on_whether_the_pod_ever_started() {
    let pending = PodStatus {
        phase: Some("Pending".into()),
        ..PodStatus::default()
    };
    assert_eq!(rejection(&pending), Some(("Pending", "OffloadingBackOff")));
    assert_eq!(
        rejection(&PodStatus::default()),
        Some(("Pending", "OffloadingBackOff"))
    );
    let mut pending_with_containers = with_restarts(&[("a", 0)]);
    pending_with_containers.phase = Some("Pending".into());
    assert_eq!(
        rejection(&pending_with_containers),
        Some(("Failed", "OffloadingAborted"))
    );
    let running = PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    };
    assert_eq!(rejection(&running), Some(("Failed", "OffloadingAborted")));
    let done = PodStatus {
        phase: Some("Succeeded".into()),
        ..PodStatus::default()
    };
    assert_eq!(rejection(&done), None);
}

#[test]
fn a_rejected_status_turns_true_conditions_false_and_containers_not_ready() {
    let now = Time("2026-01-02T03:04:05Z".parse().unwrap());
    let before = Time("2026-01-01T00:00:00Z".parse().unwrap());
    let mut local = remote_status();
    local.conditions = Some(vec![
        PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..PodCondition::default()
        },
        PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            last_transition_time: Some(before.clone()),
            ..PodCondition::default()
        },
    ]);
    let got = rejected_status(&local, "Failed", "OffloadingAborted", now.clone());
    assert!(is_aborted(&got));
    assert!(!is_aborted(&local));
    let conds = got.conditions.unwrap();
    assert_eq!(conds[0].status, "False");
    assert_eq!(conds[0].reason.as_deref(), Some("OffloadingAborted"));
    assert_eq!(conds[0].last_transition_time, Some(now));
    assert_eq!(conds[1].last_transition_time, Some(before));
    assert_eq!(conds[1].reason, None);
    assert!(got.container_statuses.unwrap().iter().all(|c| !c.ready));
    // Applying it twice changes nothing more: the rejection is written once.
    let again = rejected_status(
        &rejected_status(
            &local,
            "Failed",
            "OffloadingAborted",
            Time("2026-01-02T03:04:05Z".parse().unwrap()),
        ),
        "Failed",
        "OffloadingAborted",
        Time("2027-01-01T00:00:00Z".parse().unwrap()),
    );
    assert_eq!(
        again,
        rejected_status(
            &local,
            "Failed",
            "OffloadingAborted",
            Time("2026-01-02T03:04:05Z".parse().unwrap())
        )
    );
}

/// Externally managed storage (manual §20.2): a pod's own volumes reach the remote pod as they
/// are, a claim that exists only on the provider included.
#[test]
fn a_pods_own_volumes_reach_the_remote_pod_verbatim() {
    let (home, _) = ids();
    let mut spec = local_pod().spec.unwrap();
    let volumes: Vec<k8s_openapi::api::core::v1::Volume> = serde_json::from_value(json!([
        {"name": "db", "persistentVolumeClaim": {"claimName": "only-on-milan", "readOnly": true}},
        {"name": "nfs", "nfs": {"server": "10.0.0.9", "path": "/exports/a"}},
        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "cfg", "configMap": {"name": "settings", "defaultMode": 420}}
    ]))
    .unwrap();
    spec.volumes = Some(volumes.clone());
    let remote = remote_pod_spec(&spec, &home, None);
    assert_eq!(remote.volumes, Some(volumes));
}
