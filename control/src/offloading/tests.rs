//! Tests of the remote namespace name (`remote_namespace`): both strategies and the
//! 63-character limit.

use super::*;

fn cluster(id: &str, name: &str) -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: id.parse().unwrap(),
        cluster_name: name.parse().unwrap(),
    }
}

fn rome() -> ClusterIdentity {
    cluster("53d11339-fc85-4741-a912-a3eda781a69e", "rome")
}

#[test]
fn enforce_same_name_keeps_the_name() {
    let ns: NamespaceName = "liqo-demo".parse().unwrap();
    let remote = remote_namespace(&ns, NamespaceMappingStrategy::EnforceSameName, &rome());
    assert_eq!(remote.unwrap(), ns);
}

#[test]
fn default_name_appends_the_unique_name() {
    let ns: NamespaceName = "liqo-demo".parse().unwrap();
    let remote = remote_namespace(&ns, NamespaceMappingStrategy::DefaultName, &rome()).unwrap();
    assert_eq!(remote.as_str(), "liqo-demo-rome-7881be");
}

#[test]
fn default_name_too_long_is_refused_naming_it() {
    // 63 - "-rome-7881be".len() = 51 characters fit; 52 do not.
    let fits: NamespaceName = "a".repeat(51).parse().unwrap();
    let remote = remote_namespace(&fits, NamespaceMappingStrategy::DefaultName, &rome()).unwrap();
    assert_eq!(remote.as_str().len(), 63);

    let long: NamespaceName = "a".repeat(52).parse().unwrap();
    let err = remote_namespace(&long, NamespaceMappingStrategy::DefaultName, &rome()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{}-rome-7881be", "a".repeat(52))),
        "{msg}"
    );
    assert!(msg.contains("is 64 characters long (at most 63)"), "{msg}");
    // EnforceSameName never fails: the local name is already a label.
    let same = remote_namespace(&long, NamespaceMappingStrategy::EnforceSameName, &rome());
    assert_eq!(same.unwrap(), long);
}
