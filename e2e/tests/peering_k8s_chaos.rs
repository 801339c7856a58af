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

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use control::{
    api::{
        discovery::ResourceRequest,
        discovery::{ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T},
        sharing::{OfferPhase, ResourceOffer},
    },
    consts::{labels, objects},
};
use e2e::{
    k8s::{self, Cluster, Clusters, Options},
    liqo::{self, Liqo},
};
use k8s_openapi::api::{
    certificates::v1::CertificateSigningRequest,
    core::v1::{Namespace, Secret},
    rbac::v1::RoleBinding,
};
use kube::{Api, Client, Resource, api::ListParams};
use serde_json::Value;

static NEXT: AtomicUsize = AtomicUsize::new(0);
const MANAGER: &str = "liqo-controller-manager";
/// How long a peering may take to converge after the chaos (2 shared cores).
const CONVERGE_SECS: u64 = 90;

/// Tears a set down even when the test fails.
struct DownOnDrop(e2e::lab::Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        // Nothing to do about a failed teardown here; the test's own asserts report it.
        let _ = k8s::down(&self.0);
    }
}

fn options() -> Options {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Options {
        prefix: format!("cz{n}x{}", std::process::id() % 100_000)
            .parse()
            .unwrap(),
        clusters: 2,
        nodes: 1,
        overlapping: true,
    }
}

/// Two clusters with Liqo; the set is detached and torn down by the guard.
async fn lab() -> (Clusters, Liqo, DownOnDrop) {
    let t = Instant::now();
    let bins = k8s::binaries().unwrap();
    let set = Clusters::up(&bins, &options()).await.unwrap();
    let guard = DownOnDrop(set.prefix.clone());
    let installed = liqo::install(&set, &bins, &liqo::Options::default())
        .await
        .unwrap();
    eprintln!(
        "[{}] clusters and Liqo up in {:.1} s",
        set.prefix,
        t.elapsed().as_secs_f64()
    );
    (set, installed, guard)
}

fn get(set: &Clusters, name: &str) -> Cluster {
    set.get(name).unwrap().clone()
}

/// The command milan's liqoctl generates (`liqoctl peer out-of-band milan ...`).
fn peer_command(set: &Clusters, installed: &Liqo) -> String {
    let out = std::process::Command::new(installed.bin.join("liqoctl"))
        .args([
            "--context",
            "milan",
            "generate",
            "peer-command",
            "--only-command",
        ])
        .env("KUBECONFIG", &set.kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cmd = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        cmd.starts_with("liqoctl peer out-of-band milan "),
        "no command"
    );
    cmd
}

/// Runs the peer command on rome (its own kubeconfig) in the background.
fn start_peer(rome: &Cluster, installed: &Liqo, command: &str) -> tokio::process::Child {
    let path = format!(
        "{}:{}",
        installed.bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    tokio::process::Command::new("bash")
        .args(["-c", command])
        .env("KUBECONFIG", &rome.kubeconfig)
        .env("PATH", path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Waits for liqoctl; if it failed (its apiserver went away, say), runs it once more (it is
/// idempotent). Returns what happened, for the report.
async fn finish_peer(
    child: tokio::process::Child,
    rome: &Cluster,
    installed: &Liqo,
    command: &str,
) -> String {
    let t = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(150), child.wait_with_output())
        .await
        .expect("liqoctl peer did not end within 150 s")
        .unwrap();
    let first = format!(
        "first liqoctl: exit {:?} after {:.1} s more; stderr: {}",
        out.status.code(),
        t.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    if out.status.success() {
        return first;
    }
    let again = start_peer(rome, installed, command)
        .wait_with_output()
        .await
        .unwrap();
    assert!(
        again.status.success(),
        "{first}\nrerun failed: {}{}",
        String::from_utf8_lossy(&again.stdout),
        String::from_utf8_lossy(&again.stderr)
    );
    format!("{first}\nrerun succeeded")
}

async fn fc_for(client: &Client, id: &str) -> Option<ForeignCluster> {
    Api::<ForeignCluster>::all(client.clone())
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .find(|f| f.spec.cluster_identity.cluster_id.as_str() == id)
}

/// Polls `f` every 20 ms until it is true or `secs` pass (then panics).
async fn until<F, Fut>(secs: u64, what: &str, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let t = Instant::now();
    while !f().await {
        assert!(t.elapsed().as_secs() < secs, "{what}: not after {secs} s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    t.elapsed()
}

/// Waits until rome's outgoing and milan's incoming peering are Established.
async fn converged(set: &Clusters, installed: &Liqo) -> Duration {
    let (rome, milan) = (
        get(set, "rome").client().await.unwrap(),
        get(set, "milan").client().await.unwrap(),
    );
    let (rome_id, milan_id) = ids(installed);
    let t = Instant::now();
    let mut last;
    loop {
        let out = fc_for(&rome, &milan_id).await.map(|f| {
            let st = f.status.unwrap_or_default();
            (
                st.condition(T::AuthenticationStatus),
                st.condition(T::OutgoingPeering),
            )
        });
        let inc = fc_for(&milan, &rome_id)
            .await
            .map(|f| f.status.unwrap_or_default().condition(T::IncomingPeering));
        if out == Some((S::Established, S::Established)) && inc == Some(S::Established) {
            return t.elapsed();
        }
        last = format!("rome (auth, outgoing) {out:?}, milan incoming {inc:?}");
        if t.elapsed().as_secs() > CONVERGE_SECS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("not converged after {CONVERGE_SECS} s: {last}");
}

fn ids(installed: &Liqo) -> (String, String) {
    (
        installed.get("rome").unwrap().cluster_id.clone(),
        installed.get("milan").unwrap().cluster_id.clone(),
    )
}

/// One entry of a fingerprint.
type Entry = (String, String, String, String, String);

/// Replaces what differs between runs (cluster IDs, URLs with ports) by the cluster's name.
fn normalizer(set: &Clusters, installed: &Liqo) -> impl Fn(&str) -> String {
    let mut subst: Vec<(String, String)> = Vec::new();
    for i in &installed.clusters {
        subst.push((i.cluster_id.clone(), format!("<{}-id>", i.cluster)));
        if let Some(u) = &i.auth_url {
            subst.push((u.clone(), format!("<{}-auth>", i.cluster)));
        }
        if let Some(c) = set.get(&i.cluster) {
            subst.push((c.server.clone(), format!("<{}-api>", i.cluster)));
        }
    }
    move |s: &str| {
        let mut s = s.to_owned();
        for (a, b) in &subst {
            s = s.replace(a, b);
        }
        s = tenant_namespaces(&s);
        if let Some(rest) = s.strip_prefix(objects::IDENTITY_GENERATE_NAME)
            && !rest.is_empty()
        {
            s = format!("{}*", objects::IDENTITY_GENERATE_NAME);
        }
        s
    }
}

/// `s` with the hash suffix of every tenant namespace name (`liqo-tenant-milan-995d4d`, made
/// from the cluster ID) replaced by `*`.
fn tenant_namespaces(s: &str) -> String {
    let p = objects::TENANT_NAMESPACE_PREFIX;
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find(p) {
        out.push_str(&rest[..at + p.len()]);
        rest = &rest[at + p.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        match rest[..end].rfind('-') {
            Some(dash) => out.push_str(&format!("{}*", &rest[..=dash])),
            None => out.push_str(&rest[..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `v` without timestamps, resource versions and other per-run keys, strings normalized.
fn clean(v: &Value, norm: &dyn Fn(&str) -> String) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| {
                    let k = k.to_ascii_lowercase();
                    !(k.contains("time") || k.contains("resourceversion") || k == "uid")
                })
                .map(|(k, v)| (norm(k), clean(v, norm)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| clean(v, norm)).collect()),
        Value::String(s) => Value::String(norm(s)),
        other => other.clone(),
    }
}

async fn list<K>(client: &Client, ns: Option<&str>) -> Vec<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let api: Api<K> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    api.list(&ListParams::default()).await.unwrap().items
}

/// The Liqo objects of cluster `name`, as a sorted multiset of (cluster, kind, namespace,
/// name, key fields).
async fn fingerprint_of(set: &Clusters, installed: &Liqo, name: &str) -> Vec<Entry> {
    let norm = normalizer(set, installed);
    let client = get(set, name).client().await.unwrap();
    let mut out: Vec<Entry> = Vec::new();
    let mut push = |kind: &str, ns: Option<String>, n: Option<String>, key: Value| {
        out.push((
            name.to_owned(),
            kind.to_owned(),
            norm(ns.as_deref().unwrap_or("")),
            norm(n.as_deref().unwrap_or("")),
            clean(&key, &norm).to_string(),
        ));
    };
    for f in Api::<ForeignCluster>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        let st = f.status.clone().unwrap_or_default();
        let conds: Vec<String> = [
            T::OutgoingPeering,
            T::IncomingPeering,
            T::NetworkStatus,
            T::AuthenticationStatus,
        ]
        .iter()
        .map(|t| format!("{t:?}={:?}", st.condition(*t)))
        .collect();
        push(
            "ForeignCluster",
            None,
            f.metadata.name.clone(),
            serde_json::json!({"labels": f.metadata.labels, "spec": f.spec, "conditions": conds,
                "tenant": st.tenant_namespace}),
        );
    }
    for r in list::<ResourceRequest>(&client, None).await {
        push(
            "ResourceRequest",
            r.metadata.namespace.clone(),
            r.metadata.name.clone(),
            serde_json::json!({"labels": r.metadata.labels, "spec": r.spec, "status": r.status,
                "finalizers": r.metadata.finalizers}),
        );
    }
    for r in list::<ResourceOffer>(&client, None).await {
        push(
            "ResourceOffer",
            r.metadata.namespace.clone(),
            r.metadata.name.clone(),
            serde_json::json!({"labels": r.metadata.labels, "spec": r.spec, "status": r.status,
                "finalizers": r.metadata.finalizers}),
        );
    }
    let tenants: Vec<String> = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| {
            let name = n.metadata.name.clone()?;
            if !name.starts_with(objects::TENANT_NAMESPACE_PREFIX) {
                return None;
            }
            push(
                "Namespace",
                None,
                Some(name.clone()),
                serde_json::json!({"labels": n.metadata.labels}),
            );
            Some(name)
        })
        .collect();
    for ns in tenants.iter().map(String::as_str).chain([liqo::NAMESPACE]) {
        for s in list::<Secret>(&client, Some(ns)).await {
            let keys: Vec<String> = s.data.unwrap_or_default().into_keys().collect();
            push(
                "Secret",
                s.metadata.namespace.clone(),
                s.metadata.name.clone(),
                serde_json::json!({"labels": s.metadata.labels, "keys": keys, "type": s.type_}),
            );
        }
        for b in list::<RoleBinding>(&client, Some(ns)).await {
            push(
                "RoleBinding",
                b.metadata.namespace.clone(),
                b.metadata.name.clone(),
                serde_json::json!({"role": b.role_ref.name, "subjects": b.subjects}),
            );
        }
    }
    for c in Api::<CertificateSigningRequest>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        push(
            "CertificateSigningRequest",
            None,
            c.metadata.name.clone(),
            serde_json::json!({"labels": c.metadata.labels, "signer": c.spec.signer_name}),
        );
    }
    out.sort();
    out
}

async fn fingerprint(set: &Clusters, installed: &Liqo) -> Vec<Entry> {
    let mut all = fingerprint_of(set, installed, "rome").await;
    all.extend(fingerprint_of(set, installed, "milan").await);
    all
}

fn count(fp: &[Entry], cluster: &str, kind: &str, pred: impl Fn(&Entry) -> bool) -> usize {
    fp.iter()
        .filter(|e| e.0 == cluster && e.1 == kind && pred(e))
        .count()
}

/// The brief's explicit duplicate checks on a fingerprint of a converged peering.
fn assert_no_duplicates(fp: &[Entry]) {
    let bad = duplicates(fp);
    assert!(
        bad.is_empty(),
        "{}; the objects:\n{}",
        bad.join("; "),
        fp.iter()
            .map(|e| format!("{e:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// What is not there exactly once (or, for CSRs, not gone) in a converged peering.
fn duplicates(fp: &[Entry]) -> Vec<String> {
    let tenant = |e: &Entry| e.2.starts_with(objects::TENANT_NAMESPACE_PREFIX);
    let mut want = vec![
        (
            "identity Secrets on rome".to_owned(),
            count(fp, "rome", "Secret", |e| {
                tenant(e) && e.4.contains(labels::LOCAL_IDENTITY)
            }),
            1,
        ),
        (
            "liqo-remote-certificate Secrets on milan".to_owned(),
            count(fp, "milan", "Secret", |e| {
                e.3 == objects::REMOTE_CERTIFICATE_SECRET
            }),
            1,
        ),
        (
            "leftover CSRs on milan".to_owned(),
            count(fp, "milan", "CertificateSigningRequest", |_| true),
            0,
        ),
    ];
    for c in ["rome", "milan"] {
        for kind in ["ResourceRequest", "ResourceOffer", "ForeignCluster"] {
            want.push((format!("{kind}s on {c}"), count(fp, c, kind, |_| true), 1));
        }
    }
    let mut bindings: Vec<&Entry> = fp.iter().filter(|e| e.1 == "RoleBinding").collect();
    let n = bindings.len();
    bindings.dedup_by(|a, b| (&a.0, &a.2, &a.3) == (&b.0, &b.2, &b.3));
    want.push(("RoleBindings named twice".to_owned(), n - bindings.len(), 0));
    want.into_iter()
        .filter(|(_, got, want)| got != want)
        .map(|(what, got, want)| format!("{what}: {got}, want {want}"))
        .collect()
}

fn diff(want: &[Entry], got: &[Entry]) -> String {
    let mut keys: Vec<&Entry> = want.iter().chain(got).collect();
    keys.sort();
    keys.dedup();
    let mut out = String::new();
    for e in keys {
        let (w, g) = (
            want.iter().filter(|x| *x == e).count(),
            got.iter().filter(|x| *x == e).count(),
        );
        let (sign, n) = if w > g { ('-', w - g) } else { ('+', g - w) };
        for _ in 0..n {
            out.push_str(&format!("{sign} {e:?}\n"));
        }
    }
    out
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

/// A peering with the chaos of `moment`, compared with a clean peering on clusters of their own.
async fn chaos(moment: Moment) {
    let reference = clean_run().await;
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
