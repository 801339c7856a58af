//! What an install prints (NOTES.txt) and the cluster ID of a render without cluster access.

use crate::helm::{self, NAMESPACE};

/// The output of `helm install --dry-run=client` of the defaults case with `extra` arguments.
fn install(extra: &[&str]) -> String {
    let chart = helm::chart();
    let values = helm::case("defaults");
    let mut args = vec![
        "install",
        "liqo",
        chart.to_str().unwrap(),
        "--namespace",
        NAMESPACE,
    ];
    args.extend(["--values", values.to_str().unwrap(), "--dry-run=client"]);
    args.extend(extra);
    helm::run(&args).expect_ok()
}

#[test]
fn the_notes_give_the_pod_security_command_unless_told_not_to() {
    let out = install(&[]);
    let notes = out
        .split("NOTES:")
        .nth(1)
        .unwrap_or_else(|| panic!("no NOTES:\n{out}"));
    assert!(notes.contains("as cluster \"rome\""), "{notes}");
    let command = format!(
        "kubectl label namespace {NAMESPACE} pod-security.kubernetes.io/enforce=privileged --overwrite"
    );
    assert!(notes.contains(&command), "{notes}");
    let out = install(&["--set", "podSecurity.enforce="]);
    assert!(!out.contains("kubectl label namespace"), "{out}");
}

#[test]
fn without_an_override_the_cluster_id_is_a_fresh_uuidv4_at_each_render() {
    let values = helm::case("defaults");
    let ids: Vec<String> = (0..2)
        .map(|_| {
            let render = helm::template(&values, &["--set", "discovery.config.clusterIDOverride="])
                .expect_ok();
            let objects = helm::objects(&render);
            let cm = helm::find(&objects, "ConfigMap", "liqo-clusterid-configmap").unwrap();
            cm["data"]["CLUSTER_ID"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_ne!(ids[0], ids[1]);
    for id in &ids {
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{id}");
        assert_eq!(&id[14..15], "4", "{id} is not a version 4 UUID");
    }
}
