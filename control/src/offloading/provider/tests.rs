//! Tests of the provider's NamespaceMap decisions, one per rule, and of the forged Namespace and
//! RoleBinding (insta).

use super::*;

const KEY: &str = "liqo-tenant-rome-7881be/turin-539f8b";

/// A test fixture: the map and the cluster as observed.
#[derive(Default)]
struct World {
    desired: BTreeMap<String, String>,
    current: BTreeMap<String, RemoteNamespaceStatus>,
    deleting: bool,
    has_finalizer: bool,
    namespaces: BTreeMap<String, NsView>,
    bindings: BTreeMap<String, bool>,
    reserved: BTreeSet<String>,
}

impl World {
    fn new() -> Self {
        Self {
            has_finalizer: true,
            reserved: ["liqo".to_owned()].into(),
            ..Self::default()
        }
    }
    fn want(mut self, local: &str, remote: &str) -> Self {
        self.desired.insert(local.into(), remote.into());
        self
    }
    fn has(mut self, local: &str, remote: &str, phase: Option<MappingPhase>) -> Self {
        let status = RemoteNamespaceStatus {
            remote_namespace: Some(remote.into()),
            phase,
        };
        self.current.insert(local.into(), status);
        self
    }
    fn ns(mut self, name: &str, managed_by: Option<&str>, terminating: bool, bound: bool) -> Self {
        let view = NsView {
            uid: format!("uid-{name}"),
            managed_by: managed_by.map(String::from),
            terminating,
            claims: Vec::new(),
        };
        self.namespaces.insert(name.into(), view);
        self.bindings.insert(name.into(), bound);
        self
    }
    fn ours(self, name: &str, terminating: bool, bound: bool) -> Self {
        self.ns(name, Some(KEY), terminating, bound)
    }
    fn decide(&self) -> Vec<Action> {
        decide(&Observed {
            key: KEY,
            desired: &self.desired,
            current: &self.current,
            deleting: self.deleting,
            has_finalizer: self.has_finalizer,
            namespaces: &self.namespaces,
            bindings: &self.bindings,
            reserved: &self.reserved,
        })
    }
}

fn status(entries: &[(&str, &str, MappingPhase)]) -> Action {
    Action::Status(
        entries
            .iter()
            .map(|(l, r, p)| (l.to_string(), entry(r, *p)))
            .collect(),
    )
}

#[test]
fn finalizer_first() {
    let mut w = World::new().want("demo", "demo");
    w.has_finalizer = false;
    let actions = w.decide();
    assert_eq!(actions[0], Action::AddFinalizer);
    assert_eq!(World::new().decide(), []);
}

#[test]
fn absent_namespace_is_created_and_the_entry_stays_absent() {
    let w = World::new().want("demo", "demo");
    let create = Action::CreateNamespace {
        name: "demo".into(),
        original: "demo".into(),
    };
    assert_eq!(w.decide(), [create]);
}

#[test]
fn accepted_only_once_the_binding_is_observed() {
    // Created, not bound: bind, no phase yet (the consumer shows Creating).
    let w = World::new().want("demo", "demo").ours("demo", false, false);
    let bind = Action::ApplyBinding {
        namespace: "demo".into(),
    };
    assert_eq!(w.decide(), std::slice::from_ref(&bind));
    // Bound: Accepted.
    let w = World::new().want("demo", "demo").ours("demo", false, true);
    let accepted = status(&[("demo", "demo", MappingPhase::Accepted)]);
    assert_eq!(w.decide(), [accepted]);
    // Steady state: nothing.
    let w = w.has("demo", "demo", Some(MappingPhase::Accepted));
    assert_eq!(w.decide(), []);
    // The binding vanishes: re-applied, and Accepted is withdrawn until observed again.
    let w = World::new()
        .want("demo", "demo")
        .ours("demo", false, false)
        .has("demo", "demo", Some(MappingPhase::Accepted));
    assert_eq!(w.decide(), [bind, Action::Status(BTreeMap::new())]);
}

#[test]
fn a_namespace_not_ours_is_never_touched() {
    let w = World::new()
        .want("clash", "clash")
        .ns("clash", None, false, false);
    let actions = w.decide();
    assert_eq!(
        actions[0],
        status(&[("clash", "clash", MappingPhase::CreationLoopBackOff)])
    );
    let Action::Event { reason, message } = &actions[1] else {
        panic!("{actions:?}")
    };
    assert_eq!(*reason, CONFLICT);
    assert_eq!(
        message,
        "namespace \"clash\" already exists and it is not managed by NamespaceMap \"liqo-tenant-rome-7881be/turin-539f8b\""
    );
    assert_eq!(actions.len(), 2);
    // Another map's namespace is not ours either.
    let w = World::new().want("clash", "clash").ns(
        "clash",
        Some("liqo-tenant-milan-000000/turin-539f8b"),
        false,
        true,
    );
    assert!(matches!(
        w.decide()[..],
        [Action::Status(_), Action::Event { .. }]
    ));
    // Already in back-off: no new Event, nothing else.
    let w = World::new()
        .want("clash", "clash")
        .ns("clash", None, false, false)
        .has("clash", "clash", Some(MappingPhase::CreationLoopBackOff));
    assert_eq!(w.decide(), []);
    // Unoffloaded: the entry is dropped, the namespace left alone (no delete).
    let w = World::new().ns("clash", None, false, false).has(
        "clash",
        "clash",
        Some(MappingPhase::CreationLoopBackOff),
    );
    let actions = w.decide();
    assert_eq!(actions[0], Action::Status(BTreeMap::new()));
    assert!(matches!(
        actions[1],
        Action::Event {
            reason: NOT_OURS,
            ..
        }
    ));
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::DeleteNamespace { .. }))
    );
    // Once the admin removes it, it is created.
    let w = World::new().want("clash", "clash").has(
        "clash",
        "clash",
        Some(MappingPhase::CreationLoopBackOff),
    );
    assert!(matches!(w.decide()[0], Action::CreateNamespace { .. }));
}

#[test]
fn reserved_and_invalid_names_are_refused() {
    for (remote, reason) in [
        ("default", RESERVED_NAME),
        ("kube-system", RESERVED_NAME),
        ("kube-node-lease", RESERVED_NAME),
        ("liqo", RESERVED_NAME),
        ("liqo-tenant-rome-7881be", RESERVED_NAME),
        ("liqo-tenant-other-123456", RESERVED_NAME),
        ("Bad_Name", INVALID_NAME),
        ("", INVALID_NAME),
    ] {
        // Whether the namespace exists (and even claims to be ours) does not matter.
        for w in [World::new(), World::new().ours(remote, false, true)] {
            let actions = w.want("demo", remote).decide();
            assert_eq!(
                actions[0],
                status(&[("demo", remote, MappingPhase::CreationLoopBackOff)]),
                "{remote}"
            );
            assert!(matches!(actions[1], Action::Event { reason: r, .. } if r == reason));
            assert_eq!(actions.len(), 2, "{remote}: {actions:?}");
        }
    }
}

#[test]
fn terminating_namespace_is_reported_then_recreated() {
    let w = World::new().want("demo", "demo").ours("demo", true, true);
    assert_eq!(
        w.decide(),
        [status(&[("demo", "demo", MappingPhase::Terminating)])]
    );
    let w = World::new()
        .want("demo", "demo")
        .has("demo", "demo", Some(MappingPhase::Terminating));
    let actions = w.decide();
    assert!(matches!(actions[0], Action::CreateNamespace { .. }));
    assert_eq!(actions[1], Action::Status(BTreeMap::new()));
}

#[test]
fn no_longer_desired_is_deleted_with_its_uid() {
    let w =
        World::new()
            .ours("demo", false, true)
            .has("demo", "demo", Some(MappingPhase::Accepted));
    let delete = Action::DeleteNamespace {
        name: "demo".into(),
        uid: "uid-demo".into(),
    };
    assert_eq!(
        w.decide(),
        [
            delete,
            status(&[("demo", "demo", MappingPhase::Terminating)])
        ]
    );
    // Terminating: reported, not deleted again.
    let w =
        World::new()
            .ours("demo", true, true)
            .has("demo", "demo", Some(MappingPhase::Terminating));
    assert_eq!(w.decide(), []);
    // Gone: the entry is dropped.
    let w = World::new().has("demo", "demo", Some(MappingPhase::Terminating));
    assert_eq!(w.decide(), [Action::Status(BTreeMap::new())]);
    // Withdrawn before it was ever reported (created, not yet bound): still deleted.
    let w = World::new().ours("demo", false, false);
    let delete = Action::DeleteNamespace {
        name: "demo".into(),
        uid: "uid-demo".into(),
    };
    assert_eq!(w.decide(), [delete]);
    assert_eq!(World::new().ours("demo", true, false).decide(), []);
}

#[test]
fn a_renamed_mapping_releases_the_old_namespace_first() {
    let w = World::new()
        .want("demo", "demo-rome-7881be")
        .ours("demo", false, true)
        .has("demo", "demo", Some(MappingPhase::Accepted));
    let actions = w.decide();
    assert_eq!(
        actions,
        [
            Action::DeleteNamespace {
                name: "demo".into(),
                uid: "uid-demo".into()
            },
            status(&[("demo", "demo", MappingPhase::Terminating)])
        ]
    );
    let w = World::new().want("demo", "demo-rome-7881be").has(
        "demo",
        "demo",
        Some(MappingPhase::Terminating),
    );
    assert!(
        matches!(&w.decide()[0], Action::CreateNamespace { name, .. } if name == "demo-rome-7881be")
    );
}

#[test]
fn deleting_map_releases_everything_then_its_finalizer() {
    let mut w = World::new()
        .want("a", "a")
        .want("b", "b")
        .ours("a", false, true)
        .ours("b", true, true)
        .ns("c", None, false, false)
        .has("a", "a", Some(MappingPhase::Accepted))
        .has("b", "b", Some(MappingPhase::Terminating))
        .has("c", "c", Some(MappingPhase::CreationLoopBackOff));
    w.deleting = true;
    let actions = w.decide();
    assert_eq!(
        actions[0],
        Action::DeleteNamespace {
            name: "a".into(),
            uid: "uid-a".into()
        }
    );
    assert_eq!(
        actions[1],
        status(&[
            ("a", "a", MappingPhase::Terminating),
            ("b", "b", MappingPhase::Terminating)
        ])
    );
    assert!(matches!(
        actions[2],
        Action::Event {
            reason: NOT_OURS,
            ..
        }
    ));
    assert_eq!(actions.len(), 3);
    assert!(!actions.contains(&Action::RemoveFinalizer));
    // Entries gone but a namespace of ours still observed (never reported): deleted, and the
    // finalizer waits for it.
    let mut w = World::new().want("a", "a").ours("a", false, false);
    w.deleting = true;
    let delete = Action::DeleteNamespace {
        name: "a".into(),
        uid: "uid-a".into(),
    };
    assert_eq!(w.decide(), [delete]);
    let mut w = World::new().ours("a", true, false);
    w.deleting = true;
    assert_eq!(w.decide(), []);
    // Everything gone: the finalizer goes, no status write (the object is going).
    let mut w = World::new()
        .want("a", "a")
        .has("a", "a", Some(MappingPhase::Terminating));
    w.deleting = true;
    assert_eq!(w.decide(), [Action::RemoveFinalizer]);
    // Never AddFinalizer while deleting.
    w.has_finalizer = false;
    assert_eq!(w.decide(), []);
}

#[test]
fn forged_objects() {
    let origin: ClusterId = "53d11339-fc85-4741-a912-a3eda781a69e".parse().unwrap();
    let ns = namespace("demo", "demo", KEY, &origin);
    let rb = role_binding("demo", KEY, "liqo-tenant-rome-7881be", &origin);
    assert!(binding_is_right(&rb, &origin));
    let other: ClusterId = "4858caa2-7848-4aab-a6b4-6984389bac56".parse().unwrap();
    assert!(!binding_is_right(&rb, &other));
    insta::assert_json_snapshot!((ns, rb));
}

#[test]
fn a_reserved_namespace_is_never_deleted_even_if_annotated() {
    for name in ["default", "kube-system", "liqo", "liqo-tenant-rome-7881be"] {
        let w = World::new()
            .ours(name, false, true)
            .has("x", name, Some(MappingPhase::Accepted));
        let actions = w.decide();
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::DeleteNamespace { .. })),
            "{name}: {actions:?}"
        );
        assert_eq!(actions[0], Action::Status(BTreeMap::new()), "{name}");
    }
    assert!(is_reserved("kube-public") && !is_reserved("kubernetes") && !is_reserved("liqo-demo"));
}

#[test]
fn a_namespace_holding_the_consumers_claims_is_kept_and_says_why() {
    let mut w =
        World::new()
            .ours("demo", false, true)
            .has("demo", "demo", Some(MappingPhase::Accepted));
    w.namespaces.get_mut("demo").unwrap().claims = vec!["data".into(), "logs".into()];
    let actions = w.decide();
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::DeleteNamespace { .. })),
        "{actions:?}"
    );
    let Some(Action::Event { reason, message }) = actions.last() else {
        panic!("an Event: {actions:?}")
    };
    assert_eq!(*reason, HOLDS_DATA);
    assert!(
        message.contains(r#"["data", "logs"]"#) && message.contains("--delete-remote-volumes"),
        "{message}"
    );
    // The map deleting (unpeer): kept too, and the finalizer waits.
    w.deleting = true;
    let actions = w.decide();
    assert!(!actions.contains(&Action::RemoveFinalizer), "{actions:?}");
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::DeleteNamespace { .. }))
    );
    // An orphan of ours holding claims: kept as well.
    let mut w = World::new().ours("old", false, false);
    w.namespaces.get_mut("old").unwrap().claims = vec!["data".into()];
    assert!(matches!(
        w.decide().as_slice(),
        [Action::Event {
            reason: HOLDS_DATA,
            ..
        }]
    ));
    // The claims deleted: the namespace goes.
    w.namespaces.get_mut("old").unwrap().claims.clear();
    assert!(matches!(
        w.decide().as_slice(),
        [Action::DeleteNamespace { .. }]
    ));
}
