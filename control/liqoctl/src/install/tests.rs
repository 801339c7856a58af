use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use serde_json::json;

use super::{detect, helm, ready, values};

#[test]
fn the_values_carry_the_flags_under_the_charts_keys() {
    let i = values::Inputs {
        cluster_name: "rome".parse().unwrap(),
        cluster_labels: [("region".to_owned(), "north".to_owned())].into(),
        sharing_percentage: 90,
        pod_cidr: super::args::parse_cidr("10.244.0.0/16").unwrap(),
        service_cidr: super::args::parse_cidr("10.96.0.0/12").unwrap(),
        reserved_subnets: vec![super::args::parse_cidr("192.168.0.0/24").unwrap()],
        api_server_url: Some("https://rome.example:6443".into()),
        tag: "0.1.0".into(),
        ha: true,
    };
    let v = values::values(&i);
    assert_eq!(
        v,
        json!({
            "tag": "0.1.0",
            "apiServer": {"address": "https://rome.example:6443"},
            "discovery": {"config": {"clusterName": "rome", "clusterLabels": {"region": "north"}}},
            "controllerManager": {"replicas": 2, "config": {"resourceSharingPercentage": 90}},
            "gateway": {"replicas": 2},
            "networkManager": {"config": {"podCIDR": "10.244.0.0/16", "serviceCIDR": "10.96.0.0/12",
                "reservedSubnets": ["192.168.0.0/24"]}},
        })
    );
    let yaml = values::to_yaml(&v).unwrap();
    assert!(
        yaml.starts_with("# Helm values of the liqo chart"),
        "{yaml}"
    );
    assert!(yaml.contains("clusterName: rome"), "{yaml}");
}

#[test]
fn a_generated_name_is_a_valid_cluster_name_and_follows_its_seed() {
    let a = values::generated_name(&[0, 1, 2, 35, 36, 255]);
    assert_eq!(a.as_str(), "cluster-abc9ad");
    assert_ne!(values::generated_name(&[9; 8]), a);
}

#[test]
fn bad_cidr_flags_are_refused_naming_the_value() {
    let e = super::args::parse_cidr("10.244.0.1/16").unwrap_err();
    assert!(e.contains("10.244.0.1/16"), "{e}");
    let e = super::args::parse_cidr("fd00::/64").unwrap_err();
    assert!(e.contains("fd00::/64"), "{e}");
    let e = super::args::parse_cidr("0.0.0.0/0").unwrap_err();
    assert!(e.contains("0.0.0.0/0"), "{e}");
}

#[test]
fn kubeadm_and_kube_proxy_configurations_give_the_cidrs() {
    let cfg = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nnetworking:\n  dnsDomain: cluster.local\n  podSubnet: fd00:10::/56,10.244.0.0/16\n  serviceSubnet: 10.96.0.0/12\n";
    assert_eq!(
        detect::from_kubeadm(cfg, detect::Which::Pod).as_deref(),
        Some("fd00:10::/56,10.244.0.0/16")
    );
    let pod = detect::first_v4("fd00:10::/56,10.244.0.0/16")
        .unwrap()
        .unwrap();
    assert_eq!(pod.to_string(), "10.244.0.0/16");
    assert_eq!(
        detect::from_kubeadm(cfg, detect::Which::Service).as_deref(),
        Some("10.96.0.0/12")
    );
    assert_eq!(
        detect::from_kubeadm("networking: {}\n", detect::Which::Pod),
        None
    );
    assert_eq!(
        detect::from_kube_proxy("kind: KubeProxyConfiguration\nclusterCIDR: 10.42.0.0/16\n")
            .as_deref(),
        Some("10.42.0.0/16")
    );
    assert_eq!(detect::from_kube_proxy("clusterCIDR: \"\"\n"), None);
    // Only IPv6, or a bad value: named.
    assert!(detect::first_v4("fd00::/64").is_none());
    assert_eq!(
        detect::first_v4("10.1.2.3/8"),
        Some(Err("10.1.2.3/8".into()))
    );
}

#[test]
fn a_component_is_ready_when_every_current_replica_is_available() {
    let d = |generation: i64, observed: i64, updated: i32, available: i32| -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "liqo-auth", "generation": generation},
            "spec": {"replicas": 1, "selector": {}, "template": {}},
            "status": {"observedGeneration": observed, "replicas": 1,
                       "updatedReplicas": updated, "availableReplicas": available}
        }))
        .unwrap()
    };
    assert!(ready::deployment(&d(2, 2, 1, 1)).done);
    assert!(
        !ready::deployment(&d(3, 2, 1, 1)).done,
        "a new spec not observed yet"
    );
    assert!(
        !ready::deployment(&d(2, 2, 0, 1)).done,
        "the old pod still serves"
    );
    assert_eq!(
        ready::deployment(&d(2, 2, 1, 0)).to_string(),
        "Deployment/liqo-auth 0/1"
    );
    let ds = |observed: Option<i64>, desired: i32, available: i32| -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "liqo-route", "generation": 1},
            "spec": {"selector": {}, "template": {}},
            "status": {"observedGeneration": observed, "desiredNumberScheduled": desired,
                       "currentNumberScheduled": desired, "numberMisscheduled": 0, "numberReady": available,
                       "updatedNumberScheduled": desired, "numberAvailable": available}
        }))
        .unwrap()
    };
    assert!(ready::daemon_set(&ds(Some(1), 3, 3)).done);
    assert!(!ready::daemon_set(&ds(Some(1), 3, 2)).done);
    assert!(
        !ready::daemon_set(&ds(None, 0, 0)).done,
        "never looked at by its controller"
    );
}

#[test]
fn the_chart_built_in_is_the_source_trees_without_its_tests() {
    let tmp = helm::TempDir::new("test").unwrap();
    let chart = helm::write_chart(tmp.path()).unwrap();
    let version = helm::embedded_version().unwrap();
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    for f in [
        "Chart.yaml",
        "values.yaml",
        "values.schema.json",
        "crds",
        "templates",
        "files",
    ] {
        assert!(chart.join(f).exists(), "{f} in the chart");
    }
    assert!(!chart.join("tests").exists(), "the chart's tests stay out");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../chart/values.yaml");
    assert_eq!(
        std::fs::read(chart.join("values.yaml")).unwrap(),
        std::fs::read(src).unwrap()
    );
    let dir = tmp.path().to_owned();
    drop(tmp);
    assert!(!dir.exists(), "the temporary directory is removed");
    assert_eq!(
        helm::chart_version("name: liqo\nversion: \"1.2.3\"\n").as_deref(),
        Some("1.2.3")
    );
}

#[test]
fn the_rollback_target_is_the_latest_revision_not_the_count() {
    // Helm keeps the last 10: revisions 3 to 12.
    let history: Vec<serde_json::Value> = (3..=12)
        .map(|r| json!({"revision": r, "status": if r == 12 { "deployed" } else { "superseded" }}))
        .collect();
    let text = serde_json::to_string(&history).unwrap();
    assert_eq!(helm::last_revision(&text), Ok(Some(12)));
    assert_eq!(helm::last_revision("[]"), Ok(None));
    assert!(helm::last_revision("not json").is_err());
    assert!(helm::last_revision(r#"[{"status": "deployed"}]"#).is_err());
}

#[test]
fn helm_versions_are_read_from_the_short_form() {
    assert_eq!(helm::version("v4.1.4+g05fa379\n"), Some((4, 1)));
    assert_eq!(helm::version("v3.13.0+g825e86f"), Some((3, 13)));
    assert!(helm::version("v3.12.3+g3a31588").unwrap() < helm::MIN_VERSION);
    assert_eq!(helm::version("garbage"), None);
}

#[test]
fn only_peerings_under_way_refuse_an_uninstall() {
    use control::api::discovery::ForeignCluster;
    let fc = |name: &str, status: serde_json::Value| -> ForeignCluster {
        serde_json::from_value(json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": name},
            "spec": {"clusterIdentity": {"clusterID": "b07938e3-d241-460c-a77b-e286c0f733c7", "clusterName": name},
                     "foreignAuthUrl": "https://milan.example"},
            "status": status,
        }))
        .unwrap()
    };
    let cond = |t: &str, s: &str| json!({"type": t, "status": s, "reason": "r", "message": "m"});
    let fcs = [
        fc(
            "past",
            json!({"peeringConditions": [cond("OutgoingPeering", "None"), cond("IncomingPeering", "None")]}),
        ),
        fc("fresh", json!({})),
        fc(
            "out",
            json!({"peeringConditions": [cond("OutgoingPeering", "Established")]}),
        ),
        fc(
            "in",
            json!({"peeringConditions": [cond("IncomingPeering", "Pending")]}),
        ),
        fc(
            "going",
            json!({"peeringConditions": [cond("OutgoingPeering", "Disconnecting")]}),
        ),
    ];
    assert_eq!(super::uninstall::active_peerings(&fcs), ["out", "in"]);
    assert_eq!(super::uninstall::disconnecting(&fcs), ["going"]);
}
