//! The NamespaceOffloading validation and its review.

use serde_json::json;

use super::*;

fn local() -> ClusterIdentity {
    serde_json::from_value(json!({
        "clusterID": "b07938e3-d241-460c-a77b-e286c0f733c7",
        "clusterName": "rome",
    }))
    .unwrap()
}

fn nsoff(name: &str, ns: &str, spec: NamespaceOffloadingSpec) -> NamespaceOffloading {
    let mut o = NamespaceOffloading::new(name, spec);
    o.metadata.namespace = Some(ns.to_owned());
    o
}

fn deny(v: Verdict) -> String {
    match v {
        Verdict::Deny { message } => message,
        other => panic!("allowed: {other:?}"),
    }
}

#[test]
fn validation_denies_with_upstreams_texts() {
    let lar = spec(PodOffloadingStrategy::LocalAndRemote, None);
    let other = nsoff("other", "demo", lar.clone());
    assert_eq!(
        deny(validate(Operation::Create, &other, None, &local())),
        "NamespaceOffloading name must match offloading"
    );
    let old = nsoff(api::NAME, "demo", lar.clone());
    let mut new = old.clone();
    new.spec.namespace_mapping_strategy = NamespaceMappingStrategy::DefaultName;
    assert_eq!(
        deny(validate(Operation::Update, &new, Some(&old), &local())),
        "The NamespaceMappingStrategy value cannot be modified after creation"
    );
    let ok = validate(Operation::Create, &old, None, &local());
    assert_eq!(ok, Verdict::Allow { warnings: vec![] });
}

#[test]
fn validation_warns_when_the_pod_strategy_tightens() {
    let old = nsoff(
        api::NAME,
        "demo",
        spec(PodOffloadingStrategy::LocalAndRemote, None),
    );
    for (to, warned) in [
        (PodOffloadingStrategy::Remote, true),
        (PodOffloadingStrategy::Local, true),
        (PodOffloadingStrategy::LocalAndRemote, false),
    ] {
        let mut new = old.clone();
        new.spec.pod_offloading_strategy = to;
        new.spec.cluster_selector = Some(yaml(SEED_SELECTOR));
        let want: Vec<String> = if warned {
            vec![
                "The PodOffloadingStrategy was mutated to a more restrictive setting: existing \
                 pods violating this policy might still be running"
                    .to_owned(),
            ]
        } else {
            vec![]
        };
        let got = validate(Operation::Update, &new, Some(&old), &local());
        assert_eq!(got, Verdict::Allow { warnings: want }, "{to:?}");
    }
    // Remote back to LocalAndRemote loosens: no warning.
    let mut remote = old.clone();
    remote.spec.pod_offloading_strategy = PodOffloadingStrategy::Remote;
    let got = validate(Operation::Update, &old, Some(&remote), &local());
    assert_eq!(got, Verdict::Allow { warnings: vec![] });
}

#[test]
fn validation_denies_an_invalid_selector_naming_the_path() {
    let bad = "nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Exists}]}, \
               {matchExpressions: [{key: topology.liqo.io/region, operator: In}]}]";
    let o = nsoff(
        api::NAME,
        "demo",
        spec(PodOffloadingStrategy::Remote, Some(bad)),
    );
    assert_eq!(
        deny(validate(Operation::Create, &o, None, &local())),
        "invalid clusterSelector: spec.clusterSelector.nodeSelectorTerms[1].matchExpressions[0]\
         .values: must be specified when operator is In"
    );
}

#[test]
fn validation_denies_a_default_name_too_long() {
    let ns = "a".repeat(55);
    let mut s = spec(PodOffloadingStrategy::LocalAndRemote, None);
    s.namespace_mapping_strategy = NamespaceMappingStrategy::DefaultName;
    let o = nsoff(api::NAME, &ns, s.clone());
    let msg = deny(validate(Operation::Create, &o, None, &local()));
    assert!(msg.starts_with("namespaceMappingStrategy DefaultName names the remote namespace \""));
    assert!(msg.contains("is 67 characters long (at most 63)"), "{msg}");
    assert!(
        msg.ends_with("use EnforceSameName or a shorter namespace name"),
        "{msg}"
    );
    // Short enough, or EnforceSameName: allowed.
    let short = nsoff(api::NAME, "demo", s.clone());
    assert!(matches!(
        validate(Operation::Create, &short, None, &local()),
        Verdict::Allow { .. }
    ));
    let mut same = o.clone();
    same.spec.namespace_mapping_strategy = NamespaceMappingStrategy::EnforceSameName;
    assert!(matches!(
        validate(Operation::Create, &same, None, &local()),
        Verdict::Allow { .. }
    ));
}

#[test]
fn an_update_leaving_the_spec_is_always_allowed() {
    // Admitted while the webhook was down (failurePolicy Ignore): its finalizer must still go.
    let bad = "nodeSelectorTerms: [{matchExpressions: [{key: a, operator: In}]}]";
    let old = nsoff(
        api::NAME,
        "demo",
        spec(PodOffloadingStrategy::Remote, Some(bad)),
    );
    let mut new = old.clone();
    new.metadata.finalizers = Some(vec![]);
    let got = validate(Operation::Update, &new, Some(&old), &local());
    assert_eq!(got, Verdict::Allow { warnings: vec![] });
}

#[test]
fn nsoff_review_fills_the_namespace_and_carries_warnings() {
    let object = |strategy: &str| {
        json!({
            "apiVersion": "offloading.liqo.io/v1alpha1", "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": strategy},
        })
    };
    let req: AdmissionRequest = serde_json::from_value(json!({
        "uid": "u1", "operation": "UPDATE", "namespace": "a".repeat(60),
        "object": object("Remote"), "oldObject": object("LocalAndRemote"),
    }))
    .unwrap();
    let review = validate_nsoff(&req, &local());
    insta::assert_json_snapshot!("nsoff_review_warning", review);
    // The same object created in that namespace: the remote name is too long.
    let mut create = req.clone();
    create.operation = Operation::Create;
    create.old_object = None;
    let resp = validate_nsoff(&create, &local()).response.unwrap();
    assert!(!resp.allowed);
    let status = resp.status.unwrap();
    assert_eq!(
        (status.code, status.reason.as_deref()),
        (403, Some("Forbidden"))
    );
    assert!(
        status.message.contains("characters long"),
        "{}",
        status.message
    );
    let mut delete = create.clone();
    delete.operation = Operation::Delete;
    delete.object = None;
    assert!(validate_nsoff(&delete, &local()).response.unwrap().allowed);
}

#[test]
fn decode_refuses_what_is_not_a_review() {
    assert!(matches!(decode(b"{"), Err(ReviewError::NotAReview(_))));
    let no_request = br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}"#;
    assert!(matches!(decode(no_request), Err(ReviewError::NoRequest)));
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "CREATE", "namespace": "n", "object": {},
        "kind": {"group": "", "version": "v1", "kind": "Pod"}, "dryRun": false}});
    let req = decode(&serde_json::to_vec(&body).unwrap()).unwrap();
    assert_eq!((req.uid.as_str(), req.operation), ("u", Operation::Create));
}
