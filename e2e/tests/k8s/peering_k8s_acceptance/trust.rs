//! Issue 26's acceptance points 1 to 3 on the real components (three clusters): a pasted line
//! naming another cluster is refused before any token is sent; a ForeignCluster whose auth
//! service answers for another ID is refused naming both; a captured identity request replayed
//! byte for byte gets 403, discloses nothing and is counted; `liqoctl unpeer` removes a
//! ForeignCluster that never authenticated with everything it made.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{Method, StatusCode, Uri, header},
    response::IntoResponse,
};
use control::{
    api::discovery::{ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T},
    consts::{annotations, auth, labels},
    identity::AuthToken,
    names,
};
use e2e::liqo;
use k8s_openapi::api::{
    certificates::v1::CertificateSigningRequest,
    core::v1::{Namespace, Secret},
    rbac::v1::RoleBinding,
};
use kube::{Api, Client, api::ListParams};

use super::common::{Lab, WAIT, eventually, fc_is, fc_of, flag, identities, names_of, text};

/// A TLS relay in front of an auth service that records the bodies of identity requests, as
/// a man in the middle of a consumer that skips TLS verification (the default) would.
pub(super) struct Recorder {
    /// Its URL (give it as `--auth-url`).
    pub(super) url: String,
    /// The identity requests it saw, byte for byte.
    pub(super) bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

#[derive(Clone)]
struct Relay {
    target: String,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

async fn relay(State(r): State<Relay>, method: Method, uri: Uri, body: Bytes) -> impl IntoResponse {
    if uri.path() == auth::CERTIFICATE_PATH {
        r.bodies.lock().unwrap().push(body.to_vec());
    }
    let body = (!body.is_empty()).then(|| body.to_vec());
    match liqo_auth::client::AuthClient::new(true)
        .raw(&r.target, uri.path(), method, body)
        .await
    {
        Ok((status, answer)) => (
            StatusCode::from_u16(status).unwrap(),
            [(header::CONTENT_TYPE, "application/json")],
            answer,
        ),
        Err(e) => (
            StatusCode::BAD_GATEWAY,
            [(header::CONTENT_TYPE, "text/plain")],
            e.to_string().into_bytes(),
        ),
    }
}

/// The `AuthenticationStatus` condition of a ForeignCluster (it must have one).
fn auth_condition(fc: ForeignCluster) -> control::api::discovery::PeeringCondition {
    control::conditions::get(
        &fc.status.unwrap_or_default().peering_conditions,
        T::AuthenticationStatus,
    )
    .cloned()
    .expect("an AuthenticationStatus condition")
}

/// Starts a recording relay to `target` on 127.0.0.1 (it serves until the test ends).
pub(super) async fn recorder(target: &str) -> Recorder {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let state = Relay {
        target: target.to_owned(),
        bodies: bodies.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let (tls, _) = liqo_auth::server::tls::self_signed("127.0.0.1".parse().unwrap(), &[]).unwrap();
    let router = Router::new().fallback(relay).with_state(state);
    let limits = liqo_auth::https::Limits {
        handshake: Duration::from_secs(5),
        header: Duration::from_secs(5),
        request: Duration::from_secs(60),
        max_connections: 16,
        keep_alive: None,
    };
    tokio::spawn(liqo_auth::https::serve(
        "recording relay",
        listener,
        Some(tls),
        router,
        limits,
        liqo_auth::https::Connections::default(),
        std::future::pending::<()>(),
    ));
    Recorder { url, bodies }
}

/// The count of `certificate` requests of the auth service of `cluster` (from its metrics),
/// by outcome.
pub(super) fn certificate_requests(lab: &Lab, cluster: &str) -> BTreeMap<String, u64> {
    let auth = lab.liqo.get(cluster).unwrap().get("liqo-auth").unwrap();
    let addr = auth.metrics.as_deref().unwrap().parse().unwrap();
    let text = liqo_daemon::localhttp::get(addr, "/metrics").unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("liqo_auth_requests_total{path=\"certificate\",outcome=\""))
        .filter_map(|l| {
            let (outcome, n) = l.split_once("\"} ")?;
            Some((outcome.to_owned(), n.trim().parse().ok()?))
        })
        .collect()
}

/// Everything milan holds for cluster `id`: tenant namespaces, CSR objects, RoleBindings to
/// its user, its token.
async fn held_for(milan: &Client, id: &str) -> Vec<String> {
    let mut held = names_of(
        Api::<Namespace>::all(milan.clone()),
        &ListParams::default().labels(&format!("{}={id}", labels::CLUSTER_ID)),
    )
    .await
    .unwrap();
    held.extend(
        names_of(
            Api::<CertificateSigningRequest>::all(milan.clone()),
            &ListParams::default().labels(&format!("{}={id}", labels::CLUSTER_ID)),
        )
        .await
        .unwrap()
        .into_iter()
        .map(|n| format!("CSR {n}")),
    );
    let bindings = Api::<RoleBinding>::all(milan.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    held.extend(bindings.items.into_iter().filter_map(|b| {
        let to_id = b.subjects.iter().flatten().any(|s| s.name == id);
        to_id.then(|| format!("RoleBinding {}", b.metadata.name.unwrap_or_default()))
    }));
    let token = names::remote_token_secret(&id.parse().unwrap()).to_string();
    if Api::<Secret>::namespaced(milan.clone(), liqo::NAMESPACE)
        .get_opt(&token)
        .await
        .unwrap()
        .is_some()
    {
        held.push(format!("Secret {token}"));
    }
    held
}

/// What turin holds of a peering with `id`: ForeignClusters, its token, tenant namespaces.
async fn turin_holds(turin: &Client, id: &str) -> Vec<String> {
    let mut held: Vec<String> = fc_of(turin, id)
        .await
        .unwrap()
        .into_iter()
        .map(|f| format!("ForeignCluster {}", f.metadata.name.unwrap_or_default()))
        .collect();
    held.extend(
        names_of(
            Api::<Namespace>::all(turin.clone()),
            &ListParams::default().labels(&format!("{}={id}", labels::CLUSTER_ID)),
        )
        .await
        .unwrap()
        .into_iter()
        .map(|n| format!("namespace {n}")),
    );
    let token = names::remote_token_secret(&id.parse().unwrap()).to_string();
    if Api::<Secret>::namespaced(turin.clone(), liqo::NAMESPACE)
        .get_opt(&token)
        .await
        .unwrap()
        .is_some()
    {
        held.push(format!("Secret {token}"));
    }
    held
}

/// `liqoctl unpeer out-of-band <name>` on turin: everything the ForeignCluster made is gone,
/// each removal printed.
async fn unpeer_removes_all(lab: &Lab, turin: &Client, name: &str, id: &str) {
    let before = turin_holds(turin, id).await;
    eprintln!("turin holds for {name} before unpeer: {before:?}");
    assert!(
        before.len() >= 3,
        "FC, token and tenant namespace: {before:?}"
    );
    let out = lab.liqoctl(
        "turin",
        &["unpeer", "out-of-band", name, "--timeout", "60s"],
    );
    eprintln!("unpeer {name}: {}", text(&out));
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8_lossy(&out.stdout);
    for want in [
        "never authenticated".to_owned(),
        format!("Removed ForeignCluster {name:?}"),
        format!(
            "Removed Secret {}/{}",
            liqo::NAMESPACE,
            names::remote_token_secret(&id.parse().unwrap())
        ),
        "Removed namespace liqo-tenant-".to_owned(),
    ] {
        assert!(printed.contains(&want), "{want:?} missing: {printed}");
    }
    assert_eq!(
        turin_holds(turin, id).await,
        Vec::<String>::new(),
        "left on turin"
    );
}

/// Acceptance 1 and 3, from turin (never peered with milan): the wrong line, the wrong
/// ForeignCluster, and a denied one, each unpeered.
pub(super) async fn from_turin(lab: &Lab, milan_command: &str) {
    let (turin, milan) = (lab.client("turin").await, lab.client("milan").await);
    let (rome_id, milan_id, turin_id) = (lab.id("rome"), lab.id("milan"), lab.id("turin"));
    let (url, token) = (
        flag(milan_command, "auth-url"),
        flag(milan_command, "auth-token"),
    );
    let seen_before = certificate_requests(lab, "milan");

    // 1. milan's URL and token with rome's ID: refused before any token is sent.
    let out = lab.liqoctl(
        "turin",
        &[
            "peer",
            "out-of-band",
            "milan",
            "--auth-url",
            &url,
            "--cluster-id",
            &rome_id,
            "--auth-token",
            &token,
            "--timeout",
            "20s",
        ],
    );
    eprintln!("wrong --cluster-id: {}", text(&out));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "answers for cluster {milan_id} (milan), not {rome_id}"
        )) && err.contains("no token was sent"),
        "{err}"
    );
    assert_eq!(turin_holds(&turin, &rome_id).await, Vec::<String>::new());

    // A ForeignCluster written by hand naming rome at milan's auth URL (rome's token being
    // milan's): the controller asks /ids, refuses naming both, sends nothing.
    liqo_auth::tokens::write_remote_token(
        &turin,
        liqo::NAMESPACE,
        &rome_id.parse().unwrap(),
        &token.parse().unwrap(),
    )
    .await
    .unwrap();
    let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": "rome"},
        "spec": {
            "clusterIdentity": {"clusterID": rome_id, "clusterName": "rome"},
            "foreignAuthUrl": url, "outgoingPeeringEnabled": "Yes",
            "insecureSkipTLSVerify": true,
        },
    }))
    .unwrap();
    Api::<ForeignCluster>::all(turin.clone())
        .create(&Default::default(), &fc)
        .await
        .unwrap();
    let fc = eventually(WAIT, "turin's rome FC refused as another cluster", || {
        fc_is(&turin, &rome_id, &[(T::AuthenticationStatus, S::Error)])
    })
    .await;
    let auth = auth_condition(fc);
    eprintln!("turin's rome FC: {auth:?}");
    assert_eq!(auth.reason.as_deref(), Some("ClusterIDMismatch"));
    let m = auth.message.unwrap_or_default();
    assert!(
        m.contains(&format!(
            "answers for cluster {milan_id} (milan), not {rome_id}"
        )) && m.contains("no token was sent"),
        "{m}"
    );
    // milan saw no identity request, and holds nothing for turin (nor for rome from turin).
    assert_eq!(
        certificate_requests(lab, "milan"),
        seen_before,
        "an identity request reached milan"
    );
    assert_eq!(held_for(&milan, &turin_id).await, Vec::<String>::new());
    let log = std::fs::read_to_string(
        &lab.liqo
            .get("milan")
            .unwrap()
            .get("liqo-auth")
            .unwrap()
            .proc
            .log,
    )
    .unwrap();
    assert!(
        !log.contains(&turin_id),
        "milan's auth log names turin:\n{log}"
    );
    // Acceptance 3 (a refused ForeignCluster): unpeer removes it with what it made.
    unpeer_removes_all(lab, &turin, "rome", &rome_id).await;

    // 3. A denied ForeignCluster (a wrong token): the reason and the back-off are shown;
    // unpeer removes it with everything it made; milan holds nothing for turin.
    let wrong = loop {
        let t = AuthToken::generate().unwrap();
        if t.expose() != token {
            break t;
        }
    };
    let out = lab.liqoctl(
        "turin",
        &[
            "peer",
            "out-of-band",
            "milan",
            "--auth-url",
            &url,
            "--cluster-id",
            &milan_id,
            "--auth-token",
            wrong.expose(),
            "--timeout",
            "30s",
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let fc = eventually(WAIT, "turin's milan FC denied", || {
        fc_is(&turin, &milan_id, &[(T::AuthenticationStatus, S::Denied)])
    })
    .await;
    let auth = auth_condition(fc);
    let m = auth.message.unwrap_or_default();
    eprintln!("turin's denied milan FC: {m}");
    assert!(
        m.contains("answered 403")
            && m.contains("destinationClusterToken is not this cluster's auth token")
            && m.contains("asking again at"),
        "{m}"
    );
    assert!(!m.contains(wrong.expose()), "the token in a condition");
    unpeer_removes_all(lab, &turin, "milan", &milan_id).await;
    assert_eq!(held_for(&milan, &turin_id).await, Vec::<String>::new());
}

/// Acceptance 2: rome's identity request, captured by the relay in front of milan's auth
/// service and replayed byte for byte: 403, nothing disclosed, counted; and rome checked that
/// the API server behind its identity is milan's.
pub(super) async fn replay(lab: &Lab, rec: &Recorder, milan_url: &str) {
    let (rome, milan) = (lab.client("rome").await, lab.client("milan").await);
    let milan_id = lab.id("milan");
    let captured = rec.bodies.lock().unwrap().clone();
    assert_eq!(
        captured.len(),
        1,
        "rome's identity requests through the relay"
    );
    let before = certificate_requests(lab, "milan");
    let (status, body) = liqo_auth::client::AuthClient::new(true)
        .raw(
            milan_url,
            auth::CERTIFICATE_PATH,
            http::Method::POST,
            Some(captured[0].clone()),
        )
        .await
        .unwrap();
    let body = String::from_utf8_lossy(&body).into_owned();
    eprintln!("the replay: {status} {body}");
    assert_eq!(status, 403, "{body}");
    let tenant_for_rome = lab.tenant("rome");
    for secret in [
        tenant_for_rome.as_str(),
        "BEGIN CERTIFICATE",
        "LS0t",
        "apiServer",
        "https://",
    ] {
        assert!(
            !body.contains(secret),
            "the replay's answer disclosed {secret:?}: {body}"
        );
    }
    let after = certificate_requests(lab, "milan");
    assert_eq!(
        after.get("replay").copied().unwrap_or(0),
        before.get("replay").copied().unwrap_or(0) + 1,
        "{before:?} -> {after:?}"
    );
    // rome recorded that milan's API server is milan (its tenant namespace says so).
    let ns = Api::<Namespace>::all(milan.clone())
        .get(&tenant_for_rome)
        .await
        .unwrap();
    assert_eq!(
        ns.metadata
            .annotations
            .unwrap_or_default()
            .get(annotations::HOST_CLUSTER_ID),
        Some(&milan_id)
    );
    let ids = identities(&rome, &lab.tenant("milan"), &milan_id)
        .await
        .unwrap();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let secret = Api::<Secret>::namespaced(rome.clone(), &lab.tenant("milan"))
        .get(&ids[0].0)
        .await
        .unwrap();
    assert_eq!(
        secret
            .metadata
            .annotations
            .unwrap_or_default()
            .get(annotations::VERIFIED_CLUSTER_ID),
        Some(&milan_id),
        "rome did not record milan's API server as checked"
    );
}

/// The API server behind rome's identity at milan turns out to be another cluster's (milan's
/// tenant namespace for rome says turin, rome's record of the check removed): rome refuses the
/// identity, naming both IDs, and says what to do.
pub(super) async fn api_server_mismatch(lab: &Lab) {
    let (rome, milan) = (lab.client("rome").await, lab.client("milan").await);
    let (milan_id, turin_id) = (lab.id("milan"), lab.id("turin"));
    let patch =
        serde_json::json!({"metadata": {"annotations": {annotations::HOST_CLUSTER_ID: turin_id}}});
    Api::<Namespace>::all(milan.clone())
        .patch(
            &lab.tenant("rome"),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let tenant = lab.tenant("milan");
    let ids = identities(&rome, &tenant, &milan_id).await.unwrap();
    let secrets = Api::<Secret>::namespaced(rome.clone(), &tenant);
    let mut secret = secrets.get(&ids[0].0).await.unwrap();
    secret
        .metadata
        .annotations
        .get_or_insert_default()
        .remove(annotations::VERIFIED_CLUSTER_ID);
    secrets
        .replace(&ids[0].0, &Default::default(), &secret)
        .await
        .unwrap();
    let fc = eventually(WAIT, "rome refuses milan's API server as turin's", || {
        fc_is(&rome, &milan_id, &[(T::AuthenticationStatus, S::Error)])
    })
    .await;
    let auth = auth_condition(fc);
    eprintln!("rome's milan FC: {auth:?}");
    assert_eq!(auth.reason.as_deref(), Some("ClusterIDMismatch"));
    let m = auth.message.unwrap_or_default();
    assert!(
        m.contains(&format!(
            "(tenant namespace {}) answers for cluster {turin_id}, not {milan_id}",
            lab.tenant("rome")
        )) && m.contains("our identity is not used"),
        "{m}"
    );
}
