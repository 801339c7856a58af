//! Issue 13's acceptance points 3, 6 and 7 on the harness's real clusters, with Liqo installed
//! by `e2e::liqo::install` (the real `liqo-auth`, `liqo-controller-manager` and `liqoctl`
//! binaries, the components under their own ServiceAccounts):
//!
//! - 3: a wrong token is denied and creates nothing on the provider; `peer out-of-band` with
//!   our own cluster ID is refused; a second identity request for a peered cluster gets 403;
//! - 6: `liqoctl unpeer out-of-band` tears the outgoing peering down in the order of
//!   control-plane.md §1.7 (watched on both clusters), keeps the ForeignCluster and the tenant
//!   namespaces, peering again reuses the identity, and the reverse direction survives;
//! - 7: three clusters in a full mesh, every direction Established, no duplicate objects;
//!
//! and issue 26's acceptance 1 to 3 ([`trust`]): a line naming another cluster refused before
//! any token is sent, a replayed identity request refused, `unpeer` of a ForeignCluster that
//! never authenticated removing everything it made.
//!
//! Needs the components built (`cargo build -p ipam -p liqo-auth -p liqo-controller-manager -p
//! liqoctl --bins`) next to this test or in `$LIQO_BIN_DIR`. Waits allow 60 s where the
//! product's target is 20 s (the machine is shared); the measured times are printed.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use control::{
    api::{
        discovery::{
            ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T, ResourceRequest,
        },
        sharing::ResourceOffer,
    },
    consts::{keys, labels, objects},
    identity::{AuthToken, CertificateIdentityRequest},
    names,
    phase::RoleSet,
};
use e2e::liqo;
use futures::StreamExt as _;
use k8s_openapi::api::{
    certificates::v1::CertificateSigningRequest,
    core::v1::{Namespace, Secret},
};
use kube::{
    Api, Client, Resource,
    api::{ListParams, WatchEvent, WatchParams},
};

use common::{
    Lab, WAIT, csr_count, eventually, fc_is, fc_of, flag, identities, names_of, peering_bindings,
    text,
};

#[path = "peering_k8s_acceptance/common.rs"]
mod common;
#[path = "peering_k8s_acceptance/trust.rs"]
mod trust;

/// The acceptance 3 (control-plane.md §1.2 steps 2 and 4): a wrong token (valid
/// format) is denied with `IdentityDenied` and creates nothing on milan; `peer out-of-band`
/// with rome's own cluster ID is refused and writes nothing; once peered, a second identity
/// request for rome gets 403. Issue 26's acceptance 1 to 3 on the same three clusters
/// ([`trust`]): rome's identity request goes through a recording relay and its replay is
/// refused; turin pastes a line naming another cluster, writes a ForeignCluster whose auth
/// service is another cluster's, is denied, and unpeers them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_token_own_id_wrong_cluster_replay_and_unpeer_of_the_refused() {
    let lab = Lab::up(3).await;
    let (rome, milan) = (lab.client("rome").await, lab.client("milan").await);
    let (rome_id, milan_id) = (lab.id("rome"), lab.id("milan"));
    let command = lab.peer_command("milan");
    let (url, token) = (flag(&command, "auth-url"), flag(&command, "auth-token"));
    assert_eq!(flag(&command, "cluster-id"), milan_id);
    let csrs_before = csr_count(&milan).await;
    let filed = csr_watch(&milan).await;
    let filed_before = distinct(&filed);

    // A wrong token of the right format.
    let wrong = loop {
        let t = AuthToken::generate().unwrap();
        if t.expose() != token {
            break t;
        }
    };
    let started = Instant::now();
    let out = lab.liqoctl(
        "rome",
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
            "60s",
        ],
    );
    eprintln!(
        "peer with a wrong token failed after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(!out.status.success(), "{}", text(&out));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains("Authentication") && all.contains("Denied") && all.contains("IdentityDenied"),
        "{}",
        text(&out)
    );
    assert!(!all.contains(wrong.expose()), "the token printed");
    let fc = fc_is(
        &rome,
        &milan_id,
        &[
            (T::AuthenticationStatus, S::Denied),
            (T::OutgoingPeering, S::None),
        ],
    )
    .await
    .unwrap();
    let auth = control::conditions::get(
        &fc.status.unwrap().peering_conditions,
        T::AuthenticationStatus,
    )
    .cloned()
    .unwrap();
    assert_eq!(auth.reason.as_deref(), Some("IdentityDenied"), "{auth:?}");

    // Nothing on milan.
    let tenant_for_rome = lab.tenant("rome");
    let ns = names_of(
        Api::<Namespace>::all(milan.clone()),
        &ListParams::default().labels(&format!("{}={rome_id}", labels::CLUSTER_ID)),
    )
    .await
    .unwrap();
    assert!(ns.is_empty(), "tenant namespaces for rome on milan: {ns:?}");
    assert!(
        Api::<Namespace>::all(milan.clone())
            .get_opt(&tenant_for_rome)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(csr_count(&milan).await, csrs_before, "a CSR filed on milan");
    assert_eq!(distinct(&filed), filed_before, "a CSR filed on milan");
    let remote_token = names::remote_token_secret(&rome_id.parse().unwrap()).to_string();
    assert!(
        Api::<Secret>::namespaced(milan.clone(), liqo::NAMESPACE)
            .get_opt(&remote_token)
            .await
            .unwrap()
            .is_none(),
        "{remote_token} on milan"
    );
    let certs = names_of(
        Api::<Secret>::all(milan.clone()),
        &ListParams::default().fields(&format!(
            "metadata.name={}",
            objects::REMOTE_CERTIFICATE_SECRET
        )),
    )
    .await
    .unwrap();
    assert!(certs.is_empty(), "{certs:?}");

    // Our own cluster ID: refused, nothing written.
    let fcs_before = names_of(
        Api::<ForeignCluster>::all(rome.clone()),
        &ListParams::default(),
    )
    .await
    .unwrap();
    let out = lab.liqoctl(
        "rome",
        &[
            "peer",
            "out-of-band",
            "myself",
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
    assert!(!out.status.success(), "{}", text(&out));
    eprintln!("own cluster ID: {}", text(&out));
    assert_eq!(
        names_of(
            Api::<ForeignCluster>::all(rome.clone()),
            &ListParams::default()
        )
        .await
        .unwrap(),
        fcs_before,
        "a ForeignCluster written"
    );
    let own_token = names::remote_token_secret(&rome_id.parse().unwrap()).to_string();
    assert!(
        Api::<Secret>::namespaced(rome.clone(), liqo::NAMESPACE)
            .get_opt(&own_token)
            .await
            .unwrap()
            .is_none(),
        "{own_token} written on rome"
    );

    // The operator runs the generated command (the right token) at once, over the denied
    // ForeignCluster: the new token is tried at once (not after the retry period) and liqoctl
    // waits past the earlier denial. Its auth URL is a relay to milan's that records the
    // identity request (a man in the middle, for the replay below).
    let rec = trust::recorder(&url).await;
    let relayed = command.replace(&url, &rec.url);
    let started = Instant::now();
    let out = lab.bash("rome", &relayed);
    assert!(out.status.success(), "{}", text(&out));
    eventually(WAIT, "rome -> milan Established after the denial", || {
        fc_is(
            &rome,
            &milan_id,
            &[
                (T::AuthenticationStatus, S::Established),
                (T::OutgoingPeering, S::Established),
            ],
        )
    })
    .await;
    eprintln!(
        "peered in {:.1} s after the wrong token",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(distinct(&filed), filed_before + 1, "one CSR for rome");

    // A second identity request for rome, with milan's right token and a fresh CSR.
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, rome_id.as_str());
    params.distinguished_name.push(
        rcgen::DnType::OrganizationName,
        control::consts::auth::CSR_ORGANIZATION,
    );
    let csr = params.serialize_request(&key).unwrap().pem().unwrap();
    let rome_secret = Api::<Secret>::namespaced(rome.clone(), liqo::NAMESPACE)
        .get(objects::AUTH_TOKEN_SECRET)
        .await
        .unwrap();
    let rome_token: AuthToken = String::from_utf8(rome_secret.data.unwrap()[keys::TOKEN].0.clone())
        .unwrap()
        .parse()
        .unwrap();
    let milan_token: AuthToken = token.parse().unwrap();
    let request = CertificateIdentityRequest::new(
        lab.identity("rome"),
        &rome_token,
        Some(&milan_token),
        csr.into_bytes(),
    );
    let err = liqo_auth::client::AuthClient::new(true)
        .certificate(&url, &request)
        .await
        .expect_err("a second identity for rome");
    assert_eq!(err.http_status(), Some(403), "{err}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        distinct(&filed),
        filed_before + 1,
        "a CSR filed for the refused request"
    );
    // Still peered.
    fc_is(
        &rome,
        &milan_id,
        &[
            (T::AuthenticationStatus, S::Established),
            (T::OutgoingPeering, S::Established),
        ],
    )
    .await
    .unwrap();

    trust::replay(&lab, &rec, &url).await;
    trust::from_turin(&lab, &command).await;
    // Last: it withdraws rome's outgoing peering.
    trust::api_server_mismatch(&lab).await;
    lab.done().await;
}

/// One observation of a watched object.
#[derive(Debug, Clone)]
struct Seen {
    at: Duration,
    tag: &'static str,
    deleted: bool,
    object: serde_json::Value,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// Watches every object of `api` (from its current state, listed first) into `log`; returns
/// once the watch is open.
async fn watch<K>(api: Api<K>, tag: &'static str, log: Log, t0: Instant)
where
    K: Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    K: Send + 'static,
{
    let l = api.list(&ListParams::default()).await.unwrap();
    let version = l.metadata.resource_version.clone().unwrap_or_default();
    for o in l.items {
        log.lock().unwrap().push(Seen {
            at: t0.elapsed(),
            tag,
            deleted: false,
            object: serde_json::to_value(&o).unwrap(),
        });
    }
    let stream = api
        .watch(&WatchParams::default().timeout(290), &version)
        .await
        .unwrap();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(e) = stream.next().await {
            let (deleted, o) = match e {
                Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => (false, o),
                Ok(WatchEvent::Deleted(o)) => (true, o),
                Ok(_) => continue,
                Err(e) => {
                    eprintln!("watch {tag}: {e}");
                    break;
                }
            };
            log.lock().unwrap().push(Seen {
                at: t0.elapsed(),
                tag,
                deleted,
                object: serde_json::to_value(&o).unwrap(),
            });
        }
    });
}

/// The CertificateSigningRequests seen on a cluster (liqo-auth deletes them once signed, so a
/// count of the live ones shows nothing): watched from now on.
async fn csr_watch(client: &Client) -> Log {
    let log: Log = Arc::default();
    watch(
        Api::<CertificateSigningRequest>::all(client.clone()),
        "csr",
        log.clone(),
        Instant::now(),
    )
    .await;
    log
}

/// How many distinct objects a log saw.
fn distinct(log: &Log) -> usize {
    let seen = log.lock().unwrap();
    let uids: std::collections::BTreeSet<String> = seen
        .iter()
        .filter_map(|s| s.object["metadata"]["uid"].as_str().map(str::to_owned))
        .collect();
    uids.len()
}

/// When a watched object first matched.
fn first(log: &[Seen], tags: &[&str], pred: impl Fn(&Seen) -> bool) -> Option<Duration> {
    log.iter()
        .filter(|s| tags.contains(&s.tag) && pred(s))
        .map(|s| s.at)
        .min()
}

fn outgoing(s: &Seen) -> Option<S> {
    let fc: ForeignCluster = serde_json::from_value(s.object.clone()).ok()?;
    Some(fc.status.unwrap_or_default().condition(T::OutgoingPeering))
}

/// RR and RO (sources and copies) in the tenant namespaces of a pair: (rome's RRs, rome's ROs,
/// milan's RRs, milan's ROs) by name.
async fn sharing_objects(
    a: &Client,
    a_ns: &str,
    b: &Client,
    b_ns: &str,
) -> Result<[Vec<String>; 4], String> {
    let lp = ListParams::default();
    Ok([
        names_of(Api::<ResourceRequest>::namespaced(a.clone(), a_ns), &lp).await?,
        names_of(Api::<ResourceOffer>::namespaced(a.clone(), a_ns), &lp).await?,
        names_of(Api::<ResourceRequest>::namespaced(b.clone(), b_ns), &lp).await?,
        names_of(Api::<ResourceOffer>::namespaced(b.clone(), b_ns), &lp).await?,
    ])
}

/// The acceptance 6 (control-plane.md §1.7): `liqoctl unpeer out-of-band milan` on
/// rome withdraws the ResourceRequest, the ResourceOffer and the outgoing/incoming roles on
/// both sides in the §1.7 order, keeps the ForeignCluster (`OutgoingPeering=None`) and the
/// tenant namespaces; peering again reuses rome's identity (same Secret, no second CSR on
/// milan); with both directions peered, unpeering one leaves the other Established.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpeer_tears_down_in_order_keeps_the_identity_and_the_reverse_direction() {
    let lab = Lab::up(2).await;
    let (rome, milan) = (lab.client("rome").await, lab.client("milan").await);
    let (rome_id, milan_id) = (lab.id("rome"), lab.id("milan"));
    // rome's tenant namespace for milan, milan's for rome.
    let (rome_ns, milan_ns) = (lab.tenant("milan"), lab.tenant("rome"));

    let started = Instant::now();
    let command = lab.peer("rome", "milan");
    eventually(WAIT, "rome -> milan Established", || {
        fc_is(
            &rome,
            &milan_id,
            &[
                (T::AuthenticationStatus, S::Established),
                (T::OutgoingPeering, S::Established),
            ],
        )
    })
    .await;
    eprintln!("peered in {:.1} s", started.elapsed().as_secs_f64());
    eventually(WAIT, "milan sees rome's incoming peering", || {
        fc_is(&milan, &rome_id, &[(T::IncomingPeering, S::Established)])
    })
    .await;
    let identity = identities(&rome, &rome_ns, &milan_id).await.unwrap();
    assert_eq!(identity.len(), 1, "{identity:?}");
    let filed = csr_watch(&milan).await;
    let filed_before = distinct(&filed);
    let objs = sharing_objects(&rome, &rome_ns, &milan, &milan_ns)
        .await
        .unwrap();
    assert_eq!(
        objs,
        [
            vec!["rome".to_owned()],
            vec!["milan".to_owned()],
            vec!["rome".to_owned()],
            vec!["milan".to_owned()]
        ],
        "RR/RO on rome, RR/RO on milan"
    );
    // While peered: outgoing bound on rome (milan may write offers), incoming on milan.
    assert_eq!(
        peering_bindings(&rome, &rome_ns, RoleSet::Outgoing)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        peering_bindings(&milan, &milan_ns, RoleSet::Incoming)
            .await
            .unwrap()
            .len(),
        1
    );

    // Watch the objects of both sides, then unpeer.
    let log: Log = Arc::default();
    let t0 = Instant::now();
    watch(
        Api::<ResourceRequest>::namespaced(rome.clone(), &rome_ns),
        "rr@rome",
        log.clone(),
        t0,
    )
    .await;
    watch(
        Api::<ResourceRequest>::namespaced(milan.clone(), &milan_ns),
        "rr@milan",
        log.clone(),
        t0,
    )
    .await;
    watch(
        Api::<ResourceOffer>::namespaced(milan.clone(), &milan_ns),
        "ro@milan",
        log.clone(),
        t0,
    )
    .await;
    watch(
        Api::<ResourceOffer>::namespaced(rome.clone(), &rome_ns),
        "ro@rome",
        log.clone(),
        t0,
    )
    .await;
    watch(
        Api::<ForeignCluster>::all(rome.clone()),
        "fc@rome",
        log.clone(),
        t0,
    )
    .await;
    let unpeer_at = t0.elapsed();
    let out = lab.liqoctl(
        "rome",
        &["unpeer", "out-of-band", "milan", "--timeout", "60s"],
    );
    let unpeered_in = t0.elapsed() - unpeer_at;
    assert!(out.status.success(), "{}", text(&out));
    eprintln!(
        "liqoctl unpeer returned in {:.1} s: {}",
        unpeered_in.as_secs_f64(),
        text(&out)
    );

    // Both sides clean (the copies too), the roles downgraded, the rest kept.
    eventually(
        WAIT,
        "RR, RO and the peering roles gone on both sides",
        || async {
            let objs = sharing_objects(&rome, &rome_ns, &milan, &milan_ns).await?;
            if objs.iter().any(|v| !v.is_empty()) {
                return Err(format!(
                    "left (rr@rome, ro@rome, rr@milan, ro@milan): {objs:?}"
                ));
            }
            for (c, ns, side) in [(&rome, &rome_ns, "rome"), (&milan, &milan_ns, "milan")] {
                for set in [RoleSet::Outgoing, RoleSet::Incoming] {
                    let b = peering_bindings(c, ns, set).await?;
                    if !b.is_empty() {
                        return Err(format!("{side}: {set:?} still bound: {b:?}"));
                    }
                }
            }
            Ok(())
        },
    )
    .await;
    // Until the watches delivered the last events (the API already shows the end state).
    let delivered = Instant::now() + Duration::from_secs(WAIT);
    let seen = loop {
        let seen = log.lock().unwrap().clone();
        let gone = |tag: &str| first(&seen, &[tag], |s| s.deleted).is_some();
        let none = first(&seen, &["fc@rome"], |s| {
            s.at > unpeer_at && outgoing(s) == Some(S::None)
        });
        let all = ["rr@rome", "rr@milan", "ro@rome", "ro@milan"]
            .into_iter()
            .all(gone);
        if (all && none.is_some()) || Instant::now() > delivered {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let at = |d: Option<Duration>| d.map(|d| format!("{:.2}", d.as_secs_f64()));
    let rr_withdrawn = first(&seen, &["rr@rome", "rr@milan"], |s| {
        !s.deleted && !s.object["spec"]["withdrawalTimestamp"].is_null()
    });
    let disconnecting = first(&seen, &["fc@rome"], |s| {
        outgoing(s) == Some(S::Disconnecting)
    });
    let ro_withdrawn = first(&seen, &["ro@milan", "ro@rome"], |s| {
        !s.deleted && !s.object["spec"]["withdrawalTimestamp"].is_null()
    });
    let vk_none = first(&seen, &["ro@milan", "ro@rome"], |s| {
        !s.deleted
            && !s.object["spec"]["withdrawalTimestamp"].is_null()
            && s.object["status"]["virtualKubeletStatus"] == "None"
    });
    let ro_deleted = first(&seen, &["ro@milan"], |s| s.deleted);
    // "P deletes the RO" (§1.7 step 6) is the delete request: the object itself stays until
    // the replicator's finalizer is released, after its copy at rome is gone, and that may come
    // after rome already acted on the offer's withdrawal.
    let ro_delete = first(&seen, &["ro@milan"], |s| {
        s.deleted || !s.object["metadata"]["deletionTimestamp"].is_null()
    });
    let ro_copy_deleted = first(&seen, &["ro@rome"], |s| s.deleted);
    let offer_withdrawn = first(&seen, &["rr@rome", "rr@milan"], |s| {
        !s.object["status"]["offerWithdrawalTimestamp"].is_null()
    });
    let rr_delete = first(&seen, &["rr@rome"], |s| {
        !s.object["metadata"]["deletionTimestamp"].is_null()
    });
    let rr_deleted = first(&seen, &["rr@rome"], |s| s.deleted);
    let rr_copy_deleted = first(&seen, &["rr@milan"], |s| s.deleted);
    let none = first(&seen, &["fc@rome"], |s| {
        s.at > unpeer_at && outgoing(s) == Some(S::None)
    });
    let timeline = [
        ("unpeer started", Some(unpeer_at)),
        ("RR withdrawal stamped", rr_withdrawn),
        ("OutgoingPeering Disconnecting", disconnecting),
        ("RO withdrawal stamped", ro_withdrawn),
        ("RO virtualKubeletStatus None", vk_none),
        ("RO deletion requested (milan)", ro_delete),
        ("RO deleted (milan)", ro_deleted),
        ("RO copy deleted (rome)", ro_copy_deleted),
        ("RR offerWithdrawalTimestamp", offer_withdrawn),
        ("RR deletion requested (rome)", rr_delete),
        ("RR deleted (rome)", rr_deleted),
        ("RR copy deleted (milan)", rr_copy_deleted),
        ("OutgoingPeering None", none),
    ];
    for (what, t) in &timeline {
        eprintln!("{:>8} s  {what}", at(*t).unwrap_or_else(|| "never".into()));
    }
    let order = [
        ("RR withdrawal stamped", rr_withdrawn),
        ("RO withdrawal stamped", ro_withdrawn),
        ("RO virtualKubeletStatus None", vk_none),
        ("RO deletion requested (milan)", ro_delete),
        ("RR deletion requested (rome)", rr_delete),
        ("OutgoingPeering None", none),
    ];
    let missing: Vec<&str> = order
        .iter()
        .filter(|(_, t)| t.is_none())
        .map(|(w, _)| *w)
        .collect();
    assert!(
        missing.is_empty(),
        "steps never seen: {missing:?}: {timeline:?}"
    );
    for w in order.windows(2) {
        assert!(
            w[0].1 <= w[1].1,
            "{} after {}: {timeline:?}",
            w[0].0,
            w[1].0
        );
    }
    assert!(rr_withdrawn > Some(unpeer_at), "{timeline:?}");
    // Both gone in the end (the RR holds the replicator's finalizer until its copy is gone).
    assert!(rr_deleted.is_some() && rr_copy_deleted.is_some() && ro_copy_deleted.is_some());
    // The outgoing condition after the unpeer, as it moved: it ends None and never leaves it.
    let mut moves: Vec<(Duration, S)> = Vec::new();
    for s in seen
        .iter()
        .filter(|s| s.tag == "fc@rome" && s.at > unpeer_at)
    {
        let st = outgoing(s).unwrap_or(S::None);
        if moves.last().map(|m| m.1) != Some(st) {
            moves.push((s.at, st));
        }
    }
    eprintln!("OutgoingPeering after the unpeer: {moves:?}");
    assert_eq!(moves.last().map(|m| m.1), Some(S::None), "{moves:?}");
    // Disconnecting until the RR is gone, then None for good: `liqoctl unpeer` returns only
    // once the teardown is over.
    let k = moves.iter().position(|m| m.1 == S::None).unwrap();
    assert_eq!(k + 1, moves.len(), "OutgoingPeering left None: {moves:?}");
    assert!(
        rr_deleted <= none,
        "OutgoingPeering None ({none:?}) before rome's RR was gone ({rr_deleted:?})"
    );

    // Kept: rome's ForeignCluster (OutgoingPeering None, still authenticated), both tenant
    // namespaces, the basic roles, rome's identity.
    fc_is(
        &rome,
        &milan_id,
        &[
            (T::OutgoingPeering, S::None),
            (T::AuthenticationStatus, S::Established),
        ],
    )
    .await
    .unwrap();
    for (c, ns, side) in [(&rome, &rome_ns, "rome"), (&milan, &milan_ns, "milan")] {
        assert!(
            Api::<Namespace>::all(c.clone())
                .get_opt(ns)
                .await
                .unwrap()
                .is_some(),
            "{side}: tenant namespace {ns} gone"
        );
        assert_eq!(
            peering_bindings(c, ns, RoleSet::Basic).await.unwrap().len(),
            1,
            "{side}: basic role"
        );
    }
    eprintln!(
        "milan's ForeignCluster for rome after the unpeer: {:?}",
        fc_of(&milan, &rome_id)
            .await
            .unwrap()
            .map(|f| f.status.unwrap_or_default().peering_conditions)
    );

    // Peering again (the same command) reuses the identity.
    let started = Instant::now();
    let out = lab.bash("rome", &command);
    assert!(out.status.success(), "{}", text(&out));
    eventually(WAIT, "rome -> milan Established again", || {
        fc_is(&rome, &milan_id, &[(T::OutgoingPeering, S::Established)])
    })
    .await;
    eprintln!("peered again in {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(
        identities(&rome, &rome_ns, &milan_id).await.unwrap(),
        identity,
        "rome's identity for milan replaced"
    );
    assert_eq!(distinct(&filed), filed_before, "a second CSR on milan");

    // Both ways: milan peers with rome too.
    lab.peer("milan", "rome");
    let both = [
        (T::OutgoingPeering, S::Established),
        (T::IncomingPeering, S::Established),
    ];
    eventually(WAIT, "bidirectional", || async {
        fc_is(&rome, &milan_id, &both).await?;
        fc_is(&milan, &rome_id, &both).await
    })
    .await;

    // Unpeer rome -> milan: milan -> rome stays.
    let out = lab.liqoctl(
        "rome",
        &["unpeer", "out-of-band", "milan", "--timeout", "60s"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let reverse = [
        (T::OutgoingPeering, S::None),
        (T::IncomingPeering, S::Established),
    ];
    eventually(WAIT, "rome -> milan gone", || async {
        let [rr_rome, _, _, ro_milan] = sharing_objects(&rome, &rome_ns, &milan, &milan_ns).await?;
        // rome's RR (named rome) and milan's offer to rome (named milan) go; milan's RR
        // (named milan) and rome's offer to milan (named rome) stay.
        if rr_rome != ["milan"] || ro_milan != ["rome"] {
            return Err(format!("rr@rome {rr_rome:?}, ro@milan {ro_milan:?}"));
        }
        fc_is(&rome, &milan_id, &reverse).await?;
        fc_is(
            &milan,
            &rome_id,
            &[
                (T::OutgoingPeering, S::Established),
                (T::IncomingPeering, S::None),
            ],
        )
        .await
    })
    .await;
    // And it holds.
    tokio::time::sleep(Duration::from_secs(5)).await;
    fc_is(&rome, &milan_id, &reverse).await.unwrap();
    fc_is(&milan, &rome_id, &[(T::OutgoingPeering, S::Established)])
        .await
        .unwrap();
    assert_eq!(
        peering_bindings(&rome, &rome_ns, RoleSet::Incoming)
            .await
            .unwrap()
            .len(),
        1,
        "rome still provides to milan"
    );
    lab.done().await;
}

/// The acceptance 7: rome, milan and turin peered in a full mesh with the generated
/// commands (each pair both ways): every ForeignCluster Established both ways, one
/// ForeignCluster per peer, one ResourceRequest and one ResourceOffer per direction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clusters_in_a_full_mesh_are_all_established() {
    let lab = Lab::up(3).await;
    let names = ["rome", "milan", "turin"];
    let mut clients = BTreeMap::new();
    for n in names {
        clients.insert(n, lab.client(n).await);
    }
    let started = Instant::now();
    for a in names {
        for b in names {
            if a != b {
                lab.peer(a, b);
            }
        }
    }
    let all = [
        (T::AuthenticationStatus, S::Established),
        (T::OutgoingPeering, S::Established),
        (T::IncomingPeering, S::Established),
    ];
    eventually(2 * WAIT, "full mesh Established", || async {
        for a in names {
            for b in names {
                if a != b {
                    fc_is(&clients[a], &lab.id(b), &all)
                        .await
                        .map_err(|e| format!("on {a}: {e}"))?;
                }
            }
        }
        Ok(())
    })
    .await;
    eprintln!("full mesh in {:.1} s", started.elapsed().as_secs_f64());

    let lp = ListParams::default();
    for a in names {
        let c = &clients[a];
        let fcs = Api::<ForeignCluster>::all(c.clone())
            .list(&lp)
            .await
            .unwrap()
            .items;
        assert_eq!(
            fcs.len(),
            2,
            "{a}: {:?}",
            fcs.iter().map(|f| &f.metadata.name).collect::<Vec<_>>()
        );
        let tenants = names_of(
            Api::<Namespace>::all(c.clone()),
            &ListParams::default().labels(&format!("{}=true", labels::TENANT_NAMESPACE)),
        )
        .await
        .unwrap();
        assert_eq!(tenants.len(), 2, "{a}: {tenants:?}");
        assert_eq!(
            names_of(Api::<ResourceRequest>::all(c.clone()), &lp)
                .await
                .unwrap()
                .len(),
            4,
            "{a}: two sent, two received"
        );
        assert_eq!(
            names_of(Api::<ResourceOffer>::all(c.clone()), &lp)
                .await
                .unwrap()
                .len(),
            4,
            "{a}: two sent, two received"
        );
        for b in names.into_iter().filter(|b| *b != a) {
            let ns = lab.tenant(b);
            let mut rr = names_of(Api::<ResourceRequest>::namespaced(c.clone(), &ns), &lp)
                .await
                .unwrap();
            let mut ro = names_of(Api::<ResourceOffer>::namespaced(c.clone(), &ns), &lp)
                .await
                .unwrap();
            rr.sort();
            ro.sort();
            let mut want = vec![a.to_owned(), b.to_owned()];
            want.sort();
            // Ours (named a) and the copy of the peer's (named b).
            assert_eq!(rr, want, "{a}: ResourceRequests in {ns}");
            assert_eq!(ro, want, "{a}: ResourceOffers in {ns}");
            let ids = identities(c, &ns, &lab.id(b)).await.unwrap();
            assert_eq!(ids.len(), 1, "{a}: identities for {b}: {ids:?}");
        }
    }
    lab.done().await;
}
