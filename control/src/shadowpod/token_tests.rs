//! The offloaded pods' ServiceAccount tokens: what a projection asks for, the TokenRequest, the
//! renewal time, the Secret, and the remote spec reading it with the home API server's address.

use std::collections::BTreeMap;

use k8s_openapi::{api::core::v1::Pod, jiff::Timestamp};
use serde_json::json;

use super::{
    consumer::{reflection_labels, remote_pod_spec},
    token::*,
};
use crate::api::ClusterId;

fn ids() -> (ClusterId, ClusterId) {
    (
        "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d".parse().unwrap(),
        "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e".parse().unwrap(),
    )
}

fn pod(projection: bool) -> Pod {
    let mut volumes = vec![json!({"name": "data", "emptyDir": {}})];
    if projection {
        volumes.push(json!({"name": "kube-api-access-x1y2z", "projected": {"sources": [
            {"serviceAccountToken": {"expirationSeconds": 1800, "path": "token", "audience": "vault"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
        ]}}));
    }
    serde_json::from_value(json!({
        "metadata": {"name": "web-1", "namespace": "demo", "uid": "u-1"},
        "spec": {"serviceAccountName": "reader", "volumes": volumes,
            "containers": [{"name": "c", "image": "x", "env": [
                {"name": "KUBERNETES_SERVICE_HOST", "value": "stale"}, {"name": "KEEP", "value": "1"}]}],
            "initContainers": [{"name": "i", "image": "x"}]}
    }))
    .unwrap()
}

fn api() -> HomeApi {
    HomeApi {
        host: "10.70.0.1".into(),
        port: 6443,
    }
}

#[test]
fn a_home_api_server_is_host_colon_port() {
    let a: HomeApi = "10.70.0.1:6443".parse().unwrap();
    assert_eq!(a, api());
    assert_eq!(a.to_string(), "10.70.0.1:6443");
    for bad in ["10.70.0.1", ":6443", "10.70.0.1:http", "10.70.0.1:70000"] {
        let e = bad.parse::<HomeApi>().unwrap_err().to_string();
        assert!(e.contains(&format!("{bad:?}")), "{e}");
    }
}

#[test]
fn the_kubelets_3607_s_is_asked_as_3600_s_never_extended_to_a_year() {
    let mut v = serde_json::to_value(pod(true)).unwrap();
    v["spec"]["volumes"][1]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] =
        json!(3607);
    let p: Pod = serde_json::from_value(v).unwrap();
    assert_eq!(need(&p).unwrap().expiration_seconds, 3600);
}

#[test]
fn a_projection_asks_for_a_token_of_its_service_account() {
    let need = need(&pod(true)).unwrap();
    assert_eq!(need.service_account, "reader");
    assert_eq!(need.audience.as_deref(), Some("vault"));
    assert_eq!(need.expiration_seconds, 1800);
    assert_eq!(need_of_default(), "default");
    assert!(
        super::token::need(&pod(false)).is_none(),
        "no projection, no token"
    );
}

fn need_of_default() -> String {
    let mut p = pod(true);
    p.spec.as_mut().unwrap().service_account_name = None;
    need(&p).unwrap().service_account
}

#[test]
fn the_token_request_is_bound_to_the_home_pod() {
    let p = pod(true);
    let r = token_request(&p, &need(&p).unwrap());
    let b = r.spec.bound_object_ref.unwrap();
    assert_eq!(
        (b.kind.as_deref(), b.name.as_deref(), b.uid.as_deref()),
        (Some("Pod"), Some("web-1"), Some("u-1"))
    );
    assert_eq!(r.spec.audiences, ["vault"]);
    assert_eq!(r.spec.expiration_seconds, Some(1800));
}

#[test]
fn a_token_is_renewed_at_four_fifths_of_its_life() {
    let issued: Timestamp = "2026-11-29T00:00:00Z".parse().unwrap();
    let expires: Timestamp = "2026-11-29T01:00:00Z".parse().unwrap();
    assert_eq!(
        renew_at(issued, expires),
        "2026-11-29T00:48:00Z".parse::<Timestamp>().unwrap()
    );
    // Already expired: renewed at once.
    assert_eq!(renew_at(expires, issued), expires);
    // A year-long token (extended by the API server) is renewed within a day.
    let year: Timestamp = "2027-11-29T00:00:00Z".parse().unwrap();
    assert_eq!(
        renew_at(issued, year),
        "2026-11-30T00:00:00Z".parse::<Timestamp>().unwrap()
    );
}

#[test]
fn the_secret_holds_the_token_and_the_home_namespace_and_is_owned_by_the_shadow_pod() {
    let (home, foreign) = ids();
    let s = token_secret(
        &pod(true),
        "demo-rome",
        "t0k3n",
        "shadow-uid",
        reflection_labels(&home, &foreign),
    );
    assert_eq!(s.metadata.name.as_deref(), Some("liqo-token-web-1"));
    assert_eq!(s.metadata.namespace.as_deref(), Some("demo-rome"));
    let data = s.data.unwrap();
    assert_eq!(data["token"].0, b"t0k3n");
    assert_eq!(data["namespace"].0, b"demo");
    let owner = &s.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.uid.as_str()
        ),
        ("virtualkubelet.liqo.io/v1alpha1", "ShadowPod", "shadow-uid")
    );
    let labels = s.metadata.labels.unwrap();
    assert_eq!(labels.get(POD_LABEL).map(String::as_str), Some("web-1"));
    assert!(labels.contains_key("virtualkubelet.liqo.io/origin"));
    let (a, b) = (
        format!("{}a", "p".repeat(300)),
        format!("{}b", "p".repeat(300)),
    );
    assert_eq!(secret_name(&a).len(), 253);
    assert_ne!(secret_name(&a), secret_name(&b), "long names stay apart");
    assert_eq!(pod_label(&a).len(), 63);
    assert_eq!(pod_label("web-1"), "web-1");
}

#[test]
fn with_api_support_the_remote_spec_reads_the_secret_and_points_at_home() {
    let (home, _) = ids();
    let local = pod(true);
    let spec = remote_pod_spec(local.spec.as_ref().unwrap(), &home, Some((&api(), "web-1")));
    let env: BTreeMap<String, String> = spec.containers[0]
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect();
    assert_eq!(env["KUBERNETES_SERVICE_HOST"], "kubernetes.default.svc");
    let aliases = spec.host_aliases.clone().unwrap();
    let ours = aliases.last().unwrap();
    assert_eq!(ours.ip, "10.70.0.1");
    assert!(
        ours.hostnames
            .as_ref()
            .unwrap()
            .contains(&"kubernetes.default.svc".to_owned())
    );
    assert_eq!(env["KUBERNETES_SERVICE_PORT"], "6443");
    assert_eq!(env["KEEP"], "1");
    assert_eq!(env.len(), 1 + api_env(&api()).len(), "{env:?}");
    let init = spec.init_containers.as_ref().unwrap()[0]
        .env
        .clone()
        .unwrap();
    assert_eq!(init.len(), api_env(&api()).len());
    let sources = spec.volumes.as_ref().unwrap()[1]
        .projected
        .clone()
        .unwrap()
        .sources
        .unwrap();
    let v = serde_json::to_value(&sources).unwrap();
    assert_eq!(
        v,
        json!([
            {"secret": {"name": "liqo-token-web-1", "items": [{"key": "token", "path": "token"}], "optional": false}},
            {"configMap": {"name": "kube-root-ca.crt.0a1b2", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"secret": {"name": "liqo-token-web-1", "items": [{"key": "namespace", "path": "namespace"}], "optional": false}}
        ])
    );
}

#[test]
fn without_api_support_or_projection_nothing_points_at_home() {
    let (home, _) = ids();
    let local = pod(true);
    let off = remote_pod_spec(local.spec.as_ref().unwrap(), &home, None);
    let env = off.containers[0].env.clone().unwrap();
    assert_eq!(
        env[0].value.as_deref(),
        Some("stale"),
        "left as the pod has it"
    );
    let sources = off.volumes.as_ref().unwrap()[1]
        .projected
        .clone()
        .unwrap()
        .sources
        .unwrap();
    assert!(
        sources
            .iter()
            .all(|s| s.service_account_token.is_none() && s.secret.is_none())
    );
    let bare = pod(false);
    let spec = remote_pod_spec(bare.spec.as_ref().unwrap(), &home, Some((&api(), "web-1")));
    assert_eq!(
        spec.containers[0].env.as_ref().unwrap().len(),
        2,
        "no token, no redirection"
    );
}

#[test]
fn a_named_home_api_server_is_dialled_by_its_name_without_aliases() {
    let named = HomeApi {
        host: "api.rome.example".into(),
        port: 443,
    };
    assert_eq!(dial_host(&named), "api.rome.example");
    assert_eq!(host_aliases(None, &named), None);
    // A pod's own alias of one of the names gives way to ours.
    let mine = k8s_openapi::api::core::v1::HostAlias {
        ip: "1.2.3.4".into(),
        hostnames: Some(vec!["kubernetes.default".into(), "db".into()]),
    };
    let got = host_aliases(Some(vec![mine]), &api()).unwrap();
    assert_eq!(got[0].hostnames.as_deref().unwrap(), ["db"]);
    assert_eq!(got.len(), 2);
}

#[test]
fn the_api_endpoint_is_the_lowest_ready_address_with_the_https_port() {
    let slice = |addresses: serde_json::Value| -> k8s_openapi::api::discovery::v1::EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": "kubernetes"}, "addressType": "IPv4",
            "ports": [{"name": "other", "port": 1}, {"name": "https", "port": 6443}],
            "endpoints": addresses
        }))
        .unwrap()
    };
    let a = slice(json!([
        {"addresses": ["10.0.0.9"], "conditions": {"ready": true}},
        {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
        {"addresses": ["10.0.0.5"]}
    ]));
    assert_eq!(api_endpoint(&[a]), Some(("10.0.0.5".to_owned(), 6443)));
    assert_eq!(api_endpoint(&[]), None);
    assert_eq!(api_endpoint(&[slice(json!([]))]), None);
}

#[test]
fn only_this_pods_token_secret_of_this_peering_is_ours_to_overwrite() {
    let (home, foreign) = ids();
    let labels = crate::shadowpod::consumer::reflection_labels(&home, &foreign);
    let other = crate::shadowpod::consumer::reflection_labels(&foreign, &home);
    let ours = super::token::token_secret(&pod(true), "demo-rome", "t0k3n", "u-s", labels.clone());
    assert!(super::token::is_token_secret_of(&ours, "web-1", &labels));
    assert!(!super::token::is_token_secret_of(&ours, "web-2", &labels));
    assert!(!super::token::is_token_secret_of(&ours, "web-1", &other));
    // A reflected copy of a home Secret that happens to have the name.
    let mut copy = ours.clone();
    copy.metadata.labels = Some(labels.clone());
    assert!(!super::token::is_token_secret_of(&copy, "web-1", &labels));
}

#[test]
fn every_variable_the_kubelet_gives_about_its_api_server_points_at_home() {
    let var = |n: &str, v: &str| k8s_openapi::api::core::v1::EnvVar {
        name: n.into(),
        value: Some(v.into()),
        value_from: None,
    };
    let env = with_api_env(
        Some(vec![
            var("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
            var("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
            var("KEEP", "1"),
        ]),
        &api(),
    )
    .unwrap();
    assert_eq!(env.len(), 9, "each once: {env:?}");
    let env: BTreeMap<&str, &str> = env
        .iter()
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or_default()))
        .collect();
    assert_eq!(
        env,
        BTreeMap::from([
            ("KEEP", "1"),
            ("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc"),
            ("KUBERNETES_SERVICE_PORT", "6443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "6443"),
            ("KUBERNETES_PORT", "tcp://10.70.0.1:6443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://10.70.0.1:6443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_PORT_443_TCP_PORT", "6443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "10.70.0.1"),
        ])
    );
}
