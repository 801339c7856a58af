use control::{
    api::discovery::{ForeignClusterSpec, ForeignClusterStatus},
    conditions::{Authentication as A, Condition as C, Peering as P, set},
};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

use super::*;
use crate::cli::Cli;

const ID: &str = "b07938e3-d241-460c-a77b-e286c0f733c7";

fn token() -> AuthToken {
    AuthToken::from_bytes(&[0xab; 64])
}

fn command(name: Option<&str>) -> String {
    peer_command("liqoctl", ID, name, "https://127.0.0.1:32415", &token())
}

#[test]
fn peer_command_and_its_output() {
    insta::assert_snapshot!(peer_command_output(&command(Some("milan")), false));
    assert_eq!(
        peer_command_output(&command(Some("milan")), true),
        format!("{}\n", command(Some("milan")))
    );
}

#[test]
fn the_name_falls_back_to_the_id() {
    for name in [None, Some("")] {
        assert!(command(name).starts_with(&format!("liqoctl peer out-of-band {ID} --auth-url")));
    }
    let plugin = peer_command("kubectl liqo", ID, Some("milan"), "https://a.b", &token());
    assert!(
        plugin.starts_with("kubectl liqo peer out-of-band milan "),
        "{plugin}"
    );
}

/// The printed command is one liqoctl parses back to the same values.
#[test]
fn the_command_parses_back() {
    use clap::Parser;
    let line = command(Some("milan"));
    let cli = Cli::try_parse_from(line.split(' ')).unwrap();
    let crate::cli::Command::Peer(crate::cli::PeerArgs {
        mode: Some(crate::cli::PeerMode::OutOfBand(o)),
        ..
    }) = cli.command
    else {
        panic!("{line}")
    };
    assert_eq!(o.name.as_str(), "milan");
    assert_eq!(o.cluster_id.as_str(), ID);
    assert_eq!(o.auth_url.as_str(), "https://127.0.0.1:32415");
    assert_eq!(o.auth_token, token());
}

fn fc(name: &str, conds: &[C]) -> ForeignCluster {
    let spec: ForeignClusterSpec = serde_json::from_value(serde_json::json!({
        "clusterIdentity": {"clusterID": ID, "clusterName": name},
        "foreignAuthUrl": "https://10.0.0.1:443",
        "outgoingPeeringEnabled": "Yes",
    }))
    .unwrap();
    let mut fc = ForeignCluster::new(name, spec);
    if !conds.is_empty() {
        let mut s = ForeignClusterStatus::default();
        for c in conds {
            set(&mut s.peering_conditions, *c, &Time(Timestamp::UNIX_EPOCH));
        }
        fc.status = Some(s);
    }
    fc
}

#[test]
fn status_report() {
    let full = StatusReport {
        namespace: "liqo".into(),
        api_server: Some("https://127.0.0.1:6443/".into()),
        identity: Ok((ID.into(), "rome".into())),
        auth_url: Ok("https://127.0.0.1:31000".into()),
        peers: Ok(vec![
            fc(
                "milan",
                &[C::Authentication(A::Accepted), C::Outgoing(P::Accepted)],
            ),
            fc("naples", &[]),
        ]),
        network: Ok(Some(Network {
            pod_cidr: "10.244.0.0/16".into(),
            service_cidr: "10.96.0.0/12".into(),
            external_cidr: "10.70.0.0/16".into(),
            reserved_subnets: vec!["192.168.7.0/24".into()],
            pools: vec!["10.0.0.0/8".into(), "172.16.0.0/12".into()],
            peers: 1,
            endpoints: 3,
        })),
        components: Ok(vec![
            ComponentStatus {
                name: "Deployment/liqo-auth".into(),
                ready: 1,
                wanted: 1,
                done: true,
                version: Some("0.1.0".into()),
            },
            ComponentStatus {
                name: "DaemonSet/liqo-route".into(),
                ready: 1,
                wanted: 2,
                done: false,
                version: None,
            },
        ]),
    };
    let missing = StatusReport {
        namespace: "liqo".into(),
        api_server: None,
        identity: Err(Missing::Identity(Arc::new(IdentityError::NotFound {
            namespace: "liqo".into(),
        }))),
        auth_url: Err(Missing::AuthUrl(Arc::new(UrlError::NoService {
            namespace: "liqo".into(),
        }))),
        peers: Ok(vec![]),
        network: Ok(None),
        components: Ok(vec![]),
    };
    let no_crd = StatusReport {
        peers: Err(Missing::Peers(Arc::new(ApiFailure::from(
            kube::Error::Api(
                kube::core::Status::failure("404 page not found", "NotFound")
                    .with_code(404)
                    .boxed(),
            ),
        )))),
        ..missing.clone()
    };
    insta::assert_snapshot!(format!(
        "{}---\n{}---\n{}",
        status(&full),
        status(&missing),
        status(&no_crd)
    ));
    // As data: every piece, a missing one as its error.
    let v = status_value(&full);
    assert_eq!(v["identity"]["clusterName"], "rome");
    assert_eq!(v["network"]["reservedSubnets"][0], "192.168.7.0/24");
    assert_eq!(v["components"][1]["done"], false);
    assert_eq!(v["peers"][0]["name"], "milan");
    let v = status_value(&no_crd);
    assert!(
        v["peers"]["error"]
            .as_str()
            .unwrap()
            .contains("listing ForeignClusters"),
        "{v}"
    );
    assert_eq!(v["network"], serde_json::Value::Null);
}
