//! Resource reflection on real API servers (control-plane.md §5), on the clusters of the pod
//! reflection test (rome home, milan provider): `liqo_virtual_kubelet::resources::run` in a
//! task, following a mapping the test gives (`svc` → `svc-rome`), with an IPAM of its own in
//! the test process. Checks every kind's copy, the EndpointSlices' addresses against the
//! IPAM's answers, updates and deletions carried over, external mappings released, a foreign
//! object left alone and reported, an opted-out object and a copy never reflected, a bad
//! annotation and a copy the provider refuses reported on the local object while the rest
//! keeps reflecting.

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use ipam::service::proto::Empty;
use ipnet::Ipv4Net;
use k8s_openapi::api::{
    core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount},
    discovery::v1::EndpointSlice,
    events::v1::Event,
    networking::v1::Ingress,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use liqo_virtual_kubelet::{VkConfig, resources};
use serde_json::json;

use crate::common::{
    AbortOnDrop, create, eventually,
    ipam::{TestIpam, endpoint},
    listed,
};

const LOCAL: &str = "svc";
const REMOTE: &str = "svc-rome";
/// How milan sees rome's pods and external CIDR (the peer's decision, told to our IPAM).
const OUR_POD_VIEW: &str = "10.171.0.0/16";
const OUR_EXTERNAL_VIEW: &str = "10.172.0.0/16";
const EXTERNAL_ENDPOINT: &str = "192.168.77.10";

/// Runs the checks; `cfg` is the pod test's configuration (the clients and identities).
pub(crate) async fn check(
    cfg: &VkConfig,
    rome: &Client,
    milan: &Client,
    rome_pods: Ipv4Net,
    milan_pods: Ipv4Net,
) {
    // The home IPAM, in this process.
    let foreign = cfg.foreign.cluster_id.to_string();
    let ipam = TestIpam::start(
        rome_pods,
        &foreign,
        milan_pods,
        OUR_POD_VIEW,
        OUR_EXTERNAL_VIEW,
    )
    .await;
    let mut admin = ipam.admin.clone();
    let options = ipam.options.clone();

    for (c, ns) in [(rome, LOCAL), (milan, REMOTE)] {
        create(
            &Api::<Namespace>::all(c.clone()),
            json!({"metadata": {"name": ns}}),
        )
        .await;
    }
    let mut vk = cfg.clone();
    vk.ipam = Some(options.clone());
    let vk = Arc::new(vk);
    let reflectors = Arc::new(resources::Reflectors::new(&vk).unwrap());
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(BTreeMap::from([(
        LOCAL.to_owned(),
        REMOTE.to_owned(),
    )])));
    let task = AbortOnDrop(tokio::spawn(resources::run(
        reflectors,
        rx.clone(),
        listed(),
    )));

    let l_cm: Api<ConfigMap> = Api::namespaced(rome.clone(), LOCAL);
    let r_cm: Api<ConfigMap> = Api::namespaced(milan.clone(), REMOTE);
    let l_svc: Api<Service> = Api::namespaced(rome.clone(), LOCAL);
    let r_svc: Api<Service> = Api::namespaced(milan.clone(), REMOTE);
    let l_eps: Api<EndpointSlice> = Api::namespaced(rome.clone(), LOCAL);
    let r_eps: Api<EndpointSlice> = Api::namespaced(milan.clone(), REMOTE);

    // A name already taken on the provider by someone else.
    create(
        &r_cm,
        json!({"metadata": {"name": "taken"}, "data": {"owner": "milan"}}),
    )
    .await;

    create(
        &l_cm,
        json!({"metadata": {"name": "cfg", "labels": {"app": "web"}}, "data": {"k": "v1"}}),
    )
    .await;
    create(
        &l_cm,
        json!({"metadata": {"name": "taken"}, "data": {"owner": "rome"}}),
    )
    .await;
    create(
        &l_cm,
        json!({"metadata": {"name": "private",
        "annotations": {"liqo.io/skip-reflection": "true"}}, "data": {"k": "v"}}),
    )
    .await;
    create(
        &l_cm,
        json!({"metadata": {"name": "bad",
        "annotations": {"liqo.io/skip-reflection": "maybe"}}, "data": {"k": "v"}}),
    )
    .await;
    create(
        &l_cm,
        json!({"metadata": {"name": "a-copy",
        "labels": {"virtualkubelet.liqo.io/origin": "f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9"}},
        "data": {"k": "v"}}),
    )
    .await;
    let l_sa: Api<ServiceAccount> = Api::namespaced(rome.clone(), LOCAL);
    create(&l_sa, json!({"metadata": {"name": "app"}})).await;
    let l_sec: Api<Secret> = Api::namespaced(rome.clone(), LOCAL);
    create(
        &l_sec,
        json!({"metadata": {"name": "sec"}, "type": "Opaque",
        "stringData": {"password": "s3cr3t"}}),
    )
    .await;
    create(
        &l_sec,
        json!({"metadata": {"name": "tok",
        "annotations": {"kubernetes.io/service-account.name": "app"}},
        "type": "kubernetes.io/service-account-token"}),
    )
    .await;
    let l_ing: Api<Ingress> = Api::namespaced(rome.clone(), LOCAL);
    create(
        &l_ing,
        json!({"metadata": {"name": "ing",
        "annotations": {"kubernetes.io/ingress.class": "nginx", "team": "web"}},
        "spec": {"ingressClassName": "nginx", "rules": [{"host": "web.example",
            "http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
    )
    .await;
    create(
        &l_svc,
        json!({"metadata": {"name": "web"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
    )
    .await;
    create(
        &l_svc,
        json!({"metadata": {"name": "np",
        "annotations": {"liqo.io/force-remote-node-port": "true"}},
        "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}}),
    )
    .await;

    let pod_ip = std::net::Ipv4Addr::from(u32::from(rome_pods.network()) + 0x0105);
    let slice = |name: &str, service: &str, addresses: serde_json::Value| {
        json!({"metadata": {"name": name, "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "test"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": addresses})
    };
    create(&l_eps, slice("web-1", "web", json!([
        {"addresses": [pod_ip.to_string()], "nodeName": "rome-node",
         "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "web-a", "namespace": LOCAL}},
        {"addresses": [EXTERNAL_ENDPOINT], "conditions": {"ready": true}},
        {"addresses": ["10.202.3.4"], "nodeName": cfg.node_name(), "conditions": {"ready": true}}
    ]))).await;
    create(
        &l_eps,
        slice(
            "ghost-1",
            "ghost",
            json!([{"addresses": [pod_ip.to_string()]}]),
        ),
    )
    .await;

    // Every kind's copy.
    let started = Instant::now();
    let copy = eventually(60, "ConfigMap cfg reflected", || {
        let r_cm = r_cm.clone();
        async move { r_cm.get("cfg").await.map_err(|e| e.to_string()) }
    })
    .await;
    let labels = copy.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        labels
            .get("virtualkubelet.liqo.io/origin")
            .map(String::as_str),
        Some(cfg.home.cluster_id.as_str())
    );
    assert_eq!(
        labels
            .get("virtualkubelet.liqo.io/destination")
            .map(String::as_str),
        Some(cfg.foreign.cluster_id.as_str())
    );
    let ca = l_cm.get("kube-root-ca.crt").await.unwrap().data;
    let root = format!("kube-root-ca.crt.{}", &cfg.home.cluster_id.as_str()[..5]);
    let r_ca = eventually(60, "the home root CA reflected", || {
        let (r_cm, root) = (r_cm.clone(), root.clone());
        async move { r_cm.get(&root).await.map_err(|e| e.to_string()) }
    })
    .await;
    assert_eq!(r_ca.data, ca);
    let r_sec: Api<Secret> = Api::namespaced(milan.clone(), REMOTE);
    let sec = eventually(60, "Secret sec", || {
        let r_sec = r_sec.clone();
        async move { r_sec.get("sec").await.map_err(|e| e.to_string()) }
    })
    .await;
    assert_eq!(
        sec.data.unwrap().get("password").map(|b| b.0.clone()),
        Some(b"s3cr3t".to_vec())
    );
    let tok = eventually(60, "Secret tok (a token, filled at home first)", || {
        let r_sec = r_sec.clone();
        async move {
            let t = r_sec.get("tok").await.map_err(|e| e.to_string())?;
            let filled = t.data.as_ref().is_some_and(|d| d.contains_key("token"));
            filled.then_some(t).ok_or("no token yet".into())
        }
    })
    .await;
    assert_eq!(tok.type_.as_deref(), Some("Opaque"));
    assert_eq!(
        tok.metadata
            .labels
            .unwrap()
            .get("kubernetes.io/service-account.name")
            .map(String::as_str),
        Some("app")
    );
    let r_sa: Api<ServiceAccount> = Api::namespaced(milan.clone(), REMOTE);
    eventually(60, "ServiceAccount app", || {
        let r_sa = r_sa.clone();
        async move { r_sa.get("app").await.map(drop).map_err(|e| e.to_string()) }
    })
    .await;
    let r_ing: Api<Ingress> = Api::namespaced(milan.clone(), REMOTE);
    let ing = eventually(60, "Ingress ing", || {
        let r_ing = r_ing.clone();
        async move { r_ing.get("ing").await.map_err(|e| e.to_string()) }
    })
    .await;
    let spec = ing.spec.unwrap();
    assert_eq!(spec.ingress_class_name, None);
    assert_eq!(spec.rules.unwrap()[0].host.as_deref(), Some("web.example"));
    let ann = ing.metadata.annotations.unwrap_or_default();
    assert!(!ann.contains_key("kubernetes.io/ingress.class"), "{ann:?}");
    assert_eq!(ann.get("team").map(String::as_str), Some("web"));

    // The Service: its own ClusterIP on milan; np keeps its nodePort.
    let web = eventually(60, "Service web", || {
        let r_svc = r_svc.clone();
        async move { r_svc.get("web").await.map_err(|e| e.to_string()) }
    })
    .await;
    let home_web = l_svc.get("web").await.unwrap();
    let (rip, hip) = (
        web.spec.as_ref().unwrap().cluster_ip.clone().unwrap(),
        home_web.spec.as_ref().unwrap().cluster_ip.clone().unwrap(),
    );
    assert_ne!(rip, hip, "the copy has the provider's own ClusterIP");
    let np = eventually(60, "Service np", || {
        let r_svc = r_svc.clone();
        async move { r_svc.get("np").await.map_err(|e| e.to_string()) }
    })
    .await;
    assert_eq!(np.spec.unwrap().ports.unwrap()[0].node_port, Some(30080));

    // The slice: the home pod in milan's view of our pods, the external address in its view of
    // our external CIDR, the provider's own endpoint left out; the IPAM agrees.
    let r_slice = eventually(60, "EndpointSlice web-1", || {
        let r_eps = r_eps.clone();
        async move { r_eps.get("web-1").await.map_err(|e| e.to_string()) }
    })
    .await;
    let got: Vec<String> = r_slice
        .endpoints
        .iter()
        .flat_map(|e| e.addresses.clone())
        .collect();
    let mut expect = Vec::new();
    for ip in [pod_ip.to_string(), EXTERNAL_ENDPOINT.to_owned()] {
        let a = admin
            // The virtual kubelet's own hold (taken again: no hold more).
            .map_ip(endpoint(
                &foreign,
                &ip,
                control::consts::reflection::IPAM_HOLDER,
            ))
            .await
            .unwrap()
            .into_inner();
        expect.push(a.ip);
    }
    assert_eq!(got, expect, "{r_slice:?}");
    let view: Ipv4Net = OUR_POD_VIEW.parse().unwrap();
    assert!(
        view.contains(&got[0].parse::<std::net::Ipv4Addr>().unwrap()),
        "{got:?}"
    );
    let ext_view: Ipv4Net = OUR_EXTERNAL_VIEW.parse().unwrap();
    assert!(
        ext_view.contains(&got[1].parse::<std::net::Ipv4Addr>().unwrap()),
        "{got:?}"
    );
    let l = r_slice.metadata.labels.clone().unwrap();
    assert_eq!(
        l.get("endpointslice.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("endpointslice.reflection.liqo.io")
    );
    assert_eq!(
        r_slice.endpoints[0]
            .target_ref
            .as_ref()
            .and_then(|r| r.kind.as_deref()),
        Some("RemotePod")
    );
    // (MapIp is idempotent per holder: the test's own asks above hold nothing more.)
    let held = admin.list(Empty {}).await.unwrap().into_inner().endpoints;
    assert_eq!(
        held.iter().map(|e| e.ip.as_str()).collect::<Vec<_>>(),
        [EXTERNAL_ENDPOINT],
        "{held:?}"
    );
    println!("all copies made in {:?}", started.elapsed());

    // A copy the provider refuses (a nodePort milan has given to a Service of its own):
    // reported on the local Service naming the field; the rest goes on reflecting.
    create(
        &r_svc,
        json!({"metadata": {"name": "milan-own"},
        "spec": {"type": "NodePort", "ports": [{"port": 81, "nodePort": 30081}]}}),
    )
    .await;
    create(
        &l_svc,
        json!({"metadata": {"name": "np2",
        "annotations": {"liqo.io/force-remote-node-port": "true"}},
        "spec": {"type": "NodePort", "ports": [{"port": 81, "nodePort": 30081}]}}),
    )
    .await;
    warned(rome, "np2", "ReflectionRefused", "spec.ports[0].nodePort").await;
    assert!(r_svc.get_opt("np2").await.unwrap().is_none());
    create(
        &l_cm,
        json!({"metadata": {"name": "after"}, "data": {"k": "v"}}),
    )
    .await;
    eventually(60, "ConfigMap after reflected (after the refusal)", || {
        let r_cm = r_cm.clone();
        async move { r_cm.get("after").await.map(drop).map_err(|e| e.to_string()) }
    })
    .await;

    // Handled by now (`after` came after them): not reflected are the opted out, the copy,
    // the slice of a Service not reflected; the foreign
    // object untouched; warnings on the bad annotation and the foreign name.
    for name in ["private", "a-copy", "bad"] {
        assert!(
            r_cm.get_opt(name).await.unwrap().is_none(),
            "{name} reflected"
        );
    }
    assert!(r_eps.get_opt("ghost-1").await.unwrap().is_none());
    warned(rome, "taken", "FailedReflection", "ConfigMap").await;
    warned(
        rome,
        "bad",
        "ReflectionRefused",
        "metadata.annotations[liqo.io/skip-reflection]",
    )
    .await;
    let taken = r_cm.get("taken").await.unwrap();
    assert_eq!(
        taken.data.unwrap().get("owner").map(String::as_str),
        Some("milan")
    );
    assert!(
        taken.metadata.labels.is_none(),
        "{:?}",
        taken.metadata.labels
    );

    // An edit carried over; a deletion deletes the copy; the external mapping released.
    let t = Instant::now();
    l_cm.patch(
        "cfg",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v2"}})),
    )
    .await
    .unwrap();
    eventually(10, "cfg updated remotely", || {
        let r_cm = r_cm.clone();
        async move {
            let c = r_cm.get("cfg").await.map_err(|e| e.to_string())?;
            let v = c.data.unwrap_or_default().get("k").cloned();
            (v.as_deref() == Some("v2"))
                .then_some(())
                .ok_or(format!("{v:?}"))
        }
    })
    .await;
    println!("an edit reached the copy in {:?}", t.elapsed());
    // A label and a data key removed locally are removed from the copy.
    l_cm.patch(
        "cfg",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": null}}, "data": {"k2": "x"}})),
    )
    .await
    .unwrap();
    l_cm.patch(
        "cfg",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k2": null}})),
    )
    .await
    .unwrap();
    eventually(10, "a removed label and key removed from the copy", || {
        let r_cm = r_cm.clone();
        async move {
            let c = r_cm.get("cfg").await.map_err(|e| e.to_string())?;
            let labels = c.metadata.labels.clone().unwrap_or_default();
            let data = c.data.clone().unwrap_or_default();
            (!labels.contains_key("app")
                && data.len() == 1
                && data.get("k").map(String::as_str) == Some("v2"))
            .then_some(())
            .ok_or(format!("{labels:?} {data:?}"))
        }
    })
    .await;
    l_cm.delete("cfg", &DeleteParams::default()).await.unwrap();
    eventually(30, "cfg deleted remotely", || {
        let r_cm = r_cm.clone();
        async move {
            let c = r_cm.get_opt("cfg").await.map_err(|e| e.to_string())?;
            c.is_none().then_some(()).ok_or("still there".to_owned())
        }
    })
    .await;

    // A slice deleted while reflection is down: once it runs again, its copy goes and the
    // external address its copy recorded is released.
    drop(task);
    l_eps
        .delete("web-1", &DeleteParams::default())
        .await
        .unwrap();
    let reflectors = Arc::new(resources::Reflectors::new(&vk).unwrap());
    let task = AbortOnDrop(tokio::spawn(resources::run(
        reflectors,
        rx.clone(),
        listed(),
    )));
    eventually(30, "web-1 deleted remotely after a restart", || {
        let r_eps = r_eps.clone();
        async move {
            let s = r_eps.get_opt("web-1").await.map_err(|e| e.to_string())?;
            s.is_none().then_some(()).ok_or("still there".to_owned())
        }
    })
    .await;
    eventually(30, "external mapping released", || {
        let mut admin = admin.clone();
        async move {
            let list = admin
                .list(Empty {})
                .await
                .map_err(|e| e.to_string())?
                .into_inner();
            list.endpoints
                .is_empty()
                .then_some(())
                .ok_or(format!("{:?}", list.endpoints))
        }
    })
    .await;
    assert!(!task.0.is_finished(), "resource reflection ended");
    drop(tx);
    drop(task);
    ipam.stop().await;
}

/// Waits for a Warning Event with `reason` on the local object `name`, its note naming `what`.
async fn warned(rome: &Client, name: &str, reason: &str, what: &str) {
    let events: Api<Event> = Api::namespaced(rome.clone(), LOCAL);
    eventually(60, &format!("Warning {reason} on {name}"), || {
        let events = events.clone();
        async move {
            let list = events
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            list.items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.type_.as_deref() == Some("Warning")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                        && e.note.as_deref().is_some_and(|n| n.contains(what))
                })
                .then_some(())
                .ok_or(format!(
                    "{:?}",
                    list.items
                        .iter()
                        .map(|e| (&e.reason, &e.note))
                        .collect::<Vec<_>>()
                ))
        }
    })
    .await;
}
