//! What every render of the matrix grants its pods: each container non-root, read-only and
//! without capabilities but the two data-plane daemons (the gateway privileged, the overlay
//! agent root with NET_ADMIN only), with cpu and memory requests (no pod BestEffort); no API
//! token in the host-network pods' daemon containers; no generated secret in a ConfigMap; no
//! Helm hook; liqo-ipam's Role reaches its Secret and its state's ConfigMap only.

use serde_json::{Value, json};

use crate::helm;

/// The pod templates of a render, with the workload's name.
fn pods(objects: &[Value]) -> Vec<(String, &Value)> {
    objects
        .iter()
        .filter(|o| o["kind"] == "Deployment" || o["kind"] == "DaemonSet")
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_owned(),
                &o["spec"]["template"]["spec"],
            )
        })
        .collect()
}

fn check_container(case: &str, pod: &str, c: &Value) {
    let name = c["name"].as_str().unwrap();
    let sc = &c["securityContext"];
    let what = format!("{case}: {pod}/{name}");
    assert_eq!(sc["readOnlyRootFilesystem"], true, "{what}");
    // Requests, so that no Liqo pod is BestEffort (the first starved on a busy node).
    let requests = &c["resources"]["requests"];
    assert!(
        requests["cpu"].is_string() && requests["memory"].is_string(),
        "{what}: requests {requests}"
    );
    match (pod, name) {
        ("liqo-gateway", "gateway") => {
            assert_eq!(sc["privileged"], true, "{what}");
        }
        ("liqo-route", "overlay") => {
            assert_eq!(
                sc["capabilities"]["add"],
                serde_json::json!(["NET_ADMIN"]),
                "{what}"
            );
            assert_eq!(
                sc["capabilities"]["drop"],
                serde_json::json!(["ALL"]),
                "{what}"
            );
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{what}");
            assert!(sc["privileged"].is_null(), "{what}");
        }
        _ => {
            assert_eq!(sc["runAsNonRoot"], true, "{what}");
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{what}");
            assert_eq!(
                sc["capabilities"]["drop"],
                serde_json::json!(["ALL"]),
                "{what}"
            );
            assert!(sc["capabilities"]["add"].is_null(), "{what}");
            assert!(sc["privileged"].is_null(), "{what}");
        }
    }
}

#[test]
fn every_container_has_the_least_privileges_its_program_needs() {
    for case in helm::cases() {
        let render = helm::template(&case.values, &[]).expect_ok();
        let objects = helm::objects(&render);
        let pods = pods(&objects);
        assert!(pods.len() >= 4, "{}: {} workloads", case.name, pods.len());
        for (pod, spec) in &pods {
            assert_eq!(
                spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
                "{}: {pod}",
                case.name
            );
            let containers = spec["containers"].as_array().unwrap();
            for c in containers {
                check_container(&case.name, pod, c);
            }
            if spec["hostNetwork"] == true {
                // The API token only where the operator is: not in the daemon's container.
                assert_eq!(
                    spec["automountServiceAccountToken"], false,
                    "{}: {pod}",
                    case.name
                );
                let with_token: Vec<&str> = containers
                    .iter()
                    .filter(|c| {
                        c["volumeMounts"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|m| m["name"] == "api-token")
                    })
                    .map(|c| c["name"].as_str().unwrap())
                    .collect();
                assert_eq!(with_token.len(), 1, "{}: {pod}: {with_token:?}", case.name);
                assert!(with_token[0].ends_with("-operator"), "{}: {pod}", case.name);
            }
        }
        for cm in objects.iter().filter(|o| o["kind"] == "ConfigMap") {
            let text = cm["data"].to_string();
            assert!(
                !text.contains("BEGIN") && !text.contains("privateKey:"),
                "{}: ConfigMap {} holds key material",
                case.name,
                cm["metadata"]["name"]
            );
        }
        assert!(
            !objects.iter().any(|o| o["kind"] == "Job"
                || o["metadata"]["annotations"].get("helm.sh/hook").is_some()),
            "{}: a Job or a Helm hook",
            case.name
        );
    }
}

#[test]
fn liqo_ipam_may_read_and_write_its_secret_and_its_state_only() {
    for case in helm::cases() {
        let render = helm::template(&case.values, &[]).expect_ok();
        let objects = helm::objects(&render);
        let deploy = helm::find(&objects, "Deployment", "liqo-ipam").unwrap();
        let spec = &deploy["spec"]["template"]["spec"];
        assert_eq!(spec["serviceAccountName"], "liqo-ipam", "{}", case.name);
        // It holds no file of its credentials: the Secret is read through the API.
        assert!(
            spec["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|v| v["secret"].is_null()),
            "{}: {}",
            case.name,
            spec["volumes"]
        );
        let role = helm::find(&objects, "Role", "liqo-ipam")
            .unwrap_or_else(|| panic!("{}: no Role liqo-ipam", case.name));
        let configmap = case_store(&objects) == "configmap";
        let mut want = vec![
            json!({"apiGroups": [""], "resources": ["secrets"],
                   "resourceNames": [helm::IPAM_SECRET], "verbs": ["get", "update"]}),
            json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}),
        ];
        if configmap {
            want.extend([
                json!({"apiGroups": [""], "resources": ["configmaps"],
                       "resourceNames": ["liqo-ipam-state"], "verbs": ["get", "update"]}),
                json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}),
            ]);
        }
        assert_eq!(role["rules"], json!(want), "{}", case.name);
        let binding = helm::find(&objects, "RoleBinding", "liqo-ipam").unwrap();
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "liqo-ipam", "namespace": helm::NAMESPACE}]),
            "{}",
            case.name
        );
        assert!(helm::find(&objects, "ServiceAccount", "liqo-ipam").is_some());
    }
}

/// The store the IPAM's Deployment runs with (`--store=`).
fn case_store(objects: &[Value]) -> String {
    let d = helm::find(objects, "Deployment", "liqo-ipam").unwrap();
    d["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|a| a.as_str()?.strip_prefix("--store="))
        .unwrap()
        .to_owned()
}

#[test]
fn resources_take_any_kubernetes_resource_and_quantity() {
    let sets = [
        "controllerManager.pod.resources.requests.cpu=0.5",
        "controllerManager.pod.resources.requests.memory=129e6",
        "controllerManager.pod.resources.limits.ephemeral-storage=1Gi",
        "controllerManager.pod.resources.limits.hugepages-2Mi=4Mi",
        "controllerManager.pod.resources.limits.example\\.com/dongle=1",
    ];
    let mut extra = Vec::new();
    for s in &sets {
        extra.extend(["--set-string", s]);
    }
    let run = helm::template(&helm::case("defaults"), &extra);
    let objects = helm::objects(&run.expect_ok());
    let (_, spec) = pods(&objects)
        .into_iter()
        .find(|(name, _)| name == "liqo-controller-manager")
        .expect("the controller-manager's Deployment");
    assert_eq!(
        spec["containers"][0]["resources"],
        json!({
            "requests": {"cpu": "0.5", "memory": "129e6"},
            "limits": {"ephemeral-storage": "1Gi", "hugepages-2Mi": "4Mi", "example.com/dongle": "1"},
        })
    );
}
