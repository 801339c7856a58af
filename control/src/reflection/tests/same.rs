//! [`same`]: a copy holding the provider's defaults is the forged one; a changed field is not.

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

use super::fixture::{ids, no_inputs, obj, ours_labels, server_meta};
use crate::reflection::{Action, Reflect, decide, same};

fn local_svc(spec: Value) -> Service {
    obj(json!({
        "metadata": {"name": "web", "namespace": "demo", "uid": "u-local", "labels": {"app": "web"}},
        "spec": spec
    }))
}

/// A local Service as the home API server returns it (its own defaults filled in).
fn local_spec() -> Value {
    json!({
        "type": "ClusterIP",
        "selector": {"app": "web", "tier": "front"},
        "ports": [{"name": "http", "port": 80, "targetPort": 8080},
                  {"name": "metrics", "port": 9090}],
        "clusterIP": "10.96.0.12", "clusterIPs": ["10.96.0.12"]
    })
}

/// The copy as the provider stores it: its own addresses, protocols, defaulted target ports,
/// families and policies.
fn remote_spec() -> Value {
    json!({
        "type": "ClusterIP",
        "selector": {"app": "web", "tier": "front"},
        "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                  {"name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP"}],
        "clusterIP": "10.112.4.7", "clusterIPs": ["10.112.4.7"],
        "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
        "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"
    })
}

fn remote_svc(spec: Value) -> Service {
    let mut meta = server_meta("web", "u-remote");
    meta["labels"] = ours_labels(json!({"app": "web"}));
    meta["annotations"] = json!({"reflection.liqo.io/local-uid": "u-local"});
    obj(json!({"metadata": meta, "spec": spec, "status": {"loadBalancer": {}}}))
}

fn forged(local: &Service) -> Service {
    let ids = ids();
    Service::forge(local, &ids.ctx(), &no_inputs()).unwrap()
}

#[test]
fn copy_with_server_defaults_is_same() {
    let desired = forged(&local_svc(local_spec()));
    assert!(same(&desired, &remote_svc(remote_spec())));
    let ids = ids();
    let a = decide(
        Some(&local_svc(local_spec())),
        Some(&remote_svc(remote_spec())),
        &ids.ctx(),
        &no_inputs(),
    );
    assert_eq!(a, Action::Nothing);
}

#[test]
fn forged_is_same_as_itself() {
    let desired = forged(&local_svc(local_spec()));
    assert!(same(&desired, &desired.clone()));
}

#[test]
fn changed_port_is_not_same() {
    let desired = forged(&local_svc(local_spec()));
    let mut r = remote_spec();
    r["ports"][0]["port"] = json!(81);
    assert!(!same(&desired, &remote_svc(r)));
    let mut r = remote_spec();
    r["ports"][0]["targetPort"] = json!(8081);
    assert!(!same(&desired, &remote_svc(r)));
}

#[test]
fn port_added_or_removed_is_not_same() {
    let desired = forged(&local_svc(local_spec()));
    let mut r = remote_spec();
    r["ports"].as_array_mut().unwrap().pop();
    assert!(!same(&desired, &remote_svc(r)));
    let mut r = remote_spec();
    r["ports"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "extra", "port": 7000, "targetPort": 7000, "protocol": "TCP"}));
    assert!(!same(&desired, &remote_svc(r)));
}

#[test]
fn changed_selector_value_is_not_same() {
    let desired = forged(&local_svc(local_spec()));
    let mut r = remote_spec();
    r["selector"]["tier"] = json!("back");
    assert!(!same(&desired, &remote_svc(r)));
}

#[test]
fn selector_key_removed_locally_is_not_same() {
    let mut l = local_spec();
    l["selector"].as_object_mut().unwrap().remove("tier");
    let desired = forged(&local_svc(l.clone()));
    assert!(!same(&desired, &remote_svc(remote_spec())));
    let ids = ids();
    match decide(
        Some(&local_svc(l)),
        Some(&remote_svc(remote_spec())),
        &ids.ctx(),
        &no_inputs(),
    ) {
        Action::Apply(s) => assert_eq!(
            serde_json::to_value(&s.spec.unwrap().selector).unwrap(),
            json!({"app": "web"})
        ),
        other => panic!("expected Apply, got {other:?}"),
    }
}

#[test]
fn label_added_remotely_is_not_same() {
    let desired = forged(&local_svc(local_spec()));
    let mut remote = remote_svc(remote_spec());
    remote
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("intruder".into(), "x".into());
    assert!(!same(&desired, &remote));
}

#[test]
fn changed_session_affinity_is_not_same() {
    let mut l = local_spec();
    l["sessionAffinity"] = json!("ClientIP");
    let desired = forged(&local_svc(l));
    assert!(!same(&desired, &remote_svc(remote_spec())));
}

#[test]
fn provider_node_port_is_same_when_not_forced() {
    let mut l = local_spec();
    l["type"] = json!("NodePort");
    l["ports"][0]["nodePort"] = json!(30080);
    let desired = forged(&local_svc(l));
    let mut r = remote_spec();
    r["type"] = json!("NodePort");
    r["ports"][0]["nodePort"] = json!(31234);
    r["ports"][1]["nodePort"] = json!(31235);
    r["externalTrafficPolicy"] = json!("Cluster");
    assert!(same(&desired, &remote_svc(r)));
}

#[test]
fn headless_copy_is_same() {
    let mut l = local_spec();
    l["clusterIP"] = json!("None");
    l["clusterIPs"] = json!(["None"]);
    let desired = forged(&local_svc(l));
    let mut r = remote_spec();
    r["clusterIP"] = json!("None");
    r["clusterIPs"] = json!(["None"]);
    assert!(same(&desired, &remote_svc(r)));
    // A headless local Service whose copy got a ClusterIP is not the same.
    assert!(!same(&desired, &remote_svc(remote_spec())));
}

/// A field the forge copies, removed locally, must go from the copy too: the API server
/// omits `publishNotReadyAddresses: false` and an emptied `loadBalancerSourceRanges`, so the
/// local object simply lacks them.
#[test]
fn publish_not_ready_addresses_turned_off_is_not_same() {
    let desired = forged(&local_svc(local_spec()));
    let mut r = remote_spec();
    r["publishNotReadyAddresses"] = json!(true);
    assert!(!same(&desired, &remote_svc(r)));
}

#[test]
fn load_balancer_source_ranges_removed_is_not_same() {
    let mut l = local_spec();
    l["type"] = json!("LoadBalancer");
    let desired = forged(&local_svc(l));
    let mut r = remote_spec();
    r["type"] = json!("LoadBalancer");
    r["loadBalancerSourceRanges"] = json!(["203.0.113.0/24"]);
    assert!(!same(&desired, &remote_svc(r)));
}

#[test]
fn an_app_protocol_or_port_name_removed_locally_is_not_same() {
    let ids = ids();
    let with = svc_with_port(
        json!({"name": "http", "port": 80, "targetPort": 8080, "appProtocol": "http"}),
    );
    let without = svc_with_port(json!({"port": 80, "targetPort": 8080}));
    let desired = Service::forge(&without, &ids.ctx(), &no_inputs()).unwrap();
    let copy_of_with = Service::forge(&with, &ids.ctx(), &no_inputs()).unwrap();
    assert!(!same(&desired, &copy_of_with));
    assert!(same(
        &desired,
        &Service::forge(&without, &ids.ctx(), &no_inputs()).unwrap()
    ));
}

fn svc_with_port(port: Value) -> Service {
    obj(
        json!({"metadata": {"name": "web", "namespace": "demo", "uid": "u"},
               "spec": {"ports": [port]}}),
    )
}

#[test]
fn a_copy_without_the_local_uid_gets_it() {
    let ids = ids();
    let local = local_svc(local_spec());
    let desired = Service::forge(&local, &ids.ctx(), &no_inputs()).unwrap();
    let mut old = desired.clone();
    old.metadata.annotations = None;
    assert!(!same(&desired, &old));
    assert!(same(&desired, &desired));
}
