use super::*;
use crate::{Config, Ipam, cluster_id};

fn target() -> Target {
    Target {
        namespace: "liqo".into(),
        name: "liqo-ipam-state".into(),
    }
}

/// A state with two remapped peers.
fn state() -> State {
    let mut ipam = Ipam::new(Config::new(
        "10.200.0.0/16".parse().unwrap(),
        "10.96.0.0/12".parse().unwrap(),
    ))
    .unwrap();
    for p in ["milan", "turin"] {
        ipam.acquire(
            &cluster_id(p).unwrap(),
            "10.200.0.0/16".parse().unwrap(),
            "10.70.0.0/16".parse().unwrap(),
        )
        .unwrap();
    }
    ipam.state()
}

#[test]
fn names_are_checked_as_the_api_server_does() {
    let long_name = format!("{}.b", "a".repeat(251));
    for ok in [
        "liqo-ipam-state",
        "a",
        "0",
        "ipam.state-1",
        long_name.as_str(),
    ] {
        assert_eq!(check_name(ok), Ok(()), "{ok}");
    }
    let too_long = "a".repeat(254);
    for (bad, why) in [
        ("", "is empty"),
        ("Liqo-ipam", "contains 'L'"),
        ("liqo_ipam", "contains '_'"),
        ("-liqo", "must start and end"),
        ("liqo-", "must start and end"),
        ("liqo..state", "must start and end"),
        (".liqo", "must start and end"),
        (too_long.as_str(), "254 characters long (at most 253)"),
    ] {
        let e = check_name(bad).unwrap_err();
        assert!(e.starts_with("not a valid ConfigMap name: "), "{e}");
        assert!(e.contains(why), "{bad:?}: {e}");
    }
    for ok in ["liqo", "a", "tenant-1"] {
        assert_eq!(check_namespace(ok), Ok(()), "{ok}");
    }
    let too_long = "a".repeat(64);
    for (bad, why) in [
        ("", "is empty"),
        ("liqo.system", "contains '.'"),
        ("Liqo", "contains 'L'"),
        ("liqo-", "must start and end"),
        (too_long.as_str(), "64 characters long (at most 63)"),
    ] {
        let e = check_namespace(bad).unwrap_err();
        assert!(e.starts_with("not a valid namespace: "), "{e}");
        assert!(e.contains(why), "{bad:?}: {e}");
    }
}

#[test]
fn the_configmap_holds_the_json_of_the_file_store_and_decodes_back() {
    let state = state();
    let json = encode_state(&state).unwrap();
    // Byte for byte what the file store writes.
    let dir = tempfile::tempdir().unwrap();
    let mut file = crate::store::FileStore::new(dir.path().join("state.json"));
    crate::store::Store::save(&mut file, &state).unwrap();
    assert_eq!(std::fs::read(file.path()).unwrap(), json.as_bytes());

    let cm = object(&target(), json.clone(), state.version, None);
    assert_eq!(cm.metadata.name.as_deref(), Some("liqo-ipam-state"));
    assert_eq!(cm.metadata.namespace.as_deref(), Some("liqo"));
    assert_eq!(cm.metadata.resource_version, None, "created, not replaced");
    assert_eq!(
        cm.metadata.labels.as_ref().unwrap()[MANAGED_BY_LABEL],
        "liqo-ipam"
    );
    assert_eq!(
        cm.metadata.annotations.as_ref().unwrap()[VERSION_ANNOTATION],
        crate::STATE_VERSION.to_string()
    );
    assert_eq!(data(&cm), Some(json.as_str()));
    assert_eq!(decode(&target(), &cm).unwrap(), state);
}

#[test]
fn a_replace_carries_the_version_seen_and_keeps_foreign_labels() {
    let mut seen: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "liqo-ipam-state",
            "namespace": "liqo",
            "resourceVersion": "4242",
            "labels": {"team": "net", MANAGED_BY_LABEL: "someone-else"},
            "annotations": {"note": "kept", VERSION_ANNOTATION: "1"},
        },
    }))
    .unwrap();
    let s = Seen::of(&target(), &seen).unwrap();
    assert_eq!(s.resource_version, "4242");
    let cm = object(&target(), "{}".into(), 2, Some(&s));
    assert_eq!(cm.metadata.resource_version.as_deref(), Some("4242"));
    let labels = cm.metadata.labels.unwrap();
    assert_eq!(
        (labels["team"].as_str(), labels[MANAGED_BY_LABEL].as_str()),
        ("net", "liqo-ipam")
    );
    let annotations = cm.metadata.annotations.unwrap();
    assert_eq!(
        (
            annotations["note"].as_str(),
            annotations[VERSION_ANNOTATION].as_str()
        ),
        ("kept", "2")
    );
    // Without a resourceVersion there is no precondition: such an object is never remembered.
    for rv in [None, Some(String::new())] {
        seen.metadata.resource_version = rv;
        let e = Seen::of(&target(), &seen).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ConfigMap liqo/liqo-ipam-state came without a resourceVersion"
        );
    }
}

#[test]
fn content_that_is_not_a_state_is_refused_naming_the_configmap() {
    let cm = |data: serde_json::Value| -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "liqo-ipam-state", "resourceVersion": "1"},
            "data": data,
        }))
        .unwrap()
    };
    for (data, why) in [
        (serde_json::json!({}), "no data key state.json"),
        (serde_json::json!({"other": "x"}), "no data key state.json"),
        (
            serde_json::json!({DATA_KEY: "{not json"}),
            "state.json: key must be",
        ),
        (
            serde_json::json!({DATA_KEY: "{\"version\": 2}"}),
            "state.json: missing field `config`",
        ),
    ] {
        let e = decode(&target(), &cm(data)).unwrap_err();
        let text = liqo_types::chain(&e);
        assert!(
            text.starts_with("ConfigMap liqo/liqo-ipam-state does not hold a valid IPAM state: "),
            "{text}"
        );
        assert!(text.contains(why), "{text}");
    }
}

#[test]
fn a_state_larger_than_a_configmap_is_refused_before_sending() {
    let mut big = state();
    let peer = big.peers[0].clone();
    big.released = vec![peer; 8000];
    let e = encode_state(&big).unwrap_err();
    assert!(
        matches!(e, ConfigMapError::TooLarge { len, .. } if len > MAX_DATA),
        "{e}"
    );
}

#[test]
fn failures_are_classified_by_what_they_say_about_the_write() {
    let api = |code: u16, reason: &str| {
        kube::Error::Api(Box::new(
            serde_json::from_value(serde_json::json!({
                "status": "Failure", "code": code, "reason": reason, "message": "m",
            }))
            .unwrap(),
        ))
    };
    for creating in [false, true] {
        assert_eq!(classify(&api(409, "Conflict"), creating), Failure::Conflict);
        assert_eq!(
            classify(&api(409, "AlreadyExists"), creating),
            Failure::Conflict
        );
        for (code, reason) in [
            (403, "Forbidden"),
            (422, "Invalid"),
            (429, "TooManyRequests"),
            (400, "BadRequest"),
        ] {
            assert_eq!(classify(&api(code, reason), creating), Failure::Refused);
        }
        for (code, reason) in [(500, "InternalError"), (504, "Timeout"), (503, "")] {
            assert_eq!(classify(&api(code, reason), creating), Failure::Unknown);
        }
        let cut = kube::Error::Service(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert_eq!(classify(&cut, creating), Failure::Unknown);
    }
    // A replace of a deleted ConfigMap, and a create in a missing namespace.
    assert_eq!(classify(&api(404, "NotFound"), false), Failure::Gone);
    assert_eq!(classify(&api(404, "NotFound"), true), Failure::Refused);
}
