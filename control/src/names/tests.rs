use super::*;

fn cluster(id: &str, name: &str) -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: id.parse().unwrap(),
        cluster_name: name.parse().unwrap(),
    }
}

/// The seed's own pairs (§12.3: the virtual nodes' `liqo.io/remote-cluster-id`; §13.3: the
/// UniqueNames keying `remoteNamespacesConditions`).
#[test]
fn unique_name_matches_the_seed() {
    let naples = cluster("53d11339-fc85-4741-a912-a3eda781a69e", "naples");
    let florence = cluster("4858caa2-7848-4aab-a6b4-6984389bac56", "florence");
    assert_eq!(UniqueName::new(&naples).as_str(), "naples-7881be");
    assert_eq!(UniqueName::new(&florence).to_string(), "florence-539f8b");
    assert_eq!(
        tenant_namespace(&naples).as_str(),
        "liqo-tenant-naples-7881be"
    );
    assert_eq!(
        UniqueName::new(&naples).to_object_name().as_str(),
        "naples-7881be"
    );
}

#[test]
fn unique_name_depends_on_the_id_only_through_its_hash() {
    let a = cluster("11111111-1111-4111-8111-111111111111", "milan");
    let b = cluster("22222222-2222-4222-8222-222222222222", "milan");
    assert_ne!(UniqueName::new(&a), UniqueName::new(&b));
    assert_ne!(tenant_namespace(&a), tenant_namespace(&b));
    assert!(UniqueName::new(&a).as_str().starts_with("milan-"));
    assert_eq!(UniqueName::new(&a).as_str().len(), "milan-".len() + 6);
}

#[test]
fn long_cluster_names_still_make_a_namespace() {
    let id = "53d11339-fc85-4741-a912-a3eda781a69e";
    // 44 characters fit whole; 45 are cut to 44.
    let fits = cluster(id, &"a".repeat(44));
    assert_eq!(
        tenant_namespace(&fits).as_str(),
        format!("liqo-tenant-{}-7881be", "a".repeat(44))
    );
    assert_eq!(tenant_namespace(&fits).as_str().len(), 63);
    let long = cluster(id, &"b".repeat(63));
    assert_eq!(
        tenant_namespace(&long).as_str(),
        format!("liqo-tenant-{}-7881be", "b".repeat(44))
    );
    // A cut that would end on '-' drops it.
    let dashed = cluster(id, &format!("{}-{}", "c".repeat(43), "d".repeat(10)));
    assert_eq!(
        tenant_namespace(&dashed).as_str(),
        format!("liqo-tenant-{}-7881be", "c".repeat(43))
    );
    validate_label(tenant_namespace(&dashed).as_str()).unwrap();
}

#[test]
fn per_cluster_names() {
    let milan = cluster("b07938e3-d241-460c-a77b-e286c0f733c7", "milan");
    assert_eq!(
        remote_token_secret(&milan.cluster_id).as_str(),
        "remote-token-b07938e3-d241-460c-a77b-e286c0f733c7"
    );
    assert_eq!(virtual_node(&milan.cluster_name).as_str(), "liqo-milan");
    assert_eq!(
        role_binding("liqo-remote-peering-basic").unwrap().as_str(),
        "liqo-binding-liqo-remote-peering-basic"
    );
    assert_eq!(resource_request(&"rome".parse().unwrap()).as_str(), "rome");
    assert_eq!(resource_offer(&milan.cluster_name).as_str(), "milan");
}

#[test]
fn role_binding_refuses_bad_roles_naming_them() {
    let err = role_binding("Basic").unwrap_err();
    assert_eq!(err.value, "Basic");
    assert_eq!(
        err.to_string(),
        "\"Basic\" is not a valid DNS-1123 subdomain: contains 'B' (only a-z, 0-9 and '-' are \
         allowed, and '.' between labels of a subdomain)"
    );
    let long = "r".repeat(SUBDOMAIN_MAX - 5);
    let err = role_binding(&long).unwrap_err();
    assert_eq!(err.value, format!("liqo-binding-{long}"));
    assert_eq!(
        err.problem,
        NameProblem::TooLong {
            len: SUBDOMAIN_MAX - 5 + "liqo-binding-".len(),
            max: SUBDOMAIN_MAX
        }
    );
}

#[test]
fn incoming_foreign_cluster_takes_the_unique_name_on_a_clash() {
    let rome = cluster("53d11339-fc85-4741-a912-a3eda781a69e", "rome");
    let other: ClusterId = "c0ffee00-0000-4000-8000-000000000000".parse().unwrap();
    assert_eq!(incoming_foreign_cluster(&rome, None).as_str(), "rome");
    assert_eq!(
        incoming_foreign_cluster(&rome, Some(&rome.cluster_id)).as_str(),
        "rome"
    );
    assert_eq!(
        incoming_foreign_cluster(&rome, Some(&other)).as_str(),
        "rome-7881be"
    );
}

#[test]
fn namespace_names_are_labels() {
    let ok: NamespaceName = "liqo-tenant-x".parse().unwrap();
    assert_eq!(ok.to_string(), "liqo-tenant-x");
    for (bad, problem) in [
        ("", NameProblem::Empty),
        ("a.b", NameProblem::InvalidChar('.')),
        ("-a", NameProblem::EdgeDash),
        ("A", NameProblem::InvalidChar('A')),
    ] {
        let err = bad.parse::<NamespaceName>().unwrap_err();
        assert_eq!(
            err,
            InvalidName {
                value: bad.into(),
                kind: NameKind::Label,
                problem
            }
        );
    }
    let err = "x".repeat(64).parse::<NamespaceName>().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{:?} is not a valid DNS-1123 label: is 64 characters long (at most 63)",
            "x".repeat(64)
        )
    );
}

#[test]
fn object_names_are_subdomains() {
    for good in ["a", "a.b", "liqo-identity-x7k2", &"x".repeat(70), "0.0-1"] {
        good.parse::<ObjectName>()
            .unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    for (bad, problem) in [
        ("", NameProblem::Empty),
        ("a..b", NameProblem::EmptyPart),
        (".a", NameProblem::EmptyPart),
        ("a.", NameProblem::EmptyPart),
        ("a.-b", NameProblem::EdgeDash),
        ("a_b", NameProblem::InvalidChar('_')),
    ] {
        let err = bad.parse::<ObjectName>().unwrap_err();
        assert_eq!(err.problem, problem, "{bad}");
        assert_eq!(err.value, bad);
        assert_eq!(err.kind, NameKind::Subdomain);
    }
}

#[test]
fn serde_validates_and_names_the_value() {
    let ns: NamespaceName = serde_json::from_str("\"liqo-tenant-rome-1a2b3c\"").unwrap();
    assert_eq!(
        serde_json::to_string(&ns).unwrap(),
        "\"liqo-tenant-rome-1a2b3c\""
    );
    let err = serde_json::from_str::<NamespaceName>("\"Tenant\"").unwrap_err();
    assert!(
        err.to_string().contains("\"Tenant\" is not a valid"),
        "{err}"
    );
}
