//! The acceptance 5 on the harness's real clusters: kill -9 the controller-manager of
//! one cluster and restart the kube-apiserver of the other in the middle of an out-of-band
//! peering (rome -> milan); the peering converges to the same state as a clean one, with no
//! duplicate objects.
//!
//! Every run takes a fingerprint of the Liqo objects of both clusters (kind, namespace, name and
//! key fields, cluster IDs and URLs replaced by the cluster's name, generated suffixes by `*`)
//! and compares it with a clean peering's, as a multiset: a duplicate shows as an extra entry.
//!
//! Needs the components built next to this test (`cargo build -p ipam -p liqo-auth -p
//! liqo-controller-manager -p liqoctl`) or in `$LIQO_BIN_DIR`.

use crate::chaos;

use std::time::{Duration, Instant};

use control::{
    api::{
        discovery::ResourceRequest,
        discovery::{ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T},
        sharing::{OfferPhase, ResourceOffer},
    },
    consts::labels,
};
use e2e::{
    k8s::{self, Clusters},
    liqo::{self, Liqo},
};
use k8s_openapi::api::{certificates::v1::CertificateSigningRequest, core::v1::Secret};
use kube::{Api, Client, api::ListParams};

use chaos::{fingerprint::*, *};

/// The reference fingerprint, taken once for the binary: each chaos test compares with it.
static REFERENCE: tokio::sync::OnceCell<Vec<Entry>> = tokio::sync::OnceCell::const_new();

/// The reference: a clean peering's fingerprint, on clusters of its own (stopped once taken).
/// The first chaos test to ask takes it; the others wait for it (a failed attempt leaves it
/// to the next). The same every time, as the tests' assertions require.
async fn reference() -> Vec<Entry> {
    REFERENCE.get_or_init(clean_run).await.clone()
}

/// A clean peering: the reference fingerprint.
async fn clean_run() -> Vec<Entry> {
    let (set, installed, _guard) = lab().await;
    let rome = get(&set, "rome");
    let command = peer_command(&set, &installed);
    let t = Instant::now();
    let child = start_peer(&rome, &installed, &command);
    let how = finish_peer(child, &rome, &installed, &command).await;
    let took = converged(&set, &installed).await;
    eprintln!(
        "[clean] {how}\n[clean] converged {:.1} s after liqoctl returned ({:.1} s in all)",
        took.as_secs_f64(),
        t.elapsed().as_secs_f64()
    );
    settle(&set, &installed).await
}

/// The fingerprint once it stops changing (two equal readings 2 s apart, within 30 s).
async fn settle(set: &Clusters, installed: &Liqo) -> Vec<Entry> {
    let mut last = fingerprint(set, installed).await;
    let t = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = fingerprint(set, installed).await;
        if now == last {
            return now;
        }
        assert!(
            t.elapsed().as_secs() < 30,
            "the objects keep changing:\n{}",
            diff(&last, &now)
        );
        last = now;
    }
}

/// Where the chaos strikes.
#[derive(Debug, Clone, Copy)]
enum Moment {
    /// Rome has authenticated with milan (or made its ResourceRequest): rome's
    /// controller-manager is killed, milan's apiserver restarted.
    RomeAuthenticated,
    /// Rome has made its identity Secret (key and CSR) but not stored the certificate yet:
    /// rome's controller-manager is killed, milan's apiserver (which signs) restarted.
    RomeRequestingIdentity,
    /// Milan's liqo-auth has a CertificateSigningRequest for rome in flight (or, if that
    /// window is missed, rome has authenticated): as [`Moment::RomeRequestingIdentity`].
    MilanSigning,
    /// Milan has made its ResourceOffer, rome has not accepted it yet: milan's
    /// controller-manager is killed, rome's apiserver restarted.
    MilanOffered,
}

/// What rome and milan show now, for the report.
async fn peering_state(rome: &Client, milan: &Client, installed: &Liqo) -> String {
    let (rome_id, milan_id) = ids(installed);
    let conds = |f: Option<ForeignCluster>| {
        f.map(|f| {
            let st = f.status.unwrap_or_default();
            format!(
                "auth {:?}, outgoing {:?}, incoming {:?}",
                st.condition(T::AuthenticationStatus),
                st.condition(T::OutgoingPeering),
                st.condition(T::IncomingPeering)
            )
        })
    };
    let phases = |l: Vec<ResourceOffer>| -> Vec<String> {
        l.into_iter()
            .map(|r| format!("{:?}", r.status.map(|s| s.phase)))
            .collect()
    };
    let ro = |c: &Client| Api::<ResourceOffer>::all(c.clone());
    let rr = |c: &Client| Api::<ResourceRequest>::all(c.clone());
    let lp = ListParams::default();
    let identities: Vec<String> = Api::<Secret>::all(rome.clone())
        .list(&ListParams::default().labels(labels::LOCAL_IDENTITY))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .map(|s| {
            let l = s.metadata.labels.unwrap_or_default();
            format!(
                "certificate-available={:?}",
                l.get(labels::CERTIFICATE_AVAILABLE)
            )
        })
        .collect();
    let csrs = Api::<CertificateSigningRequest>::all(milan.clone())
        .list(&lp)
        .await
        .map_or(0, |l| l.items.len());
    format!(
        "rome identities {identities:?}; milan CSRs {csrs}; \
         rome FC(milan): {:?}; rome RRs {}; rome ROs {:?} | milan FC(rome): {:?}; milan RRs {}; milan ROs {:?}",
        conds(fc_for(rome, &milan_id).await),
        rr(rome).list(&lp).await.map_or(0, |l| l.items.len()),
        phases(
            ro(rome)
                .list(&lp)
                .await
                .map(|l| l.items)
                .unwrap_or_default()
        ),
        conds(fc_for(milan, &rome_id).await),
        rr(milan).list(&lp).await.map_or(0, |l| l.items.len()),
        phases(
            ro(milan)
                .list(&lp)
                .await
                .map(|l| l.items)
                .unwrap_or_default()
        ),
    )
}

/// Whether `moment` has come.
async fn reached(moment: Moment, rome: &Client, milan: &Client, milan_id: &str) -> bool {
    let lp = ListParams::default();
    match moment {
        Moment::RomeAuthenticated => {
            let auth = fc_for(rome, milan_id).await.is_some_and(|f| {
                f.status
                    .unwrap_or_default()
                    .condition(T::AuthenticationStatus)
                    == S::Established
            });
            auth || Api::<ResourceRequest>::all(rome.clone())
                .list(&lp)
                .await
                .is_ok_and(|l| !l.items.is_empty())
        }
        Moment::RomeRequestingIdentity => Api::<Secret>::all(rome.clone())
            .list(&ListParams::default().labels(labels::LOCAL_IDENTITY))
            .await
            .is_ok_and(|l| !l.items.is_empty()),
        Moment::MilanSigning => {
            Api::<CertificateSigningRequest>::all(milan.clone())
                .list(&lp)
                .await
                .is_ok_and(|l| !l.items.is_empty())
                || fc_for(rome, milan_id).await.is_some_and(|f| {
                    f.status
                        .unwrap_or_default()
                        .condition(T::AuthenticationStatus)
                        == S::Established
                })
        }
        Moment::MilanOffered => Api::<ResourceOffer>::all(milan.clone())
            .list(&lp)
            .await
            .is_ok_and(|l| !l.items.is_empty()),
    }
}

/// Whether the peering is still short of its end at `moment` (checked after the kill: the
/// later the check, the likelier the end, so a true answer holds for the kill too): rome's
/// OutgoingPeering is not Established, and at [`Moment::MilanOffered`] rome has accepted no
/// ResourceOffer.
async fn in_the_middle(moment: Moment, rome: &Client, milan_id: &str) -> bool {
    let outgoing = fc_for(rome, milan_id)
        .await
        .map(|f| f.status.unwrap_or_default().condition(T::OutgoingPeering));
    let accepted = Api::<ResourceOffer>::all(rome.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .any(|r| r.status.is_some_and(|s| s.phase == OfferPhase::Accepted));
    outgoing != Some(S::Established) && !(matches!(moment, Moment::MilanOffered) && accepted)
}

/// A peering with the chaos of `moment`, compared with a clean peering on clusters of its own
/// ([`reference`]).
async fn chaos(moment: Moment) {
    let reference = reference().await;
    assert_no_duplicates(&reference);

    let (mut set, mut installed, _guard) = lab().await;
    let (rome, milan) = (get(&set, "rome"), get(&set, "milan"));
    let (rc, mc) = (rome.client().await.unwrap(), milan.client().await.unwrap());
    let milan_id = ids(&installed).1;
    let (victim, restarted) = match moment {
        Moment::RomeAuthenticated | Moment::RomeRequestingIdentity | Moment::MilanSigning => {
            ("rome", "milan")
        }
        Moment::MilanOffered => ("milan", "rome"),
    };
    let command = peer_command(&set, &installed);
    let t0 = Instant::now();
    let child = start_peer(&rome, &installed, &command);
    let waited = until(60, &format!("{moment:?}"), || {
        let (rc, mc, id) = (rc.clone(), mc.clone(), milan_id.clone());
        async move { reached(moment, &rc, &mc, &id).await }
    })
    .await;
    let killed = liqo::kill9_component(&installed, victim, MANAGER).unwrap();
    let at_kill = peering_state(&rc, &mc, &installed).await;
    eprintln!(
        "[{moment:?}] {:.2} s after liqoctl started: kill -9 {victim}'s {MANAGER} (pid {}); state: {at_kill}",
        waited.as_secs_f64(),
        killed.was.proc.pid
    );
    assert!(
        in_the_middle(moment, &rc, &milan_id).await,
        "[{moment:?}] the peering went past the moment before the kill: {at_kill}"
    );
    let r = set.restart_apiserver(restarted).await.unwrap();
    eprintln!(
        "[{moment:?}] {restarted}'s kube-apiserver restarted (pid {} -> {}), unavailable {:.1} s",
        r.old.pid,
        r.new.pid,
        r.unavailable.as_secs_f64()
    );
    let recorded = k8s::load(&set.prefix).unwrap();
    let procs = &recorded.get(restarted).unwrap().procs;
    assert!(
        procs.contains(&r.new) && !procs.contains(&r.old),
        "state.json records the new kube-apiserver: {procs:?}"
    );
    let (now, took) = liqo::restart_component(&set, &mut installed, killed)
        .await
        .unwrap();
    eprintln!(
        "[{moment:?}] {victim}'s {MANAGER} restarted (pid {}) and serving in {:.1} s",
        now.proc.pid,
        took.as_secs_f64()
    );
    assert_eq!(
        liqo::load(&set)
            .unwrap()
            .unwrap()
            .get(victim)
            .unwrap()
            .get(MANAGER),
        Some(&now),
        "liqo.json records the new process"
    );
    let how = finish_peer(child, &rome, &installed, &command).await;
    eprintln!("[{moment:?}] {how}");
    let conv = converged(&set, &installed).await;
    eprintln!(
        "[{moment:?}] converged {:.1} s after liqoctl ended, {:.1} s after it started",
        conv.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    let fp = settle(&set, &installed).await;
    assert_no_duplicates(&fp);
    assert!(
        fp == reference,
        "[{moment:?}] not the state of a clean peering (- clean only, + chaos only):\n{}",
        diff(&reference, &fp)
    );
}

/// Rome's controller-manager killed and milan's apiserver restarted once rome has
/// authenticated with milan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_rome_manager_and_restart_milan_apiserver_after_authentication() {
    chaos(Moment::RomeAuthenticated).await;
}

/// Milan's controller-manager killed and rome's apiserver restarted once milan has offered
/// resources, before rome accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_milan_manager_and_restart_rome_apiserver_after_the_offer() {
    chaos(Moment::MilanOffered).await;
}

/// Rome's controller-manager killed and milan's apiserver restarted as soon as rome's identity
/// Secret exists (the certificate request to milan in flight or about to be).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_rome_manager_and_restart_milan_apiserver_during_the_identity_request() {
    chaos(Moment::RomeRequestingIdentity).await;
}

/// Rome's controller-manager killed and milan's apiserver restarted while milan's
/// CertificateSigningRequest for rome exists (approved, being signed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_rome_manager_and_restart_milan_apiserver_while_milan_signs() {
    chaos(Moment::MilanSigning).await;
}

/// The checks themselves can fail: a second identity Secret (names normalized alike) is a
/// duplicate and shows in the diff; tenant namespace hashes are normalized.
#[test]
fn a_duplicate_fails_the_checks_and_shows_in_the_diff() {
    let e = |c: &str, k: &str, ns: &str, n: &str, key: &str| -> Entry {
        (c.into(), k.into(), ns.into(), n.into(), key.into())
    };
    let identity = e(
        "rome",
        "Secret",
        "liqo-tenant-milan-*",
        "liqo-identity-*",
        &format!("{{\"labels\":{{\"{}\":\"true\"}}}}", labels::LOCAL_IDENTITY),
    );
    let mut fp = vec![
        e(
            "milan",
            "Secret",
            "liqo-tenant-rome-*",
            "liqo-remote-certificate",
            "{}",
        ),
        identity.clone(),
    ];
    for c in ["rome", "milan"] {
        for k in ["ResourceRequest", "ResourceOffer", "ForeignCluster"] {
            fp.push(e(c, k, "", "x", "{}"));
        }
    }
    fp.sort();
    assert_eq!(duplicates(&fp), Vec::<String>::new());
    let mut twice = fp.clone();
    twice.push(identity.clone());
    twice.sort();
    assert_eq!(duplicates(&twice), ["identity Secrets on rome: 2, want 1"]);
    assert_eq!(diff(&fp, &twice), format!("+ {identity:?}\n"));
    assert_eq!(
        tenant_namespaces("ns liqo-tenant-milan-995d4d, liqo-tenant-rome-91c341."),
        "ns liqo-tenant-milan-*, liqo-tenant-rome-*."
    );
}
