//! The pod mutation against the seed's three examples, merges, idempotence and the JSON patch.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::{review::*, *};
use crate::api::offloading::NamespaceOffloadingSpec;

/// The seed's fixed ClusterSelector (seed `000`, verbatim).
const SEED_SELECTOR: &str = "
nodeSelectorTerms:
- matchExpressions:
  - key: liqo.io/region
    operator: In
    values:
    - us-west-1
";

/// The seed's LocalAndRemote terms (verbatim).
const SEED_LOCAL_AND_REMOTE: &str = "
nodeSelectorTerms:
  - matchExpressions:
    - key: liqo.io/region
      operator: In
      values:
      - us-west-1
  - matchExpressions:
    - key: liqo.io/type
      operator: NotIn
      values:
      - virtual-node
";

/// The seed's Remote terms (verbatim).
const SEED_REMOTE: &str = "
nodeSelectorTerms:
  - matchExpressions:
    - key: liqo.io/region
      operator: In
      values:
      - us-west-1
    - key: liqo.io/type
      operator: In
      values:
      - virtual-node
";

fn yaml(s: &str) -> NodeSelector {
    serde_saphyr::from_str(s).unwrap()
}

fn spec(strategy: PodOffloadingStrategy, selector: Option<&str>) -> NamespaceOffloadingSpec {
    NamespaceOffloadingSpec {
        namespace_mapping_strategy: NamespaceMappingStrategy::EnforceSameName,
        pod_offloading_strategy: strategy,
        cluster_selector: selector.map(yaml),
    }
}

fn pod_spec(v: serde_json::Value) -> PodSpec {
    serde_json::from_value(v).unwrap()
}

fn required(p: &PodSpec) -> Option<&NodeSelector> {
    p.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()
}

fn liqo_tolerations(p: &PodSpec) -> usize {
    p.tolerations
        .iter()
        .flatten()
        .filter(|t| **t == toleration())
        .count()
}

#[test]
fn toleration_is_upstreams() {
    assert_eq!(
        serde_json::to_value(toleration()).unwrap(),
        json!({"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists", "effect": "NoExecute"})
    );
}

#[test]
fn the_seeds_three_examples() {
    let bare = PodSpec::default();

    let lar = mutate(
        &spec(PodOffloadingStrategy::LocalAndRemote, Some(SEED_SELECTOR)),
        &bare,
    );
    assert_eq!(required(&lar), Some(&yaml(SEED_LOCAL_AND_REMOTE)));
    assert_eq!(lar.tolerations, Some(vec![toleration()]));

    let local = mutate(
        &spec(PodOffloadingStrategy::Local, Some(SEED_SELECTOR)),
        &bare,
    );
    assert_eq!(local, bare, "Local: neither toleration nor selector");

    let remote = mutate(
        &spec(PodOffloadingStrategy::Remote, Some(SEED_SELECTOR)),
        &bare,
    );
    assert_eq!(required(&remote), Some(&yaml(SEED_REMOTE)));
    assert_eq!(remote.tolerations, Some(vec![toleration()]));
}

#[test]
fn local_and_remote_without_selector_only_tolerates() {
    for sel in [None, Some("nodeSelectorTerms: []")] {
        let s = spec(PodOffloadingStrategy::LocalAndRemote, sel);
        assert_eq!(imposed(&s), None);
        let p = mutate(&s, &PodSpec::default());
        assert_eq!(p.affinity, None);
        assert_eq!(p.tolerations, Some(vec![toleration()]));
    }
}

#[test]
fn remote_without_selector_requires_a_virtual_node() {
    let got = imposed(&spec(PodOffloadingStrategy::Remote, None)).unwrap();
    assert_eq!(
        got,
        yaml(
            "nodeSelectorTerms: [{matchExpressions: [{key: liqo.io/type, operator: In, values: [virtual-node]}]}]"
        )
    );
}

#[test]
fn a_pods_own_terms_give_the_cartesian_product() {
    // liqo-internals §4 item 3: pod terms [{storage Exists}, {provider In [AWS]}] in a
    // Remote namespace give two terms, each with the imposed requirements appended.
    let pod = pod_spec(json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "storage", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "provider", "operator": "In", "values": ["AWS"]}]},
        ]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference":
            {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}],
    }}, "nodeSelector": {"zone": "a"}}));
    let got = mutate(
        &spec(PodOffloadingStrategy::Remote, Some(SEED_SELECTOR)),
        &pod,
    );
    let region = json!({"key": "liqo.io/region", "operator": "In", "values": ["us-west-1"]});
    let virt = json!({"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]});
    assert_eq!(
        serde_json::to_value(required(&got)).unwrap(),
        json!({"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "storage", "operator": "Exists"}, region, virt]},
            {"matchExpressions": [{"key": "provider", "operator": "In", "values": ["AWS"]}, region, virt]},
        ]})
    );
    let na = |p: &PodSpec| p.affinity.clone().unwrap().node_affinity.unwrap();
    assert_eq!(
        na(&got).preferred_during_scheduling_ignored_during_execution,
        na(&pod).preferred_during_scheduling_ignored_during_execution,
        "preferred affinity untouched"
    );
    assert_eq!(
        got.node_selector, pod.node_selector,
        "nodeSelector untouched"
    );
}

#[test]
fn a_daemonset_pod_keeps_its_match_fields() {
    let pod = pod_spec(json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["kind-worker"]}]},
        ]},
    }}}));
    let got = mutate(
        &spec(PodOffloadingStrategy::LocalAndRemote, Some(SEED_SELECTOR)),
        &pod,
    );
    let terms = &required(&got).unwrap().node_selector_terms;
    assert_eq!(terms.len(), 2);
    for t in terms {
        assert_eq!(
            serde_json::to_value(&t.match_fields).unwrap(),
            json!([{"key": "metadata.name", "operator": "In", "values": ["kind-worker"]}])
        );
    }
    let node = |labels: &[(&str, &str)], name: &str| {
        let l: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        selector::selector_matches(required(&got), &l, name).unwrap()
    };
    assert!(node(&[], "kind-worker"), "its local node");
    assert!(!node(&[], "kind-control-plane"), "still pinned");
}

#[test]
fn mutating_twice_is_mutating_once() {
    let pods = [
        PodSpec::default(),
        pod_spec(json!({"tolerations": [{"key": "x", "operator": "Exists"}]})),
        pod_spec(json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},
        ]}}}})),
    ];
    for strategy in [
        PodOffloadingStrategy::LocalAndRemote,
        PodOffloadingStrategy::Remote,
        PodOffloadingStrategy::Local,
    ] {
        for sel in [None, Some(SEED_SELECTOR)] {
            let s = spec(strategy, sel);
            for pod in &pods {
                let once = mutate(&s, pod);
                assert_eq!(mutate(&s, &once), once, "{strategy:?} {sel:?} {pod:?}");
                let want = usize::from(strategy != PodOffloadingStrategy::Local);
                assert_eq!(liqo_tolerations(&once), want);
                assert!(pod_patch(&once, &mutate(&s, &once)).is_empty());
            }
        }
    }
}

#[test]
fn the_patch_touches_only_tolerations_and_affinity() {
    let s = spec(PodOffloadingStrategy::LocalAndRemote, Some(SEED_SELECTOR));
    let apply = |pod: serde_json::Value| {
        let mut doc = json!({"spec": pod.clone()});
        let before = pod_spec(pod);
        let ops = pod_patch(&before, &mutate(&s, &before));
        apply_patch(&mut doc, &ops);
        assert_eq!(pod_spec(doc["spec"].clone()), mutate(&s, &before));
        ops
    };
    // Bare: the two fields are added whole.
    let ops = apply(json!({"containers": [{"name": "c"}]}));
    let paths: Vec<_> = ops.iter().map(|o| o["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/spec/tolerations", "/spec/affinity"]);
    // Existing tolerations: appended; podAffinity kept, nodeAffinity added.
    let ops = apply(json!({
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
        "affinity": {"podAffinity": {}},
    }));
    let paths: Vec<_> = ops.iter().map(|o| o["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        ["/spec/tolerations/-", "/spec/affinity/nodeAffinity"]
    );
    // Existing node affinity: only the required selector is rewritten.
    let ops = apply(
        json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}}),
    );
    assert_eq!(
        ops[1]["path"],
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
    );
}

/// Applies `add` operations (the only kind [`pod_patch`] emits) as RFC 6902 does.
fn apply_patch(doc: &mut serde_json::Value, ops: &[serde_json::Value]) {
    for op in ops {
        assert_eq!(op["op"], "add");
        let path = op["path"].as_str().unwrap();
        let (parent, last) = path.rsplit_once('/').unwrap();
        let target = doc.pointer_mut(parent).unwrap();
        match (target, last) {
            (serde_json::Value::Array(a), "-") => a.push(op["value"].clone()),
            (serde_json::Value::Object(o), key) => {
                o.insert(key.to_owned(), op["value"].clone());
            }
            (t, _) => panic!("cannot add {path} to {t}"),
        }
    }
}

#[test]
fn pod_review_answers_a_patch_or_refuses() {
    let req: AdmissionRequest = serde_json::from_value(json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "operation": "CREATE",
        "namespace": "liqo-demo",
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nginx"},
                   "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}},
    }))
    .unwrap();
    let nsoff = NamespaceOffloading::new(
        api::NAME,
        spec(PodOffloadingStrategy::Remote, Some(SEED_SELECTOR)),
    );
    let review = mutate_pod(&req, Some(&nsoff));
    let resp = review.response.clone().unwrap();
    let patch = base64::engine::general_purpose::STANDARD
        .decode(resp.patch.unwrap())
        .unwrap();
    let ops: Vec<serde_json::Value> = serde_json::from_slice(&patch).unwrap();
    insta::assert_json_snapshot!("pod_review_remote", json!({"review": review, "patch": ops}));
    let mut pod = req.object.clone().unwrap();
    apply_patch(&mut pod, &ops);
    let pod: Pod = serde_json::from_value(pod).unwrap();
    assert_eq!(
        required(pod.spec.as_ref().unwrap()),
        Some(&yaml(SEED_REMOTE))
    );

    let refused = mutate_pod(&req, None).response.unwrap();
    assert!(!refused.allowed);
    assert_eq!(
        refused.status,
        Some(ResponseStatus {
            code: 500,
            reason: None,
            message: "failed retrieving NamespaceOffloading: namespace \"liqo-demo\" is labelled \
                      liqo.io/scheduling-enabled=true but has no NamespaceOffloading \"offloading\""
                .to_owned(),
        })
    );
    let mut garbled = req.clone();
    garbled.object = Some(json!({"spec": {"containers": "nope"}}));
    let bad = mutate_pod(&garbled, Some(&nsoff)).response.unwrap();
    assert_eq!(bad.status.unwrap().code, 400);
}

mod validation;
