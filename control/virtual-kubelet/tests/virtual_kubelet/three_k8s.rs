//! A Service whose pods run in three clusters (acceptance 2 of resource reflection), on the
//! pod reflection test's clusters plus turin: rome (home) offloads one namespace to milan and
//! to turin, one resource reflection each, with one home IPAM that knows both providers. The
//! Service's slice at home holds a home pod, a pod rome offloaded to milan and one offloaded to
//! turin (each on its virtual node). Each provider's copy holds the home pod at its view of
//! rome's pods and the other provider's pod at its view of rome's external CIDR (the IPAM's
//! answers), never its own pod. Then milan peers back (a reflection milan -> rome of the
//! namespace that holds rome's copies): for 60 s, counted from watches, no Service or
//! EndpointSlice is created, changed or deleted on any of the three clusters. The sweep of the
//! IPAM at startup: a hold of the virtual kubelet's that no copy records (as after a crash)
//! is dropped, another holder's hold of the same provider kept.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::Ipv4Addr,
    sync::Arc,
    time::Duration,
};

use control::{api::discovery::ClusterIdentity, consts::reflection::IPAM_HOLDER};
use futures::TryStreamExt;
use ipam::service::proto::{Empty, Hold};
use ipnet::Ipv4Net;
use k8s_openapi::api::{
    core::v1::{Namespace, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client,
    api::{ListParams, WatchEvent, WatchParams},
};
use liqo_virtual_kubelet::{VkConfig, config, resources};
use serde_json::json;
use testkit::k8s::Cluster;
use tokio::sync::watch::Sender;

use crate::common::{
    AbortOnDrop, create, eventually,
    ipam::{TestIpam, endpoint},
    listed,
};

const LOCAL: &str = "three";
const REMOTE: &str = "three-rome";
/// The namespace of rome where milan's peering back would put its copies.
const BACK: &str = "three-rome-milan";
const TURIN_ID: &str = "3c9e1f5a-7b2d-4e6f-8a1c-5d7e9f0b2a4c";
const VIEWS: [(&str, &str); 2] = [
    ("10.171.0.0/16", "10.172.0.0/16"),
    ("10.181.0.0/16", "10.182.0.0/16"),
];
const STABLE_SECS: u32 = 60;
/// Held by the virtual kubelet for milan, recorded by no copy: swept.
const STRAY: &str = "192.168.99.1";
/// Held for milan by another component: kept.
const OTHERS: &str = "192.168.99.2";
const OTHER_HOLDER: &str = "liqoctl-in-band";

fn identity(id: &str, name: &str) -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: id.parse().unwrap(),
        cluster_name: name.parse().unwrap(),
    }
}

/// A running resource reflection and the sender of its mapping (it stops when that closes).
type Running = (
    AbortOnDrop<&'static str>,
    Sender<Arc<liqo_virtual_kubelet::namespaces::Mapping>>,
);

/// One resource reflection of `cfg` following `local -> remote`.
fn reflect(cfg: VkConfig, local: &str, remote: &str) -> Running {
    let cfg = Arc::new(cfg);
    let reflectors = Arc::new(resources::Reflectors::new(&cfg).unwrap());
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(BTreeMap::from([(
        local.to_owned(),
        remote.to_owned(),
    )])));
    (
        AbortOnDrop(tokio::spawn(resources::run(reflectors, rx, listed()))),
        tx,
    )
}

/// The addresses of the copies of `service`'s slices in `ns`.
async fn copied(c: &Client, ns: &str, service: &str) -> Result<Vec<String>, String> {
    let slices = Api::<EndpointSlice>::namespaced(c.clone(), ns)
        .list(&ListParams::default().labels(&format!(
            "kubernetes.io/service-name={service},endpointslice.kubernetes.io/managed-by=endpointslice.reflection.liqo.io"
        )))
        .await
        .map_err(|e| e.to_string())?;
    let mut got: Vec<String> = slices
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter().flat_map(|e| e.addresses.clone()))
        .collect();
    got.sort();
    Ok(got)
}

/// Every event a watch of `api` from now sees in `secs` (Bookmarks left out).
async fn events<K>(api: Api<K>, secs: u32) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let rv = api
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let stream = api
        .watch(&WatchParams::default().timeout(secs), &rv)
        .await
        .unwrap();
    let all: Vec<WatchEvent<K>> = stream.try_collect().await.unwrap();
    let name = |o: &K| o.meta().name.clone().unwrap_or_default();
    all.into_iter()
        .filter_map(|e| match e {
            WatchEvent::Added(o) => Some(format!("added {}", name(&o))),
            WatchEvent::Modified(o) => Some(format!("modified {}", name(&o))),
            WatchEvent::Deleted(o) => Some(format!("deleted {}", name(&o))),
            WatchEvent::Bookmark(_) => None,
            WatchEvent::Error(e) => Some(format!("error {e:?}")),
        })
        .collect()
}

/// Runs the checks; `cfg` is the pod test's configuration (rome -> milan).
pub(crate) async fn check(cfg: &VkConfig, rome_c: &Cluster, milan_c: &Cluster, turin_c: &Cluster) {
    let (rome, milan) = (&cfg.local, &milan_c.client().await.unwrap());
    let turin = turin_c.client().await.unwrap();
    let milan_id = cfg.foreign.cluster_id.to_string();
    let rome_pods = rome_c.pod_cidr;
    let mut ipam = TestIpam::start(
        rome_pods,
        &milan_id,
        milan_c.pod_cidr,
        VIEWS[0].0,
        VIEWS[0].1,
    )
    .await;
    let milan_at_home: Ipv4Net = ipam.peers[0].pod_view.parse().unwrap();
    let turin_at_home: Ipv4Net = ipam
        .add_provider(TURIN_ID, turin_c.pod_cidr, VIEWS[1].0, VIEWS[1].1)
        .await
        .pod_view
        .parse()
        .unwrap();

    for (c, ns) in [
        (rome, LOCAL),
        (rome, BACK),
        (milan, REMOTE),
        (&turin, REMOTE),
    ] {
        create(
            &Api::<Namespace>::all(c.clone()),
            json!({"metadata": {"name": ns}}),
        )
        .await;
    }

    // Before the reflections start: a hold of the virtual kubelet's that no copy records (a
    // mapping taken just before a crash), and another holder's of another address, for milan.
    for (ip, holder) in [(STRAY, IPAM_HOLDER), (OTHERS, OTHER_HOLDER)] {
        ipam.admin
            .map_ip(endpoint(&milan_id, ip, holder))
            .await
            .unwrap();
    }

    let mut to_milan = cfg.clone();
    to_milan.ipam = Some(ipam.options.clone());
    let mut to_turin = to_milan.clone();
    to_turin.remote = config::Remote::from_config(
        crate::common::config(turin_c).await,
        liqo_auth::rate::DEFAULT,
    )
    .unwrap();
    to_turin.foreign = identity(TURIN_ID, "turin");
    to_turin.offer = "turin".into();
    let nodes = [to_milan.node_name(), to_turin.node_name()];
    let _milan_task = reflect(to_milan.clone(), LOCAL, REMOTE);
    let _turin_task = reflect(to_turin, LOCAL, REMOTE);

    // The Service and its slice: a home pod, a pod on each virtual node.
    let at = |net: Ipv4Net, host: u32| Ipv4Addr::from(u32::from(net.network()) + host);
    let home_pod = at(rome_pods, 0x0107);
    let on_milan = at(milan_at_home, 0x0205);
    let on_turin = at(turin_at_home, 0x0306);
    create(
        &Api::<Service>::namespaced(rome.clone(), LOCAL),
        json!({"metadata": {"name": "shop"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    create(
        &Api::<EndpointSlice>::namespaced(rome.clone(), LOCAL),
        json!({"metadata": {"name": "shop-1", "labels": {
                "kubernetes.io/service-name": "shop",
                "endpointslice.kubernetes.io/managed-by": "test"}},
            "addressType": "IPv4", "ports": [{"port": 80, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": [home_pod.to_string()], "nodeName": "rome-node"},
                {"addresses": [on_milan.to_string()], "nodeName": nodes[0]},
                {"addresses": [on_turin.to_string()], "nodeName": nodes[1]}]}),
    )
    .await;

    // Each provider: the home pod and the other provider's pod, in its own view.
    let providers = [
        (milan, milan_id.as_str(), on_turin, VIEWS[0]),
        (&turin, TURIN_ID, on_milan, VIEWS[1]),
    ];
    for (c, id, other, (pod_view, external_view)) in providers {
        let mut expect = Vec::new();
        for ip in [home_pod, other] {
            let a = ipam
                .admin
                .map_ip(endpoint(id, &ip.to_string(), IPAM_HOLDER))
                .await
                .unwrap()
                .into_inner();
            expect.push(a.ip);
        }
        let home_seen: Ipv4Addr = expect[0].parse().unwrap();
        let other_seen: Ipv4Addr = expect[1].parse().unwrap();
        assert!(
            pod_view.parse::<Ipv4Net>().unwrap().contains(&home_seen),
            "{expect:?}"
        );
        assert!(
            external_view
                .parse::<Ipv4Net>()
                .unwrap()
                .contains(&other_seen),
            "{expect:?}"
        );
        expect.sort();
        let got = eventually(60, &format!("shop's slice on {id}"), || {
            let expect = expect.clone();
            async move {
                let got = copied(c, REMOTE, "shop").await?;
                (got == expect)
                    .then_some(got.clone())
                    .ok_or(format!("{got:?} (want {expect:?})"))
            }
        })
        .await;
        println!("THREE {id}: {got:?}");
    }

    // The sweep: for milan, the virtual kubelet holds exactly what the copies use (turin's
    // pod); the stray hold is gone, the other holder's kept.
    let hold = |holder: &str| Hold {
        cluster_id: milan_id.clone(),
        holder: holder.into(),
    };
    let mut admin = ipam.admin.clone();
    let held = eventually(30, "the stray endpoint hold swept", || {
        let mut admin = admin.clone();
        let (ours, theirs) = (hold(IPAM_HOLDER), hold(OTHER_HOLDER));
        async move {
            let listed = admin
                .list(Empty {})
                .await
                .map_err(|e| e.to_string())?
                .into_inner();
            let held = |h: &Hold| -> BTreeSet<String> {
                listed
                    .endpoints
                    .iter()
                    .filter(|e| e.holds.contains(h))
                    .map(|e| e.ip.clone())
                    .collect()
            };
            let (ours, theirs) = (held(&ours), held(&theirs));
            let want = BTreeSet::from([on_turin.to_string()]);
            (ours == want && theirs == BTreeSet::from([OTHERS.to_owned()]))
                .then_some(ours.clone())
                .ok_or(format!(
                    "virtual-kubelet holds {ours:?} (want {want:?}), {OTHER_HOLDER} {theirs:?}"
                ))
        }
    })
    .await;
    println!("THREE swept: milan's holds {held:?}");
    admin
        .unmap_endpoint(endpoint(&milan_id, OTHERS, OTHER_HOLDER))
        .await
        .unwrap();

    // milan peers back: its reflection of the namespace holding rome's copies.
    let mut back = to_milan.clone();
    back.local = milan.clone();
    back.remote = config::Remote::from_config(
        crate::common::config(rome_c).await,
        liqo_auth::rate::DEFAULT,
    )
    .unwrap();
    back.home = cfg.foreign.clone();
    back.foreign = cfg.home.clone();
    back.ipam = None;
    let _back_task = reflect(back, REMOTE, BACK);
    let watches = async {
        let mut all = Vec::new();
        let counted = futures::future::join_all(
            [
                (rome.clone(), BACK),
                (rome.clone(), LOCAL),
                (milan.clone(), REMOTE),
                (turin.clone(), REMOTE),
            ]
            .into_iter()
            .map(|(c, ns)| async move {
                let (svc, eps) = tokio::join!(
                    events(Api::<Service>::namespaced(c.clone(), ns), STABLE_SECS),
                    events(Api::<EndpointSlice>::namespaced(c.clone(), ns), STABLE_SECS)
                );
                (ns, svc.into_iter().chain(eps).collect::<Vec<_>>())
            }),
        )
        .await;
        all.extend(counted);
        all
    };
    let t = std::time::Instant::now();
    let counted = tokio::time::timeout(Duration::from_secs(u64::from(STABLE_SECS) + 30), watches)
        .await
        .expect("the watches end after their timeout");
    // A watch the server ended early would have watched less.
    assert!(
        t.elapsed().as_secs_f64() >= f64::from(STABLE_SECS) - 1.0,
        "watched {:.1} s",
        t.elapsed().as_secs_f64()
    );
    for (ns, evs) in &counted {
        assert!(evs.is_empty(), "{ns}: churn in {STABLE_SECS} s: {evs:?}");
    }
    assert!(
        Api::<EndpointSlice>::namespaced(rome.clone(), BACK)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "no copy reflected back to rome"
    );
    println!(
        "THREE stable for {:.1} s: 0 events on 8 watches",
        t.elapsed().as_secs_f64()
    );
    ipam.stop().await;
}
