//! Service forge: what is copied, what is the provider's (addresses, node ports), the
//! `liqo.io/force-remote-node-port` annotation, and `default/kubernetes`.

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

use super::fixture::{
    assert_copy_meta, created, ids, json_of, no_inputs, obj, ours_labels, server_meta,
};
use crate::reflection::{Action, REASON_REFUSED, Reflect, Skip, decide};

fn svc(name: &str, annotations: Value, spec: Value) -> Service {
    obj(json!({
        "metadata": {"name": name, "namespace": "demo", "uid": "u-local",
                     "labels": {"app": "web"}, "annotations": annotations},
        "spec": spec,
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}
    }))
}

fn lb_spec() -> Value {
    json!({
        "type": "LoadBalancer",
        "selector": {"app": "web"},
        "ports": [
            {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP",
             "appProtocol": "http", "nodePort": 30080},
            {"name": "dns", "port": 53, "targetPort": 5353, "protocol": "UDP", "nodePort": 30053}
        ],
        "clusterIP": "10.96.0.12", "clusterIPs": ["10.96.0.12"],
        "loadBalancerIP": "192.0.2.10", "externalIPs": ["198.51.100.7"],
        "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
        "externalTrafficPolicy": "Local", "internalTrafficPolicy": "Local",
        "healthCheckNodePort": 32000,
        "allocateLoadBalancerNodePorts": false,
        "loadBalancerClass": "example.com/lb",
        "loadBalancerSourceRanges": ["203.0.113.0/24"],
        "publishNotReadyAddresses": true,
        "sessionAffinity": "ClientIP",
        "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}}
    })
}

fn forge(local: &Service) -> Result<Service, liqo_types::FieldError> {
    let ids = ids();
    Service::forge(local, &ids.ctx(), &no_inputs())
}

#[test]
fn forge_copies_the_spec_but_not_addresses_or_node_ports() {
    let s = forge(&svc("web", json!({}), lb_spec())).unwrap();
    assert_copy_meta(&s.metadata, "web");
    assert_eq!(
        json_of(&s.metadata.labels),
        ours_labels(json!({"app": "web"}))
    );
    assert_eq!(
        json_of(&s.spec),
        json!({
            "type": "LoadBalancer",
            "selector": {"app": "web"},
            "ports": [
                {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP",
                 "appProtocol": "http"},
                {"name": "dns", "port": 53, "targetPort": 5353, "protocol": "UDP"}
            ],
            "ipFamilyPolicy": "SingleStack",
            "externalTrafficPolicy": "Local", "internalTrafficPolicy": "Local",
            "allocateLoadBalancerNodePorts": false,
            "loadBalancerClass": "example.com/lb",
            "loadBalancerSourceRanges": ["203.0.113.0/24"],
            "publishNotReadyAddresses": true,
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}}
        })
    );
    assert_eq!(s.status, None);
}

#[test]
fn forge_copies_external_name() {
    let spec = json!({"type": "ExternalName", "externalName": "db.example.com"});
    let s = forge(&svc("db", json!({}), spec)).unwrap();
    let spec = s.spec.unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ExternalName"));
    assert_eq!(spec.external_name.as_deref(), Some("db.example.com"));
}

#[test]
fn headless_stays_headless() {
    let spec = json!({"selector": {"app": "web"}, "ports": [{"port": 80}],
                      "clusterIP": "None", "clusterIPs": ["None"]});
    let s = forge(&svc("web", json!({}), spec)).unwrap().spec.unwrap();
    assert_eq!(s.cluster_ip.as_deref(), Some("None"));
    assert_eq!(s.cluster_ips, Some(vec!["None".to_owned()]));
}

#[test]
fn node_ports_kept_when_forced() {
    let forced = json!({"liqo.io/force-remote-node-port": "true"});
    let s = forge(&svc("web", forced, lb_spec())).unwrap();
    let ports: Vec<_> = s
        .spec
        .unwrap()
        .ports
        .unwrap()
        .iter()
        .map(|p| p.node_port)
        .collect();
    assert_eq!(ports, [Some(30080), Some(30053)]);
    // The annotation is a local one like any other: kept on the copy.
    assert_eq!(
        json_of(&s.metadata.annotations),
        json!({"liqo.io/force-remote-node-port": "true", "reflection.liqo.io/local-uid": "u-local"})
    );
}

#[test]
fn node_ports_dropped_when_not_forced() {
    let not_forced = json!({"liqo.io/force-remote-node-port": "false"});
    let s = forge(&svc("web", not_forced, lb_spec())).unwrap();
    let ports = s.spec.unwrap().ports.unwrap();
    assert!(ports.iter().all(|p| p.node_port.is_none()), "{ports:?}");
}

#[test]
fn bad_force_node_port_value_is_refused() {
    let bad = json!({"liqo.io/force-remote-node-port": "always"});
    let local = svc("web", bad, lb_spec());
    let e = forge(&local).unwrap_err();
    assert_eq!(
        e.field,
        "metadata.annotations[liqo.io/force-remote-node-port]"
    );
    assert!(e.problem.contains("always"), "{}", e.problem);

    // decide: a Warning, whether the copy is there (left as it was) or not (not created).
    let ids = ids();
    let mut meta = server_meta("web", "u-remote");
    meta["labels"] = ours_labels(json!({"app": "web"}));
    let ours: Service = obj(json!({"metadata": meta, "spec": {"ports": [{"port": 80}]}}));
    for remote in [Some(&ours), None] {
        match decide(Some(&local), remote, &ids.ctx(), &no_inputs()) {
            Action::Warn { reason, field, .. } => {
                assert_eq!(reason, REASON_REFUSED);
                assert_eq!(
                    field.map(|f| f.field).as_deref(),
                    Some("metadata.annotations[liqo.io/force-remote-node-port]")
                );
            }
            other => panic!("expected Warn, got {other:?}"),
        }
    }
}

#[test]
fn default_kubernetes_is_excluded() {
    let ids = ids();
    let ctx = ids.ctx_in("default");
    let local = svc("kubernetes", json!({}), json!({"ports": [{"port": 443}]}));
    assert!(matches!(
        Service::skip(&local, &ctx, &no_inputs()),
        Some(Skip::Excluded(_))
    ));
    assert_eq!(
        decide(Some(&local), None, &ctx, &no_inputs()),
        Action::Nothing
    );
    // The provider's own `kubernetes` Service in the remote namespace is never touched.
    let mut meta = server_meta("kubernetes", "u-theirs");
    meta["labels"] = json!({"component": "apiserver"});
    let theirs: Service = obj(json!({"metadata": meta, "spec": {"ports": [{"port": 443}]}}));
    assert_eq!(
        decide(Some(&local), Some(&theirs), &ctx, &no_inputs()),
        Action::Nothing
    );
}

#[test]
fn kubernetes_elsewhere_and_other_services_in_default_are_reflected() {
    let ids = ids();
    let local = svc("kubernetes", json!({}), json!({"ports": [{"port": 443}]}));
    let other_ns = ids.ctx_in("other");
    assert_eq!(Service::skip(&local, &other_ns, &no_inputs()), None);
    let s = created(decide(Some(&local), None, &other_ns, &no_inputs()));
    assert_copy_meta(&s.metadata, "kubernetes");

    let web = svc("web", json!({}), json!({"ports": [{"port": 80}]}));
    let default = ids.ctx_in("default");
    assert_eq!(Service::skip(&web, &default, &no_inputs()), None);
    created(decide(Some(&web), None, &default, &no_inputs()));
}
