//! EndpointSlices: reflected only for a reflected Service, never a reflected copy or a
//! non-IPv4 slice; the provider's own endpoints dropped, the others' addresses mapped.

use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::{Value, json};

use super::fixture::{
    HOME, NODE, applied, assert_copy_meta, created, ids, json_of, obj, ours_labels, server_meta,
    slice_inputs,
};
use crate::reflection::{
    Action, Inputs, REASON_REFUSED, Reflect, ServiceState, Skip, decide, endpointslice,
};

const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";

/// The IPAM's answers for the addresses of [`local`].
const MAPPED: [(&str, &str); 3] = [
    ("10.244.0.3", "10.71.0.3"),
    ("10.244.0.9", "10.71.0.9"),
    ("192.168.50.4", "10.70.0.4"),
];

fn local_with(endpoints: Value) -> EndpointSlice {
    obj(json!({
        "metadata": {
            "name": "web-abc12", "namespace": "demo", "uid": "u-slice", "resourceVersion": "3",
            "labels": {"kubernetes.io/service-name": "web",
                       MANAGED_BY: "endpointslice-controller.k8s.io"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "u-svc"}]
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
    }))
}

/// A slice with a pod of the provider (on the virtual node), two home pods sharing an
/// address, and an endpoint outside the cluster.
fn local() -> EndpointSlice {
    local_with(json!([
        {"addresses": ["10.200.1.5"], "conditions": {"ready": true}, "nodeName": NODE,
         "targetRef": {"kind": "Pod", "name": "web-r", "namespace": "demo", "uid": "u-r"}},
        {"addresses": ["10.244.0.9"], "conditions": {"ready": true, "serving": true, "terminating": false},
         "hostname": "web-0", "nodeName": "rome-worker",
         "targetRef": {"kind": "Pod", "name": "web-0", "namespace": "demo", "uid": "u-0"}},
        {"addresses": ["10.244.0.3", "10.244.0.9"], "conditions": {"ready": false},
         "nodeName": "rome-worker-2",
         "targetRef": {"kind": "Pod", "name": "web-1", "namespace": "demo", "uid": "u-1"}},
        {"addresses": ["192.168.50.4"], "conditions": {"ready": true}}
    ]))
}

fn reflected() -> Inputs {
    slice_inputs(ServiceState::Reflected, &MAPPED)
}

fn forge(local: &EndpointSlice, inputs: &Inputs) -> Result<EndpointSlice, liqo_types::FieldError> {
    let ids = ids();
    EndpointSlice::forge(local, &ids.ctx(), inputs)
}

/// Our copy of [`local`] as the provider stores it.
fn our_copy() -> EndpointSlice {
    let mut meta = server_meta("web-abc12", "u-remote");
    meta["labels"] = ours_labels(json!({"kubernetes.io/service-name": "web",
                                        MANAGED_BY: "endpointslice.reflection.liqo.io"}));
    meta["annotations"] = json!({"reflection.liqo.io/local-uid": "u-slice"});
    obj(json!({
        "metadata": meta,
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.71.0.9"], "conditions": {"ready": true, "serving": true, "terminating": false},
             "hostname": "web-0", "nodeName": HOME,
             "targetRef": {"kind": "RemotePod", "name": "web-0", "namespace": "demo", "uid": "u-0"}},
            {"addresses": ["10.71.0.3", "10.71.0.9"], "conditions": {"ready": false}, "nodeName": HOME,
             "targetRef": {"kind": "RemotePod", "name": "web-1", "namespace": "demo", "uid": "u-1"}},
            {"addresses": ["10.70.0.4"], "conditions": {"ready": true}, "nodeName": HOME}
        ],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
    }))
}

#[test]
fn addresses_lists_the_reflected_ones_sorted_and_deduplicated() {
    let ids = ids();
    assert_eq!(
        endpointslice::addresses(&local(), &ids.ctx()),
        ["10.244.0.3", "10.244.0.9", "192.168.50.4"]
    );
}

#[test]
fn forge_maps_addresses_and_drops_the_providers_endpoints() {
    let s = forge(&local(), &reflected()).unwrap();
    let addrs: Vec<_> = s.endpoints.iter().map(|e| e.addresses.clone()).collect();
    assert_eq!(
        addrs,
        [
            vec!["10.71.0.9"],
            vec!["10.71.0.3", "10.71.0.9"],
            vec!["10.70.0.4"]
        ]
    );
    assert!(
        s.endpoints
            .iter()
            .all(|e| e.node_name.as_deref() == Some(HOME))
    );
    assert_eq!(s.address_type, "IPv4");
    assert_eq!(
        json_of(&s.ports),
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
    );
}

#[test]
fn forge_copies_conditions_and_hostname_and_prefixes_target_kind() {
    let s = forge(&local(), &reflected()).unwrap();
    let e = &s.endpoints[0];
    assert_eq!(
        json_of(&e.conditions),
        json!({"ready": true, "serving": true, "terminating": false})
    );
    assert_eq!(e.hostname.as_deref(), Some("web-0"));
    let r = e.target_ref.as_ref().unwrap();
    assert_eq!(r.kind.as_deref(), Some("RemotePod"));
    assert_eq!(r.name.as_deref(), Some("web-0"));
    assert_eq!(r.namespace.as_deref(), Some("demo"));
    assert_eq!(json_of(&s.endpoints[1].conditions), json!({"ready": false}));
    assert_eq!(s.endpoints[1].hostname, None);
    assert_eq!(s.endpoints[2].target_ref, None);
}

#[test]
fn forge_labels_the_copy_as_liqos() {
    let s = forge(&local(), &reflected()).unwrap();
    assert_copy_meta(&s.metadata, "web-abc12");
    assert_eq!(
        json_of(&s.metadata.labels),
        ours_labels(json!({"kubernetes.io/service-name": "web",
                           MANAGED_BY: "endpointslice.reflection.liqo.io"}))
    );
    assert_eq!(endpointslice::service_of(&s), Some("web"));
    assert!(endpointslice::is_reflected_slice(&s));
    assert!(!endpointslice::is_reflected_slice(&local()));
}

#[test]
fn missing_address_mapping_is_refused_naming_the_address() {
    let l = local_with(json!([
        {"addresses": ["10.200.1.5"], "nodeName": NODE},
        {"addresses": ["10.244.0.9", "10.244.0.77"], "nodeName": "rome-worker"}
    ]));
    let e = forge(&l, &reflected()).unwrap_err();
    assert_eq!(e.field, "endpoints[1].addresses[1]");
    assert!(e.problem.contains("10.244.0.77"), "{}", e.problem);
    let ids = ids();
    match decide(Some(&l), None, &ids.ctx(), &reflected()) {
        Action::Warn { reason, field, .. } => {
            assert_eq!(reason, REASON_REFUSED);
            assert_eq!(field.unwrap().field, "endpoints[1].addresses[1]");
        }
        other => panic!("expected Warn, got {other:?}"),
    }
}

#[test]
fn slice_with_only_provider_endpoints_keeps_an_empty_copy() {
    let l = local_with(json!([{"addresses": ["10.200.1.5"], "nodeName": NODE}]));
    let ids = ids();
    assert!(endpointslice::addresses(&l, &ids.ctx()).is_empty());
    let s = created(decide(
        Some(&l),
        None,
        &ids.ctx(),
        &slice_inputs(ServiceState::Reflected, &[]),
    ));
    assert!(s.endpoints.is_empty());
}

#[test]
fn the_providers_own_slice_of_our_service_copy_is_never_deleted() {
    // Its controller copied our Service copy's labels (the reflection labels among them).
    let mut native = our_copy();
    native.metadata.name = Some("web-xk2p9".into());
    native.metadata.annotations = None;
    native
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(MANAGED_BY.into(), "endpointslice-controller.k8s.io".into());
    let ids = ids();
    assert_eq!(
        decide(None, Some(&native), &ids.ctx(), &reflected()),
        Action::Nothing
    );
    // Our copy without its source is deleted.
    assert!(matches!(
        decide(None, Some(&our_copy()), &ids.ctx(), &reflected()),
        Action::Delete { .. }
    ));
}

#[test]
fn service_reflected_creates_then_nothing_then_applies_on_change() {
    let ids = ids();
    let ctx = ids.ctx();
    let s = created(decide(Some(&local()), None, &ctx, &reflected()));
    assert_eq!(s.endpoints.len(), 3);
    assert_eq!(
        decide(Some(&local()), Some(&our_copy()), &ctx, &reflected()),
        Action::Nothing
    );
    // The IPAM's answer for an address changed: the copy follows.
    let moved = slice_inputs(
        ServiceState::Reflected,
        &[MAPPED[0], ("10.244.0.9", "10.71.0.99"), MAPPED[2]],
    );
    let s = applied(decide(Some(&local()), Some(&our_copy()), &ctx, &moved));
    assert_eq!(s.endpoints[0].addresses, ["10.71.0.99"]);
}

#[test]
fn service_pending_waits() {
    let ids = ids();
    let pending = slice_inputs(ServiceState::Pending, &MAPPED);
    for remote in [None, Some(our_copy())] {
        let a = decide(Some(&local()), remote.as_ref(), &ids.ctx(), &pending);
        assert!(matches!(a, Action::Wait(_)), "{a:?}");
    }
}

#[test]
fn service_not_reflected_deletes_our_copy_or_does_nothing() {
    let ids = ids();
    let not = slice_inputs(ServiceState::NotReflected, &MAPPED);
    assert_eq!(
        decide(Some(&local()), Some(&our_copy()), &ids.ctx(), &not),
        Action::Delete {
            name: "web-abc12".into(),
            uid: "u-remote".into()
        }
    );
    assert_eq!(
        decide(Some(&local()), None, &ids.ctx(), &not),
        Action::Nothing
    );
    assert_eq!(ServiceState::default(), ServiceState::NotReflected);
}

#[test]
fn a_reflected_slice_is_never_reflected_back() {
    let ids = ids();
    let mut l = local();
    l.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(MANAGED_BY.into(), "endpointslice.reflection.liqo.io".into());
    assert!(matches!(
        EndpointSlice::skip(&l, &ids.ctx(), &reflected()),
        Some(Skip::Excluded(_))
    ));
    assert_eq!(
        decide(Some(&l), None, &ids.ctx(), &reflected()),
        Action::Nothing
    );
}

#[test]
fn ipv6_and_fqdn_slices_are_excluded() {
    let ids = ids();
    for t in ["IPv6", "FQDN"] {
        let mut l = local();
        l.address_type = t.into();
        assert!(
            matches!(
                EndpointSlice::skip(&l, &ids.ctx(), &reflected()),
                Some(Skip::Excluded(_))
            ),
            "{t}"
        );
        assert_eq!(
            decide(Some(&l), None, &ids.ctx(), &reflected()),
            Action::Nothing,
            "{t}"
        );
    }
}

#[test]
fn slice_without_service_name_is_excluded() {
    let ids = ids();
    let mut l = local();
    l.metadata
        .labels
        .as_mut()
        .unwrap()
        .remove("kubernetes.io/service-name");
    assert_eq!(endpointslice::service_of(&l), None);
    assert!(matches!(
        EndpointSlice::skip(&l, &ids.ctx(), &reflected()),
        Some(Skip::Excluded(_))
    ));
}

#[test]
fn a_native_slice_is_not_skipped() {
    let ids = ids();
    assert_eq!(
        EndpointSlice::skip(&local(), &ids.ctx(), &reflected()),
        None
    );
}

#[test]
fn the_copy_records_its_mapped_addresses_for_their_release() {
    let ids = ids();
    let inputs = slice_inputs(ServiceState::Reflected, &MAPPED);
    let copy = EndpointSlice::forge(&local(), &ids.ctx(), &inputs).unwrap();
    let recorded = endpointslice::recorded(&copy).unwrap();
    let want: std::collections::BTreeMap<String, String> =
        endpointslice::addresses(&local(), &ids.ctx())
            .into_iter()
            .map(|a| {
                let m = MAPPED.iter().find(|(l, _)| *l == a).unwrap().1;
                (a, m.to_owned())
            })
            .collect();
    assert_eq!(recorded, want);
    assert!(
        endpointslice::recorded(&local()).unwrap().is_empty(),
        "a local slice records nothing"
    );
    let mut bad = copy;
    bad.metadata.annotations.as_mut().unwrap().insert(
        "reflection.liqo.io/endpoint-addresses".into(),
        "[oops".into(),
    );
    let e = endpointslice::recorded(&bad).unwrap_err();
    assert_eq!(
        e.field,
        "metadata.annotations[reflection.liqo.io/endpoint-addresses]"
    );
}

#[test]
fn a_slices_service_state_follows_its_copy() {
    use k8s_openapi::api::core::v1::Service;
    let ids = ids();
    let ctx = ids.ctx();
    let svc = |annotations: Value| -> Service {
        obj(
            json!({"metadata": {"name": "web", "namespace": "demo", "uid": "u-svc",
            "annotations": annotations}, "spec": {"ports": [{"port": 80}]}}),
        )
    };
    let copy: Service = obj(json!({"metadata": {"name": "web", "namespace": "demo-rome",
        "labels": ours_labels(json!({}))}}));
    let theirs: Service = obj(json!({"metadata": {"name": "web", "namespace": "demo-rome"}}));
    let state = |l: Option<&Service>, r: Option<&Service>, listed| {
        endpointslice::service_state(l, r, &ctx, listed)
    };
    let plain = svc(json!({}));
    assert_eq!(
        state(Some(&plain), Some(&copy), false),
        ServiceState::Pending
    );
    assert_eq!(
        state(Some(&plain), Some(&copy), true),
        ServiceState::Reflected
    );
    assert_eq!(state(Some(&plain), None, true), ServiceState::Pending);
    assert_eq!(
        state(Some(&plain), Some(&theirs), true),
        ServiceState::NotReflected
    );
    assert_eq!(state(None, Some(&copy), true), ServiceState::NotReflected);
    let out = svc(json!({"liqo.io/skip-reflection": "true"}));
    assert_eq!(
        state(Some(&out), Some(&copy), true),
        ServiceState::NotReflected
    );
    // Refused as it is: its copy keeps serving and its slices keep following the pods.
    let bad = svc(json!({"liqo.io/skip-reflection": "maybe"}));
    assert_eq!(
        state(Some(&bad), Some(&copy), true),
        ServiceState::Reflected
    );
    assert_eq!(state(Some(&bad), None, true), ServiceState::NotReflected);
}
