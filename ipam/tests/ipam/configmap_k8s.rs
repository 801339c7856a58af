//! `--store configmap` on a real API server (the `testkit::k8s` harness, one cluster for the
//! binary): `liqo-ipam serve` runs with the token of a ServiceAccount that the chart's rules
//! bind. Killed with SIGKILL at random moments during 100 remaps and restarted each time, it
//! keeps every acknowledged allocation, none overlapping; a stale second writer is refused with
//! the conflict and overwrites nothing; a ConfigMap that is not a state is refused at start and
//! left as it was. Each test works in its own namespace (its name prefix) on the shared cluster,
//! and the pool removes what it made (the whole cluster when the test fails).

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use ipam::{
    Config, Ipam, State, cluster_id,
    service::{Overrides, Service, ServiceError, client::Client, proto},
    store::{
        Store, StoreError,
        configmap::{ConfigMapStore, DATA_KEY, MANAGED_BY_LABEL, Target, VERSION_ANNOTATION},
    },
};
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, api::PostParams};

use crate::common::{
    self,
    k8s::{Leased, client_of, config_of, sandbox, spec, start},
};

const PEERS: usize = 100;

/// splitmix64: a reproducible sequence from the printed seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

fn seed() -> u64 {
    match std::env::var("LIQO_IPAM_KILL_SEED") {
        Ok(s) => s.parse().expect("LIQO_IPAM_KILL_SEED: a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    }
}

/// Acknowledged remaps (peer -> pod view, external view), and the errors seen (code, message).
#[derive(Default)]
struct Tally {
    acked: BTreeMap<String, (Ipv4Net, Ipv4Net)>,
    errors: Vec<(tonic::Code, String)>,
}

/// Remaps the pending peers one after the other until one fails (the server was killed): that
/// one goes back for the next round.
async fn remapper(mut c: Client, pending: Arc<Mutex<VecDeque<String>>>, tally: Arc<Mutex<Tally>>) {
    loop {
        let next = pending.lock().unwrap().pop_front();
        let Some(peer) = next else { break };
        let req = proto::RemapRequest {
            cluster_id: peer.clone(),
            pod_cidr: "10.200.0.0/16".into(),
            external_cidr: "10.70.0.0/16".into(),
        };
        match c.remap(req).await {
            Ok(r) => {
                let r = r.into_inner();
                let views = (
                    r.pod_view.parse().unwrap(),
                    r.external_view.parse().unwrap(),
                );
                let before = tally.lock().unwrap().acked.insert(peer, views);
                assert!(before.is_none_or(|b| b == views), "a peer's answer changed");
            }
            Err(status) => {
                pending.lock().unwrap().push_back(peer);
                let e = (status.code(), status.message().to_owned());
                tally.lock().unwrap().errors.push(e);
                break;
            }
        }
    }
}

fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(b) || b.contains(a)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_no_acknowledged_allocation() {
    let leased = Leased::take().await;
    let (ns, name) = ("ipam-cm-kill", "ipam-cm-kill-state");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = sandbox(&leased, ns, name, dir.path()).await;
    let seed = seed();
    println!("kill seed {seed} (LIQO_IPAM_KILL_SEED={seed} repeats the kill delays)");
    let mut rng = Rng(seed);
    let (port, metrics) = (common::free_port(), common::free_port());
    let url = format!("http://127.0.0.1:{port}");
    let spec = spec(&kubeconfig, ns, name, port, metrics);

    let pending = Arc::new(Mutex::new(
        (0..PEERS)
            .map(|i| format!("peer-{i:03}"))
            .collect::<VecDeque<_>>(),
    ));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let mut kills = 0;
    while !pending.lock().unwrap().is_empty() {
        assert!(kills < 300, "100 remaps not done after 300 restarts");
        let (mut child, client) = start(&spec, &url).await;
        // Four callers at once, so that the kill lands between saves, during one, or between a
        // save and its answer.
        let callers: Vec<_> = (0..4)
            .map(|_| tokio::spawn(remapper(client.clone(), pending.clone(), tally.clone())))
            .collect();
        tokio::time::sleep(Duration::from_millis(rng.below(150))).await;
        // Still running: only the kill stops it.
        if let Some(status) = child.exited().unwrap() {
            panic!("liqo-ipam exited with {status}:\n{}", child.tail(30));
        }
        child.kill().unwrap();
        kills += 1;
        for c in callers {
            c.await.unwrap();
        }
    }
    let took = started.elapsed();
    let tally = std::mem::take(&mut *tally.lock().unwrap());
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for (code, _) in &tally.errors {
        *codes.entry(format!("{code:?}")).or_default() += 1;
    }
    println!(
        "{} remaps acknowledged in {took:.1?} with {kills} kill -9s; calls cut: {codes:?}",
        tally.acked.len()
    );
    // A killed server cuts calls; it never refuses one (a store error would say so).
    let refused: Vec<_> = tally
        .errors
        .iter()
        .filter(|(code, msg)| {
            !matches!(
                code,
                tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
            ) || msg.contains("not saved")
        })
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    assert_eq!(tally.acked.len(), PEERS);

    // After the last restart: every acknowledged allocation, none overlapping another or a
    // local range.
    let (mut child, mut client) = start(&spec, &url).await;
    let l = client.list(proto::Empty {}).await.unwrap().into_inner();
    assert_eq!(l.store, format!("configmap {ns}/{name}"));
    let listed: BTreeMap<String, (Ipv4Net, Ipv4Net)> = l
        .peers
        .iter()
        .map(|p| {
            let views = (
                p.pod_view.parse().unwrap(),
                p.external_view.parse().unwrap(),
            );
            (p.cluster_id.clone(), views)
        })
        .collect();
    assert_eq!(
        listed, tally.acked,
        "every acknowledged allocation, and only them"
    );
    let mut ranges: Vec<Ipv4Net> = listed.values().flat_map(|(p, e)| [*p, *e]).collect();
    let local: Vec<Ipv4Net> = [&l.pod_cidr, &l.service_cidr, &l.external_cidr]
        .iter()
        .map(|c| c.parse().unwrap())
        .collect();
    for (i, a) in ranges.iter().enumerate() {
        for b in ranges[i + 1..].iter().chain(&local) {
            assert!(!overlaps(a, b), "{a} overlaps {b}");
        }
    }
    ranges.sort();
    let status = common::status(metrics);
    assert_eq!(status["store"], "configmap");
    assert_eq!(status["state"], format!("{ns}/{name}"));
    assert_eq!(status["peers"], PEERS);

    // The ConfigMap holds that state, labelled and annotated.
    let cm = Api::<ConfigMap>::namespaced(leased.admin.clone(), ns)
        .get(name)
        .await
        .unwrap();
    assert_eq!(
        cm.metadata.labels.as_ref().unwrap()[MANAGED_BY_LABEL],
        "liqo-ipam"
    );
    assert_eq!(
        cm.metadata.annotations.as_ref().unwrap()[VERSION_ANNOTATION],
        ipam::STATE_VERSION.to_string()
    );
    let state: State = serde_json::from_str(&cm.data.unwrap()[DATA_KEY]).unwrap();
    let mut stored: Vec<Ipv4Net> = state
        .peers
        .iter()
        .flat_map(|p| [p.pod_view, p.external_view])
        .collect();
    stored.sort();
    assert_eq!(stored, ranges);
    let exit = child.stop(Duration::from_secs(10)).unwrap();
    assert!(exit.status.success() && !exit.killed, "{}", child.tail(20));
    leased.release().await;
}

/// A state with `peers` remapped.
fn state_with(peers: &[&str]) -> State {
    let mut ipam = Ipam::new(config()).unwrap();
    for p in peers {
        ipam.acquire(
            &cluster_id(p).unwrap(),
            "10.200.0.0/16".parse().unwrap(),
            "10.70.0.0/16".parse().unwrap(),
        )
        .unwrap();
    }
    ipam.state()
}

fn config() -> Config {
    Config::new(
        "10.200.0.0/16".parse().unwrap(),
        "10.96.0.0/12".parse().unwrap(),
    )
}

/// Whether `r` is the conflict on `configmap`.
fn conflict_on(r: &Result<(), StoreError>, configmap: &str) -> bool {
    matches!(r, Err(StoreError::Conflict { configmap: c, .. }) if c == configmap)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_writer_is_refused_and_overwrites_nothing() {
    let leased = Leased::take().await;
    let (ns, name) = ("ipam-cm-writers", "ipam-cm-writers-state");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = sandbox(&leased, ns, name, dir.path()).await;
    let cfg = config_of(&kubeconfig).await;
    let target = Target {
        namespace: ns.into(),
        name: name.into(),
    };
    let configmap = format!("{ns}/{name}");
    let (s1, s2, s3, s4) = (
        state_with(&["a"]),
        state_with(&["a", "b"]),
        state_with(&["a", "c"]),
        state_with(&["a", "d"]),
    );
    let (expected, s4_) = (s2.clone(), s4.clone());
    let admin = leased.admin.clone();
    // The stores block on their requests: off the runtime's workers, as the service runs them.
    let after_stores = tokio::task::spawn_blocking(move || {
        let store = || ConfigMapStore::with_config(target.clone(), cfg.clone()).unwrap();
        let (mut first, mut second) = (store(), store());
        assert_eq!(first.describe(), format!("configmap {configmap}"));
        assert!(first.load().unwrap().is_none());
        assert!(second.load().unwrap().is_none());
        first.save(&s1).unwrap();
        // Both saw it absent: the second create is the conflict.
        let r = second.save(&s1);
        assert!(conflict_on(&r, &configmap), "{r:?}");
        assert_eq!(second.load().unwrap(), Some(s1.clone()));
        let stale = second.resource_version().unwrap().to_owned();
        first.save(&s2).unwrap();
        let r = second.save(&s3);
        assert!(conflict_on(&r, &configmap), "{r:?}");
        let text = r.unwrap_err().to_string();
        assert!(
            text.contains(&format!(
                "ConfigMap {configmap} was changed by another writer"
            )) && text.contains(&format!("expected resourceVersion {stale}")),
            "{text}"
        );
        assert_eq!(second.resource_version(), Some(stale.as_str()));

        // An edit of the metadata alone (a label, a backup tool's annotation) is no other
        // writer: the next save takes the new version and goes through.
        let api = Api::<ConfigMap>::namespaced(admin.clone(), &target.namespace);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(api.patch(
            &target.name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({"metadata": {"labels": {"backup": "done"}}}),
            ),
        ))
        .unwrap();
        first.save(&s2).unwrap();

        // A service on a store that goes stale: its change fails and is undone.
        let service = Service::open(config(), Overrides::default(), Box::new(store())).unwrap();
        let before = service.read(Ipam::state);
        assert_eq!(before, s2);
        let mut third = store();
        assert!(third.load().unwrap().is_some());
        third.save(&s4).unwrap();
        let r = service.mutate(|i| {
            i.acquire(
                &cluster_id("e").unwrap(),
                "10.200.0.0/16".parse().unwrap(),
                "10.70.0.0/16".parse().unwrap(),
            )
        });
        assert!(
            matches!(r, Err(ServiceError::Store(StoreError::Conflict { .. }))),
            "{r:?}"
        );
        assert_eq!(service.read(Ipam::state), before, "the change was undone");
    })
    .await;
    after_stores.unwrap();
    // What the first and third writers saved, untouched by the stale ones.
    let cm = Api::<ConfigMap>::namespaced(leased.admin.clone(), ns)
        .get(name)
        .await
        .unwrap();
    let held: State = serde_json::from_str(&cm.data.unwrap()[DATA_KEY]).unwrap();
    assert_eq!(held, s4_);
    assert_ne!(held, expected);
    leased.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_that_is_not_a_state_is_refused_at_start_and_left_as_it_was() {
    let leased = Leased::take().await;
    let (ns, name) = ("ipam-cm-invalid", "ipam-cm-invalid-state");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = sandbox(&leased, ns, name, dir.path()).await;
    let cms = Api::<ConfigMap>::namespaced(leased.admin.clone(), ns);
    let (port, metrics) = (common::free_port(), common::free_port());
    let spec = spec(&kubeconfig, ns, name, port, metrics);
    for (data, why) in [
        (
            serde_json::json!({DATA_KEY: "{not json"}),
            "state.json: key must be a string",
        ),
        (serde_json::json!({"other": "{}"}), "no data key state.json"),
    ] {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: "liqo-ipam"}},
            "data": data,
        }))
        .unwrap();
        let made = match cms.get_opt(name).await.unwrap() {
            None => cms.create(&PostParams::default(), &cm).await.unwrap(),
            Some(old) => {
                let mut cm = cm;
                cm.metadata.resource_version = old.metadata.resource_version;
                cms.replace(name, &PostParams::default(), &cm)
                    .await
                    .unwrap()
            }
        };
        let (status, out) = common::run_to_exit(spec.clone().truncate_log());
        assert!(!status.success(), "started on {data}: {out}");
        assert!(
            out.contains(&format!(
                "opening the IPAM state in configmap {ns}/{name}: ConfigMap {ns}/{name} does not hold a valid IPAM state: {why}"
            )),
            "{out}"
        );
        let now = cms.get(name).await.unwrap();
        assert_eq!(
            (now.metadata.resource_version, now.data),
            (made.metadata.resource_version, made.data),
            "left as it was"
        );
    }
    // The ServiceAccount's own client sees it too (the role allows the get).
    let mine = Api::<ConfigMap>::namespaced(client_of(&kubeconfig).await, ns);
    assert!(mine.get_opt(name).await.unwrap().is_some());
    leased.release().await;
}
