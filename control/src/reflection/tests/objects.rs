//! Secrets, Ingresses and ServiceAccounts: copied with the few rewrites §5 lists.

use k8s_openapi::api::{
    core::v1::{Secret, ServiceAccount},
    networking::v1::Ingress,
};
use serde_json::json;

use super::fixture::{
    assert_copy_meta, created, ids, json_of, no_inputs, obj, ours_labels, server_meta,
};
use crate::reflection::{Action, Reflect, Skip, decide};

const SA_NAME: &str = "kubernetes.io/service-account.name";

#[test]
fn service_account_token_becomes_opaque_labelled_with_its_account() {
    let ids = ids();
    let local: Secret = obj(json!({
        "metadata": {"name": "builder-token", "namespace": "demo", "uid": "u-s",
                     "labels": {"app": "ci"},
                     "annotations": {SA_NAME: "builder", "kubernetes.io/service-account.uid": "u-sa"}},
        "type": "kubernetes.io/service-account-token",
        "data": {"token": "dG9rZW4=", "ca.crt": "Y2E=", "namespace": "ZGVtbw=="}
    }));
    let s = created(decide(Some(&local), None, &ids.ctx(), &no_inputs()));
    assert_copy_meta(&s.metadata, "builder-token");
    assert_eq!(s.type_.as_deref(), Some("Opaque"));
    assert_eq!(
        json_of(&s.metadata.labels),
        ours_labels(json!({"app": "ci", SA_NAME: "builder"}))
    );
    assert_eq!(json_of(&s.data), json_of(&local.data));
}

#[test]
fn other_secrets_keep_type_and_data() {
    let ids = ids();
    for t in [
        Some("Opaque"),
        Some("kubernetes.io/dockerconfigjson"),
        Some("kubernetes.io/tls"),
        None,
    ] {
        let local: Secret = obj(json!({
            "metadata": {"name": "creds", "namespace": "demo", "labels": {"app": "web"},
                         "annotations": {SA_NAME: "not-a-token"}},
            "type": t,
            "data": {"k": "dg=="},
            "immutable": true
        }));
        let s = Secret::forge(&local, &ids.ctx(), &no_inputs()).unwrap();
        assert_copy_meta(&s.metadata, "creds");
        assert_eq!(s.type_.as_deref(), t);
        assert_eq!(json_of(&s.data), json!({"k": "dg=="}));
        assert_eq!(s.immutable, Some(true));
        assert_eq!(
            json_of(&s.metadata.labels),
            ours_labels(json!({"app": "web"})),
            "{t:?}"
        );
    }
}

#[test]
fn secret_with_changed_data_is_applied() {
    let ids = ids();
    let local: Secret = obj(json!({
        "metadata": {"name": "creds", "namespace": "demo"},
        "type": "Opaque", "data": {"k": "bmV3"}
    }));
    let mut meta = server_meta("creds", "u-remote");
    meta["labels"] = ours_labels(json!({}));
    let remote: Secret = obj(json!({"metadata": meta, "type": "Opaque",
                                    "data": {"k": "bmV3", "old": "eA=="}}));
    assert!(matches!(
        decide(Some(&local), Some(&remote), &ids.ctx(), &no_inputs()),
        Action::Apply(_)
    ));
}

fn ingress(annotations: serde_json::Value) -> Ingress {
    obj(json!({
        "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"},
                     "annotations": annotations},
        "spec": {
            "ingressClassName": "nginx",
            "tls": [{"hosts": ["web.example.com"], "secretName": "web-tls"}],
            "rules": [{"host": "web.example.com", "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"number": 80}}}}
            ]}}]
        },
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.20"}]}}
    }))
}

#[test]
fn ingress_loses_its_class_and_status() {
    let ids = ids();
    let local = ingress(json!({"kubernetes.io/ingress.class": "nginx",
                               "nginx.ingress.kubernetes.io/rewrite-target": "/"}));
    let i = Ingress::forge(&local, &ids.ctx(), &no_inputs()).unwrap();
    assert_copy_meta(&i.metadata, "web");
    assert_eq!(
        json_of(&i.metadata.annotations),
        json!({"nginx.ingress.kubernetes.io/rewrite-target": "/"})
    );
    let spec = i.spec.as_ref().unwrap();
    assert_eq!(spec.ingress_class_name, None);
    assert_eq!(
        json_of(&spec.rules),
        json_of(&local.spec.as_ref().unwrap().rules)
    );
    assert_eq!(
        json_of(&spec.tls),
        json_of(&local.spec.as_ref().unwrap().tls)
    );
    assert_eq!(i.status, None);
}

#[test]
fn ingress_tls_removed_locally_is_applied() {
    let ids = ids();
    let mut local = ingress(json!({}));
    let mut meta = server_meta("web", "u-remote");
    meta["labels"] = ours_labels(json!({"app": "web"}));
    let remote: Ingress = obj(json!({
        "metadata": meta,
        "spec": json_of(&local.spec),
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.20"}]}}
    }));
    local.metadata.annotations = None;
    // The copy as it stands (its class set by the provider's admission) is the same.
    let mut as_is = remote.clone();
    as_is.spec.as_mut().unwrap().ingress_class_name = Some("provider-default".into());
    assert_eq!(
        decide(Some(&local), Some(&as_is), &ids.ctx(), &no_inputs()),
        Action::Nothing
    );
    // TLS removed locally: the copy must lose it too.
    local.spec.as_mut().unwrap().tls = None;
    let i = match decide(Some(&local), Some(&as_is), &ids.ctx(), &no_inputs()) {
        Action::Apply(i) => i,
        other => panic!("expected Apply, got {other:?}"),
    };
    assert_eq!(i.spec.unwrap().tls, None);
}

#[test]
fn ingress_with_only_the_class_annotation_has_none() {
    let ids = ids();
    let local = ingress(json!({"kubernetes.io/ingress.class": "nginx"}));
    let i = Ingress::forge(&local, &ids.ctx(), &no_inputs()).unwrap();
    let annotations = i.metadata.annotations.unwrap_or_default();
    assert!(annotations.is_empty(), "{annotations:?}");
}

#[test]
fn default_service_account_is_excluded() {
    let ids = ids();
    let ctx = ids.ctx();
    let local: ServiceAccount = obj(json!({"metadata": {"name": "default", "namespace": "demo"}}));
    assert!(matches!(
        ServiceAccount::skip(&local, &ctx, &no_inputs()),
        Some(Skip::Excluded(_))
    ));
    assert_eq!(
        decide(Some(&local), None, &ctx, &no_inputs()),
        Action::Nothing
    );
    // The provider's own `default` is never touched.
    let theirs: ServiceAccount = obj(json!({"metadata": server_meta("default", "u-theirs")}));
    assert_eq!(
        decide(Some(&local), Some(&theirs), &ctx, &no_inputs()),
        Action::Nothing
    );
    assert_eq!(ServiceAccount::local_name("default", &ctx), None);
    assert_eq!(
        ServiceAccount::local_name("builder", &ctx).as_deref(),
        Some("builder")
    );
}

#[test]
fn other_service_accounts_are_name_only() {
    let ids = ids();
    let local: ServiceAccount = obj(json!({
        "metadata": {"name": "builder", "namespace": "demo", "uid": "u-sa",
                     "labels": {"app": "ci"}, "annotations": {"note": "kept"}},
        "secrets": [{"name": "builder-token"}],
        "imagePullSecrets": [{"name": "registry"}]
    }));
    let sa = created(decide(Some(&local), None, &ids.ctx(), &no_inputs()));
    assert_copy_meta(&sa.metadata, "builder");
    assert_eq!(
        json_of(&sa.metadata.labels),
        ours_labels(json!({"app": "ci"}))
    );
    assert_eq!(
        json_of(&sa.metadata.annotations),
        json!({"note": "kept", "reflection.liqo.io/local-uid": "u-sa"})
    );
    assert_eq!(sa.secrets, None);
    assert_eq!(sa.image_pull_secrets, None);
}
