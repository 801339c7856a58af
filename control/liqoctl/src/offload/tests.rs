use std::collections::BTreeMap;

use control::{
    api::offloading::{
        NamespaceMappingStrategy as M, NamespaceOffloadingStatus, OffloadingPhase as P,
        PodOffloadingStrategy as S, RemoteNamespaceCondition,
    },
    offloading::status::{
        CLUSTER_NOT_SELECTED, CLUSTER_SELECTED, CREATING, CREATION_LOOP_BACK_OFF,
        REMOTE_NAMESPACE_CREATED, Row,
    },
    selector::parse_term,
};
use k8s_openapi::jiff::Timestamp;

use super::decide::*;
use crate::cli::OutputFormat;

fn seed_object() -> NamespaceOffloading {
    namespace_offloading(
        "liqo-demo",
        M::EnforceSameName,
        S::LocalAndRemote,
        &[parse_term("topology.liqo.io/region=south").unwrap()],
    )
}

use control::api::offloading::NamespaceOffloading;

fn cond(row: Row, message: Option<&str>) -> RemoteNamespaceCondition {
    RemoteNamespaceCondition {
        type_: row.type_,
        status: row.status,
        last_transition_time: None,
        reason: Some(row.reason.to_owned()),
        message: Some(message.unwrap_or(row.message).to_owned()),
    }
}

/// The object at generation 2 with a status observed at `observed`.
fn with_status(
    phase: P,
    observed: i64,
    clusters: &[(&str, Vec<RemoteNamespaceCondition>)],
) -> NamespaceOffloading {
    let mut obj = seed_object();
    obj.metadata.generation = Some(2);
    obj.status = Some(NamespaceOffloadingStatus {
        remote_namespace_name: Some("liqo-demo".into()),
        offloading_phase: Some(phase),
        remote_namespaces_conditions: clusters
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
        observed_generation: Some(observed),
    });
    obj
}

#[test]
fn seed_flags_give_the_object_as_yaml() {
    let yaml = render(&seed_object(), OutputFormat::Yaml).unwrap();
    assert_eq!(
        yaml,
        "apiVersion: offloading.liqo.io/v1alpha1
kind: NamespaceOffloading
metadata:
  name: offloading
  namespace: liqo-demo
spec:
  namespaceMappingStrategy: EnforceSameName
  podOffloadingStrategy: LocalAndRemote
  clusterSelector:
    nodeSelectorTerms:
    - matchExpressions:
      - key: topology.liqo.io/region
        operator: In
        values:
        - south
"
    );
}

#[test]
fn defaults_give_an_empty_selector_as_json() {
    let obj = namespace_offloading("foo", M::default(), S::default(), &[]);
    let json = render(&obj, OutputFormat::Json).unwrap();
    assert_eq!(
        json,
        r#"{
  "apiVersion": "offloading.liqo.io/v1alpha1",
  "kind": "NamespaceOffloading",
  "metadata": {
    "name": "offloading",
    "namespace": "foo"
  },
  "spec": {
    "namespaceMappingStrategy": "DefaultName",
    "podOffloadingStrategy": "LocalAndRemote",
    "clusterSelector": {
      "nodeSelectorTerms": []
    }
  }
}
"#
    );
    // What is printed reads back as the object.
    let back: NamespaceOffloading = serde_json::from_str(&json).unwrap();
    assert_eq!(back, obj);
}

#[test]
fn repeated_selectors_are_ored_terms_in_order() {
    let terms = [
        parse_term("region in (europe,us-west), !staging").unwrap(),
        parse_term("!staging").unwrap(),
    ];
    let obj = namespace_offloading("foo", M::DefaultName, S::Remote, &terms);
    let sel = obj.spec.cluster_selector.unwrap();
    assert_eq!(sel.node_selector_terms.len(), 2);
    assert_eq!(sel.node_selector_terms[0], terms[0]);
    assert_eq!(
        describe_terms(&sel.node_selector_terms),
        "[region in (europe,us-west),!staging] OR [!staging]"
    );
    let one = [parse_term("a=b,c!=d,e notin (f,g),h,n>1").unwrap()];
    // One term reads back as itself.
    assert_eq!(describe_terms(&one), "a=b,c!=d,e notin (f,g),h,n>1");
    assert_eq!(parse_term(&describe_terms(&one)).unwrap(), one[0]);
    assert_eq!(describe_terms(&[]), "all clusters");
}

#[test]
fn ready_names_the_selected_clusters() {
    let obj = with_status(
        P::Ready,
        2,
        &[
            ("florence-539f8b", vec![cond(CLUSTER_NOT_SELECTED, None)]),
            (
                "naples-7881be",
                vec![
                    cond(CLUSTER_SELECTED, None),
                    cond(REMOTE_NAMESPACE_CREATED, None),
                ],
            ),
        ],
    );
    assert_eq!(
        progress("liqo-demo", &obj),
        Outcome::Done(
            "Namespace \"liqo-demo\" offloaded to naples-7881be (remote namespace \"liqo-demo\")"
                .into()
        )
    );
}

#[test]
fn a_stale_status_is_waited_for() {
    // Ready, but for generation 1: the change to generation 2 is not observed yet.
    let obj = with_status(P::Ready, 1, &[]);
    assert_eq!(progress("liqo-demo", &obj), Outcome::Waiting(None));
    let mut fresh = seed_object();
    fresh.metadata.generation = Some(1);
    assert_eq!(progress("liqo-demo", &fresh), Outcome::Waiting(None));
    let line = offload_timeout_line("liqo-demo", "20s", Some(&fresh));
    assert!(line.contains("has no status"), "{line}");
    let line = offload_timeout_line("liqo-demo", "20s", Some(&obj));
    assert!(
        line.contains("generation Some(1), object at Some(2)"),
        "{line}"
    );
}

#[test]
fn no_cluster_selected_is_done() {
    let obj = with_status(
        P::NoClusterSelected,
        2,
        &[("milan-1", vec![cond(CLUSTER_NOT_SELECTED, None)])],
    );
    let Outcome::Done(line) = progress("liqo-demo", &obj) else {
        panic!("not done")
    };
    assert!(
        line.contains("no cluster is selected (phase NoClusterSelected)"),
        "{line}"
    );
}

#[test]
fn failures_name_each_failing_cluster_and_its_message() {
    let obj = with_status(
        P::SomeFailed,
        2,
        &[
            (
                "milan-1",
                vec![
                    cond(CLUSTER_SELECTED, None),
                    cond(CREATION_LOOP_BACK_OFF, Some("namespace exists")),
                ],
            ),
            (
                "turin-2",
                vec![cond(CLUSTER_SELECTED, None), cond(CREATING, None)],
            ),
        ],
    );
    assert_eq!(
        progress("liqo-demo", &obj),
        Outcome::Failed(
            "offloading namespace \"liqo-demo\" failed (phase SomeFailed): milan-1: \
             CreationLoopBackOff: namespace exists"
                .into()
        )
    );
}

#[test]
fn a_timeout_says_the_phase_and_the_clusters_not_ready() {
    let obj = with_status(
        P::InProgress,
        2,
        &[(
            "turin-2",
            vec![cond(CLUSTER_SELECTED, None), cond(CREATING, None)],
        )],
    );
    assert_eq!(
        progress("liqo-demo", &obj),
        Outcome::Waiting(Some(P::InProgress))
    );
    assert_eq!(
        offload_timeout_line("liqo-demo", "20s", Some(&obj)),
        "timed out after 20s waiting for namespace \"liqo-demo\" to be offloaded: stuck in \
         phase InProgress; turin-2: Creating: The remote namespace is being created"
    );
}

#[test]
fn a_deleting_object_fails_and_its_unoffload_timeout_names_what_remains() {
    let mut obj = with_status(
        P::Terminating,
        2,
        &[("turin-2", vec![cond(CLUSTER_SELECTED, None)])],
    );
    obj.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::UNIX_EPOCH,
    ));
    obj.metadata.finalizers = Some(vec![
        "namespaceoffloading-controller.liqo.io/finalizer".into(),
    ]);
    let Outcome::Failed(line) = progress("liqo-demo", &obj) else {
        panic!("not failed")
    };
    assert!(line.contains("is being deleted"), "{line}");
    assert_eq!(
        unoffload_timeout_line("liqo-demo", "2m", &obj),
        "timed out after 2m waiting for the offloading of namespace \"liqo-demo\" to be \
         removed: stuck in phase Terminating; clusters still reported: turin-2; finalizers: \
         namespaceoffloading-controller.liqo.io/finalizer"
    );
}

mod flags {
    use std::time::Duration;

    use clap::{Parser, error::ErrorKind};

    use super::*;
    use crate::cli::{Cli, Command, Offload, OffloadNamespace, Unoffload};

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("liqoctl").chain(args.iter().copied()))
    }

    fn offload(args: &[&str]) -> Result<OffloadNamespace, clap::Error> {
        match parse(args)?.command {
            Command::Offload(Offload::Namespace(o)) => Ok(o),
            other => panic!("not offload namespace: {other:?}"),
        }
    }

    /// The seed's command line, unmodified, gives the seed's object.
    #[test]
    fn the_seed_command_line() {
        let o = offload(&[
            "offload",
            "namespace",
            "liqo-demo",
            "--namespace-mapping-strategy",
            "EnforceSameName",
            "--pod-offloading-strategy",
            "LocalAndRemote",
            "--selector",
            "topology.liqo.io/region=south",
        ])
        .unwrap();
        let obj = namespace_offloading(
            o.name.as_str(),
            o.namespace_mapping_strategy,
            o.pod_offloading_strategy,
            &o.selectors,
        );
        assert_eq!(obj, seed_object());
        assert_eq!(o.output, None);
        assert_eq!(o.timeout, Duration::from_secs(20));
    }

    #[test]
    fn defaults_alias_short_flags_and_output() {
        let o = offload(&[
            "offload",
            "ns",
            "foo",
            "-l",
            "a=b,c",
            "-l",
            "!d",
            "-o",
            "json",
            "--timeout",
            "1m",
        ])
        .unwrap();
        assert_eq!(o.namespace_mapping_strategy, M::DefaultName);
        assert_eq!(o.pod_offloading_strategy, S::LocalAndRemote);
        assert_eq!(
            o.selectors,
            vec![parse_term("a=b,c").unwrap(), parse_term("!d").unwrap()]
        );
        assert_eq!(o.output, Some(OutputFormat::Json));
        assert_eq!(o.timeout, Duration::from_secs(60));
        for s in ["Local", "Remote", "LocalAndRemote"] {
            let o = offload(&[
                "offload",
                "namespace",
                "foo",
                "--pod-offloading-strategy",
                s,
            ])
            .unwrap();
            assert_eq!(serde_json::to_value(o.pod_offloading_strategy).unwrap(), s);
        }
        let cli = parse(&["unoffload", "namespace", "foo"]).unwrap();
        let Command::Unoffload(Unoffload::Namespace { name, timeout, .. }) = cli.command else {
            panic!("not unoffload")
        };
        assert_eq!((name.as_str(), timeout), ("foo", Duration::from_secs(120)));
        assert!(parse(&["unoffload", "ns", "foo", "--timeout", "5s"]).is_ok());
    }

    /// Each bad value is refused while parsing, naming it (a strategy with the valid ones, a
    /// selector with the requirement at fault).
    #[test]
    fn bad_values_are_named() {
        let cases: [(&[&str], &[&str]); 6] = [
            (
                &["--namespace-mapping-strategy", "SameName"],
                &["SameName", "DefaultName, EnforceSameName"],
            ),
            (
                &["--pod-offloading-strategy", "remote"],
                &["'remote'", "LocalAndRemote, Local, Remote"],
            ),
            (
                &["-l", "region=south,bad key=x"],
                &["--selector", "\"bad key=x\"", "bad key"],
            ),
            (&["--selector", "region in (a"], &["unclosed '('"]),
            (&["-o", "table"], &["table", "yaml, json"]),
            (&["--timeout", "0s"], &["0s", "more than zero"]),
        ];
        for (flags, wanted) in cases {
            let args: Vec<&str> = ["offload", "namespace", "foo"]
                .into_iter()
                .chain(flags.iter().copied())
                .collect();
            let e = parse(&args).unwrap_err();
            let text = e.to_string();
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::ValueValidation | ErrorKind::InvalidValue
                ),
                "{flags:?}: {:?} {text}",
                e.kind()
            );
            for w in wanted {
                assert!(text.contains(w), "{flags:?}: {w:?} not in {text}");
            }
        }
        let e = parse(&["offload", "namespace", "Foo_Bar"]).unwrap_err();
        assert!(e.to_string().contains("Foo_Bar"), "{e}");
    }
}
