//! One test per rule of `consumer::decide` (design 15 §3.1).

use super::*;

#[test]
fn finalizer_is_added_first() {
    let mut w = world(two());
    w.has_finalizer = false;
    assert_eq!(w.decide()[0], Action::AddFinalizer);
    w.has_finalizer = true;
    assert!(!w.decide().contains(&Action::AddFinalizer));
}

/// The seed's flow (florence = milan, naples = turin): the south selector asks turin only,
/// then turin's map reports Accepted and the status is the seed's.
#[test]
fn seed_flow_selects_the_south() {
    let w = world(two());
    let actions = w.decide();
    assert_eq!(actions[0], set(TURIN, "liqo-demo"));
    assert_eq!(actions.len(), 2);
    insta::assert_snapshot!("seed_first_pass", show(&actions));
    let mut w = world(vec![
        peer(MILAN, "center"),
        peer(TURIN, "south")
            .desired("liqo-demo")
            .current("liqo-demo", MappingPhase::Accepted),
    ]);
    w.status = status_of(&actions).clone();
    let actions = w.decide_at(at(1_700_000_010));
    assert_eq!(actions.len(), 1);
    insta::assert_snapshot!("seed_second_pass", show(&actions));
    assert_eq!(
        status_of(&actions).offloading_phase,
        Some(OffloadingPhase::Ready)
    );
    // Steady state: nothing at all.
    w.status = status_of(&actions).clone();
    assert_eq!(w.decide_at(at(1_700_000_020)), []);
}

#[test]
fn no_selector_selects_every_live_peer_with_default_names() {
    let mut w = world(two());
    w.spec.cluster_selector = None;
    w.spec.namespace_mapping_strategy = NamespaceMappingStrategy::DefaultName;
    let actions = w.decide();
    let name = format!("liqo-demo-{}", crate::names::UniqueName::new(&rome()));
    assert!(name.starts_with("liqo-demo-rome-"), "{name}");
    assert_eq!(actions[..2], [set(MILAN, &name), set(TURIN, &name)]);
    assert_eq!(
        status_of(&actions).remote_namespace_name.as_deref(),
        Some(name.as_str())
    );
    // An empty term list matches every cluster too.
    w.spec.cluster_selector = Some(NodeSelector::default());
    assert_eq!(w.decide()[..2], [set(MILAN, &name), set(TURIN, &name)]);
}

#[test]
fn an_unselected_peer_loses_its_entry() {
    let w = world(vec![
        peer(MILAN, "center").desired("liqo-demo"),
        peer(TURIN, "south"),
    ]);
    let actions = w.decide();
    assert_eq!(actions[..2], [remove(MILAN), set(TURIN, "liqo-demo")]);
}

#[test]
fn invalid_remote_name_asks_nothing_and_fails_selected_clusters() {
    let mut w = world(two());
    w.ns = "a".repeat(52).parse().unwrap();
    w.spec.namespace_mapping_strategy = NamespaceMappingStrategy::DefaultName;
    let actions = w.decide();
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::SetDesired { .. } | Action::RemoveDesired { .. })),
        "{actions:?}"
    );
    let Action::Event {
        warning: true,
        reason: INVALID_REMOTE_NAME,
        message,
    } = &actions[0]
    else {
        panic!("{actions:?}")
    };
    assert!(
        message.contains("is 64 characters long (at most 63)"),
        "{message}"
    );
    assert!(message.contains("use EnforceSameName"), "{message}");
    let s = status_of(&actions);
    assert_eq!(s.offloading_phase, Some(OffloadingPhase::AllFailed));
    assert_eq!(s.remote_namespace_name, None);
    let turin = &s.remote_namespaces_conditions[TURIN];
    assert_eq!(turin[1].reason.as_deref(), Some("CreationLoopBackOff"));
    assert_eq!(turin[1].message.as_ref(), Some(message));
    assert_eq!(s.remote_namespaces_conditions[MILAN].len(), 1);
    // Once the status records this generation, the Event is not repeated.
    w.status = s.clone();
    assert_eq!(w.decide(), []);
}

#[test]
fn invalid_selector_changes_no_mapping() {
    let mut w = world(vec![
        peer(MILAN, "center").desired("liqo-demo"),
        peer(TURIN, "south"),
    ]);
    let mut sel = region("south");
    sel.node_selector_terms[0]
        .match_expressions
        .as_mut()
        .unwrap()[0]
        .values = None;
    w.spec.cluster_selector = Some(sel);
    let actions = w.decide();
    let Action::Event {
        warning: true,
        reason: INVALID_SELECTOR,
        message,
    } = &actions[0]
    else {
        panic!("{actions:?}")
    };
    assert!(
        message.starts_with("Invalid ClusterSelector: "),
        "{message}"
    );
    assert!(
        message.contains("spec.clusterSelector.nodeSelectorTerms[0].matchExpressions[0]"),
        "{message}"
    );
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::SetDesired { .. } | Action::RemoveDesired { .. }))
    );
    // The status keeps what is asked: milan stays required (Creating), turin is not.
    let s = status_of(&actions);
    assert_eq!(s.remote_namespaces_conditions[MILAN].len(), 2);
    assert_eq!(s.remote_namespaces_conditions[TURIN].len(), 1);
}

#[test]
fn a_peer_without_a_live_node_keeps_its_entry() {
    for node in [None, Some(true)] {
        // Selected before, node gone (or going): its entry stays, the cluster stays required.
        let w = world(vec![
            peer(MILAN, "center"),
            peer(TURIN, "south")
                .desired("liqo-demo")
                .current("liqo-demo", MappingPhase::Accepted)
                .node(node),
        ]);
        let actions = w.decide();
        assert_eq!(actions.len(), 1, "{actions:?}");
        assert_eq!(
            status_of(&actions).offloading_phase,
            Some(OffloadingPhase::Ready)
        );
        // Unselected before and node-less: it is not asked for either (even with no selector).
        let mut w = world(vec![peer(MILAN, "center").node(node), peer(TURIN, "south")]);
        w.spec.cluster_selector = None;
        let actions = w.decide();
        assert_eq!(actions[0], set(TURIN, "liqo-demo"));
        assert!(!actions.contains(&set(MILAN, "liqo-demo")));
    }
}

#[test]
fn the_label_follows_the_pod_strategy() {
    use PodOffloadingStrategy::*;
    for (strategy, labelled, want) in [
        (Local, true, Some(Action::Unlabel)),
        (Local, false, None),
        (Remote, false, Some(Action::Label)),
        (Remote, true, None),
        (LocalAndRemote, false, Some(Action::Label)),
        (LocalAndRemote, true, None),
    ] {
        let mut w = world(two());
        w.spec.pod_offloading_strategy = strategy;
        w.labelled = labelled;
        let actions = w.decide();
        let label: Vec<&Action> = actions
            .iter()
            .filter(|a| matches!(a, Action::Label | Action::Unlabel))
            .collect();
        assert_eq!(
            label,
            want.iter().collect::<Vec<_>>(),
            "{strategy:?} {labelled}"
        );
    }
}

#[test]
fn deletion_unlabels_releases_everything_then_drops_the_finalizer() {
    let mut w = world(vec![
        peer(MILAN, "center").desired("liqo-demo").node(None),
        peer(TURIN, "south")
            .desired("liqo-demo")
            .current("liqo-demo", MappingPhase::Accepted),
    ]);
    w.deleting = true;
    w.has_finalizer = true;
    let actions = w.decide();
    insta::assert_snapshot!("deletion_first_pass", show(&actions));
    assert_eq!(
        actions[..3],
        [Action::Unlabel, remove(MILAN), remove(TURIN)]
    );
    assert_eq!(
        status_of(&actions).offloading_phase,
        Some(OffloadingPhase::Terminating)
    );
    // The provider reports Terminating: status only.
    let mut w = world(vec![
        peer(MILAN, "center"),
        peer(TURIN, "south").current("liqo-demo", MappingPhase::Terminating),
    ]);
    w.deleting = true;
    w.labelled = false;
    let actions = w.decide();
    assert!(matches!(actions[..], [Action::Status(_)]), "{actions:?}");
    // Nothing reported any more: the finalizer goes, and no status is written.
    w.peers = two();
    assert_eq!(w.decide(), [Action::RemoveFinalizer]);
    // Without our finalizer there is nothing left to do.
    w.has_finalizer = false;
    assert_eq!(w.decide(), []);
}
