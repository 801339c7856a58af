//! ConfigMaps: copied whole; the home root CA goes under a suffixed name beside the
//! provider's own.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

use super::fixture::{
    Ids, assert_copy_meta, created, ids, json_of, no_inputs, obj, ours_labels, server_meta,
};
use crate::reflection::{Action, Reflect, decide};

const SUFFIXED: &str = "kube-root-ca.crt.0a1b2";

fn root_ca() -> ConfigMap {
    obj(json!({
        "metadata": {"name": "kube-root-ca.crt", "namespace": "demo", "uid": "u-ca"},
        "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\nhome\n-----END CERTIFICATE-----\n"}
    }))
}

fn names(ids: &Ids) -> [(&'static str, String); 3] {
    let ctx = ids.ctx();
    [
        (
            "kube-root-ca.crt",
            ConfigMap::remote_name("kube-root-ca.crt", &ctx),
        ),
        ("settings", ConfigMap::remote_name("settings", &ctx)),
        (
            "kube-root-ca.crt.x",
            ConfigMap::remote_name("kube-root-ca.crt.x", &ctx),
        ),
    ]
}

#[test]
fn root_ca_remote_name_has_the_home_prefix() {
    let ids = ids();
    let [(_, ca), (_, settings), (_, other)] = names(&ids);
    assert_eq!(ca, SUFFIXED);
    assert_eq!(settings, "settings");
    assert_eq!(other, "kube-root-ca.crt.x");
}

#[test]
fn local_name_inverts_remote_name() {
    let ids = ids();
    let ctx = ids.ctx();
    assert_eq!(
        ConfigMap::local_name(SUFFIXED, &ctx).as_deref(),
        Some("kube-root-ca.crt")
    );
    assert_eq!(
        ConfigMap::local_name("settings", &ctx).as_deref(),
        Some("settings")
    );
    for (local, remote) in names(&ids) {
        assert_eq!(ConfigMap::local_name(&remote, &ctx).as_deref(), Some(local));
    }
}

#[test]
fn providers_own_root_ca_has_no_local_name() {
    let ids = ids();
    assert_eq!(ConfigMap::local_name("kube-root-ca.crt", &ids.ctx()), None);
}

#[test]
fn root_ca_is_created_under_the_suffixed_name() {
    let ids = ids();
    let cm = created(decide(Some(&root_ca()), None, &ids.ctx(), &no_inputs()));
    assert_copy_meta(&cm.metadata, SUFFIXED);
    assert_eq!(json_of(&cm.data), json_of(&root_ca().data));
}

#[test]
fn root_ca_copy_is_deleted_by_its_suffixed_name() {
    let ids = ids();
    let mut meta = server_meta(SUFFIXED, "u-copy");
    meta["labels"] = ours_labels(json!({}));
    let copy: ConfigMap = obj(json!({"metadata": meta, "data": {"ca.crt": "x"}}));
    assert_eq!(
        decide::<ConfigMap>(None, Some(&copy), &ids.ctx(), &no_inputs()),
        Action::Delete {
            name: SUFFIXED.into(),
            uid: "u-copy".into()
        }
    );
}

#[test]
fn data_binary_data_and_immutability_are_copied() {
    let ids = ids();
    let local: ConfigMap = obj(json!({
        "metadata": {"name": "settings", "namespace": "demo", "labels": {"app": "web"}},
        "data": {"a": "1", "config.yaml": "x: 1\n"},
        "binaryData": {"blob": "AAEC/w=="},
        "immutable": true
    }));
    let cm = ConfigMap::forge(&local, &ids.ctx(), &no_inputs()).unwrap();
    assert_copy_meta(&cm.metadata, "settings");
    assert_eq!(
        json_of(&cm.data),
        json!({"a": "1", "config.yaml": "x: 1\n"})
    );
    assert_eq!(json_of(&cm.binary_data), json!({"blob": "AAEC/w=="}));
    assert_eq!(cm.immutable, Some(true));
}

#[test]
fn a_local_config_map_named_like_the_root_cas_copy_is_refused() {
    let ids = ids();
    let mut impostor = root_ca();
    impostor.metadata.name = Some(SUFFIXED.into());
    impostor.metadata.uid = Some("u-impostor".into());
    match decide(Some(&impostor), None, &ids.ctx(), &no_inputs()) {
        Action::Warn { note, .. } => {
            assert!(note.contains("metadata.name"), "{note}");
            assert!(note.contains(SUFFIXED), "{note}");
        }
        other => panic!("{other:?}"),
    }
    // The root CA itself is still reflected under that name.
    assert_eq!(
        created(decide(Some(&root_ca()), None, &ids.ctx(), &no_inputs()))
            .metadata
            .name
            .as_deref(),
        Some(SUFFIXED)
    );
}
