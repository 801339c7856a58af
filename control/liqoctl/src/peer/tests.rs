use super::*;

const ID: &str = "b07938e3-d241-460c-a77b-e286c0f733c7";

fn body(existing: Option<&ForeignClusterSpec>) -> serde_json::Value {
    // What `peer out-of-band` gives: the name asked, outgoing Yes.
    let peer = ClusterIdentity {
        cluster_id: ID.parse().unwrap(),
        cluster_name: "milan".parse().unwrap(),
    };
    let reach = Reach {
        auth_url: "https://10.0.0.1:31443",
        proxy_url: None,
    };
    foreign_cluster_apply("milan", &peer, reach, PeeringEnabled::Yes, existing)
}

/// A new ForeignCluster: incoming Auto, TLS not verified (upstream's defaults); the body is
/// a valid ForeignCluster.
#[test]
fn new_foreign_cluster() {
    let b = body(None);
    insta::assert_json_snapshot!(b);
    let fc: ForeignCluster = serde_json::from_value(b).unwrap();
    assert_eq!(fc.spec.outgoing_peering_enabled, PeeringEnabled::Yes);
}

/// An existing one keeps its incoming switch, its TLS choice and its cluster name.
#[test]
fn existing_foreign_cluster_keeps_its_choices() {
    let existing: ForeignClusterSpec = serde_json::from_value(json!({
        "clusterIdentity": {"clusterID": ID, "clusterName": "milano"},
        "foreignAuthUrl": "https://10.9.9.9:443",
        "outgoingPeeringEnabled": "No",
        "incomingPeeringEnabled": "No",
        "insecureSkipTLSVerify": false,
    }))
    .unwrap();
    let b = body(Some(&existing));
    assert_eq!(b["spec"]["incomingPeeringEnabled"], "No");
    assert_eq!(b["spec"]["insecureSkipTLSVerify"], false);
    assert_eq!(b["spec"]["clusterIdentity"]["clusterName"], "milano");
    assert_eq!(b["spec"]["outgoingPeeringEnabled"], "Yes");
    assert_eq!(b["spec"]["foreignAuthUrl"], "https://10.0.0.1:31443");
}
