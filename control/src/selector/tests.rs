//! The selector semantics, validation, kubectl parsing and merge, against hand-checked cases.

use serde_json::json;

use super::*;

fn sel(v: serde_json::Value) -> NodeSelector {
    serde_json::from_value(v).unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn expr(key: &str, op: &str, values: &[&str]) -> serde_json::Value {
    if values.is_empty() {
        json!({"key": key, "operator": op})
    } else {
        json!({"key": key, "operator": op, "values": values})
    }
}

fn one(e: serde_json::Value) -> NodeSelector {
    sel(json!({"nodeSelectorTerms": [{"matchExpressions": [e]}]}))
}

#[test]
fn no_selector_or_no_terms_matches_everything() {
    let l = labels(&[]);
    assert!(selector_matches(None, &l, "n").unwrap());
    assert!(selector_matches(Some(&sel(json!({"nodeSelectorTerms": []}))), &l, "n").unwrap());
}

#[test]
fn an_empty_term_matches_nothing() {
    let s = sel(json!({"nodeSelectorTerms": [{}]}));
    assert!(!selector_matches(Some(&s), &labels(&[("a", "b")]), "n").unwrap());
}

#[test]
fn operators() {
    let l = labels(&[("region", "south"), ("cpus", "8"), ("odd", "x")]);
    let m = |e| selector_matches(Some(&one(e)), &l, "node-1").unwrap();
    assert!(m(expr("region", "In", &["north", "south"])));
    assert!(!m(expr("region", "In", &["north"])));
    assert!(!m(expr("absent", "In", &["x"])));
    assert!(m(expr("region", "NotIn", &["north"])));
    assert!(!m(expr("region", "NotIn", &["south"])));
    assert!(
        m(expr("absent", "NotIn", &["x"])),
        "NotIn matches an absent key"
    );
    assert!(m(expr("region", "Exists", &[])));
    assert!(!m(expr("absent", "Exists", &[])));
    assert!(m(expr("absent", "DoesNotExist", &[])));
    assert!(!m(expr("region", "DoesNotExist", &[])));
    assert!(m(expr("cpus", "Gt", &["4"])));
    assert!(!m(expr("cpus", "Gt", &["8"])));
    assert!(m(expr("cpus", "Lt", &["9"])));
    assert!(!m(expr("cpus", "Lt", &["8"])));
    assert!(
        !m(expr("odd", "Gt", &["1"])),
        "a non-integer label never compares"
    );
    assert!(!m(expr("absent", "Lt", &["1"])));
}

#[test]
fn terms_are_ored_and_requirements_anded() {
    let s = sel(json!({"nodeSelectorTerms": [
        {"matchExpressions": [expr("a", "In", &["1"]), expr("b", "In", &["2"])]},
        {"matchExpressions": [expr("c", "Exists", &[])]},
    ]}));
    let m = |l: &[(&str, &str)]| selector_matches(Some(&s), &labels(l), "n").unwrap();
    assert!(m(&[("a", "1"), ("b", "2")]));
    assert!(!m(&[("a", "1")]), "expressions of a term are ANDed");
    assert!(m(&[("c", "")]), "terms are ORed");
    assert!(!m(&[]));
}

#[test]
fn match_fields_name_the_node() {
    let s = sel(json!({"nodeSelectorTerms": [{
        "matchExpressions": [expr("a", "Exists", &[])],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["kind-1"]}],
    }]}));
    let l = labels(&[("a", "x")]);
    assert!(selector_matches(Some(&s), &l, "kind-1").unwrap());
    assert!(!selector_matches(Some(&s), &l, "kind-2").unwrap());
    assert!(!selector_matches(Some(&s), &labels(&[]), "kind-1").unwrap());
    let not = sel(json!({"nodeSelectorTerms": [{
        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["kind-1"]}],
    }]}));
    assert!(selector_matches(Some(&not), &l, "kind-2").unwrap());
    assert!(!selector_matches(Some(&not), &l, "kind-1").unwrap());
}

#[test]
fn validation_names_the_path() {
    let s = sel(json!({"nodeSelectorTerms": [
        {"matchExpressions": [expr("a", "Exists", &[])]},
        {"matchExpressions": [expr("liqo.io/region", "In", &[])]},
    ]}));
    let err = validate(&s).unwrap_err();
    assert_eq!(
        err.to_string(),
        "nodeSelectorTerms[1].matchExpressions[0].values: must be specified when operator is In"
    );
    assert_eq!(
        err.clone().under("spec.clusterSelector.").to_string(),
        "spec.clusterSelector.nodeSelectorTerms[1].matchExpressions[0].values: must be specified \
         when operator is In"
    );
    // The same error from matching, whatever the node.
    assert_eq!(
        selector_matches(Some(&s), &labels(&[("a", "")]), "n").unwrap_err(),
        err
    );
    let cases = [
        (
            expr("a", "Exists", &["x"]),
            "[0].values: may not be specified when operator is Exists",
        ),
        (
            expr("a", "Gt", &["1", "2"]),
            "[0].values: must have one element when operator is Gt",
        ),
        (
            expr("a", "Lt", &["x"]),
            "[0].values[0]: \"x\" must be an integer",
        ),
        (
            expr("a", "Near", &["x"]),
            "[0].operator: \"Near\" is not one of",
        ),
        (
            expr("bad key", "Exists", &[]),
            "[0].key: \"bad key\" is not a qualified name",
        ),
        (
            expr("a", "In", &["-x"]),
            "[0].values: \"-x\" is not a label value",
        ),
    ];
    for (e, want) in cases {
        let got = validate(&one(e)).unwrap_err().to_string();
        let want = format!("nodeSelectorTerms[0].matchExpressions{want}");
        assert!(
            got.starts_with(&want),
            "{got:?} does not start with {want:?}"
        );
    }
    let field = |f| sel(json!({"nodeSelectorTerms": [{"matchFields": [f]}]}));
    let got = validate(&field(expr("metadata.uid", "In", &["x"]))).unwrap_err();
    assert_eq!(
        got.to_string(),
        "nodeSelectorTerms[0].matchFields[0].key: \"metadata.uid\" is not \"metadata.name\""
    );
    let got = validate(&field(expr("metadata.name", "In", &["a", "b"]))).unwrap_err();
    assert_eq!(
        got.to_string(),
        "nodeSelectorTerms[0].matchFields[0].values: must have one element"
    );
    assert!(validate(&field(expr("metadata.name", "Exists", &[]))).is_err());
}

#[test]
fn parse_term_keeps_order_and_maps_operators() {
    let t = parse_term("a=b,c!=d,e in (x, y),f notin (z),g,!h,n>1,m<9,k==v").unwrap();
    let got = serde_json::to_value(&t).unwrap();
    assert_eq!(
        got,
        json!({"matchExpressions": [
            expr("a", "In", &["b"]),
            expr("c", "NotIn", &["d"]),
            expr("e", "In", &["x", "y"]),
            expr("f", "NotIn", &["z"]),
            expr("g", "Exists", &[]),
            expr("h", "DoesNotExist", &[]),
            expr("n", "Gt", &["1"]),
            expr("m", "Lt", &["9"]),
            expr("k", "In", &["v"]),
        ]})
    );
    let t = parse_term("topology.liqo.io/region=south").unwrap();
    assert_eq!(
        serde_json::to_value(&t).unwrap(),
        json!({"matchExpressions": [expr("topology.liqo.io/region", "In", &["south"])]})
    );
    validate(&NodeSelector {
        node_selector_terms: vec![t],
    })
    .unwrap();
}

#[test]
fn parse_term_names_the_bad_part() {
    let cases = [
        ("", "bad selector \"\": \"\" is empty"),
        (
            "a=b,,c",
            "bad selector \"a=b,,c\": \"\" is an empty requirement",
        ),
        (
            "a=b,e in (x",
            "bad selector \"a=b,e in (x\": \"a=b,e in (x\" has an unclosed '('",
        ),
        (
            "e in ()",
            "bad selector \"e in ()\": \"e in ()\" has no values: in needs",
        ),
        (
            "e within (x)",
            "\"e within (x)\" is not `<key> in (<values>)`",
        ),
        ("a=b,c d", "\"c d\" is not a requirement"),
        (
            "a=-x",
            "\"a=-x\" has value \"-x\", which is not a label value",
        ),
        (
            "bad key=x",
            "\"bad key=x\" has key \"bad key\", which is not a qualified name",
        ),
        (
            "n>x",
            "\"n>x\" compares with \"x\", which is not an integer",
        ),
        ("!a=b", "\"!a=b\" mixes '!' with an operator"),
        ("e in (x) y", "\"e in (x) y\" has text after ')'"),
    ];
    for (input, want) in cases {
        let got = parse_term(input).unwrap_err().to_string();
        assert!(got.contains(want), "{input:?}: {got:?} lacks {want:?}");
    }
}

fn names(s: &NodeSelector) -> serde_json::Value {
    serde_json::to_value(s).unwrap()
}

#[test]
fn merge_is_the_cartesian_product_pod_first() {
    let pod = sel(json!({"nodeSelectorTerms": [
        {"matchExpressions": [expr("storage", "Exists", &[])]},
        {"matchExpressions": [expr("provider", "In", &["AWS"])]},
    ]}));
    let imposed = sel(json!({"nodeSelectorTerms": [
        {"matchExpressions": [expr("liqo.io/region", "In", &["us-west-1"])]},
        {"matchExpressions": [expr("liqo.io/type", "NotIn", &["virtual-node"])]},
    ]}));
    let got = merge(&pod, &imposed);
    assert_eq!(
        names(&got),
        json!({"nodeSelectorTerms": [
            {"matchExpressions": [expr("storage", "Exists", &[]), expr("liqo.io/region", "In", &["us-west-1"])]},
            {"matchExpressions": [expr("storage", "Exists", &[]), expr("liqo.io/type", "NotIn", &["virtual-node"])]},
            {"matchExpressions": [expr("provider", "In", &["AWS"]), expr("liqo.io/region", "In", &["us-west-1"])]},
            {"matchExpressions": [expr("provider", "In", &["AWS"]), expr("liqo.io/type", "NotIn", &["virtual-node"])]},
        ]})
    );
}

#[test]
fn merge_keeps_match_fields() {
    // A DaemonSet pod is pinned to its node by matchFields; upstream dropped it.
    let pod = sel(json!({"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["kind-worker"]},
    ]}]}));
    let imposed = one(expr("liqo.io/type", "NotIn", &["virtual-node"]));
    let got = merge(&pod, &imposed);
    assert_eq!(
        names(&got),
        json!({"nodeSelectorTerms": [{
            "matchExpressions": [expr("liqo.io/type", "NotIn", &["virtual-node"])],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["kind-worker"]}],
        }]})
    );
    let l = labels(&[]);
    assert!(selector_matches(Some(&got), &l, "kind-worker").unwrap());
    assert!(!selector_matches(Some(&got), &l, "other").unwrap());
}

#[test]
fn merge_with_an_empty_side_is_the_other() {
    let empty = sel(json!({"nodeSelectorTerms": []}));
    let s = one(expr("a", "Exists", &[]));
    assert_eq!(merge(&empty, &s), s);
    assert_eq!(merge(&s, &empty), s);
}

#[test]
fn merged_matches_exactly_both() {
    let pod = sel(json!({"nodeSelectorTerms": [
        {"matchExpressions": [expr("a", "In", &["1"])]},
        {"matchExpressions": [expr("b", "In", &["1"])]},
    ]}));
    let imposed = sel(json!({"nodeSelectorTerms": [
        {"matchExpressions": [expr("c", "In", &["1"])]},
        {"matchExpressions": [expr("d", "DoesNotExist", &[])]},
    ]}));
    let merged = merge(&pod, &imposed);
    let keys = ["a", "b", "c", "d"];
    for bits in 0u8..16 {
        let l: BTreeMap<String, String> = keys
            .iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .map(|(_, k)| (k.to_string(), "1".to_string()))
            .collect();
        let both = selector_matches(Some(&pod), &l, "n").unwrap()
            && selector_matches(Some(&imposed), &l, "n").unwrap();
        assert_eq!(
            selector_matches(Some(&merged), &l, "n").unwrap(),
            both,
            "{l:?}"
        );
    }
}

#[test]
fn label_lists_parse_and_bad_entries_are_named() {
    let l = parse_labels("topology.liqo.io/region=south, tier=gold,").unwrap();
    assert_eq!(l.len(), 2);
    assert_eq!(l["topology.liqo.io/region"], "south");
    assert_eq!(l["tier"], "gold");
    assert!(parse_labels("").unwrap().is_empty());
    let e = parse_labels("a=1,oops").unwrap_err().to_string();
    assert!(e.contains("\"oops\" is not key=value"), "{e}");
    let e = parse_labels("bad key=1").unwrap_err().to_string();
    assert!(e.contains("key \"bad key\""), "{e}");
    let e = parse_labels("k=-x").unwrap_err().to_string();
    assert!(e.contains("value \"-x\""), "{e}");
    let e = parse_labels("k=1,k=2").unwrap_err().to_string();
    assert!(e.contains("\"k\" is given twice"), "{e}");
}
