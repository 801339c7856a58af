//! `liqoctl peer in-band` and `unpeer in-band` against two harness clusters running Liqo's
//! components as processes (IPAM, auth service, controller-manager with its network manager).
//! The harness has no data plane (no gateway, no tunnel), so this test covers what liqoctl and
//! the network managers do up to the tunnel: the in-band ForeignClusters, the NetworkConfigs
//! exchanged through liqoctl, both TunnelEndpoints, the auth service and the proxy mapped by
//! each IPAM into the address range the peer sees our external CIDR at, and the ForeignClusters
//! pointed there; the authentication through the tunnel is then waited for and times out
//! (nothing carries packets). Unpeering removes everything it made.

#[allow(dead_code, reason = "peer_k8s uses the rest")]
use crate::common;

use std::net::Ipv4Addr;

use control::{
    api::{
        cidr::NatCidr,
        discovery::{ForeignCluster, PeeringEnabled},
        net::TunnelEndpoint,
    },
    consts::{net, objects},
};
use ipam::service::{client::ClientOptions, proto};
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use liqo_types::Cidr;
use serde_json::json;
use testkit::{
    k8s::{self, Clusters, Options},
    liqo,
};

use common::{Ctl, DownOnDrop, stdout};

const KEYS: [&str; 2] = [
    "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=",
    "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=",
];
const PROXY_PORT: i32 = 8118;

/// What the gateway operator and the chart would have made: the key Secret, the gateway's
/// LoadBalancer Service, and the `liqo-proxy` Service.
async fn network_objects(c: &Client, key: &str, port: i32) {
    let ns = objects::LIQO_NAMESPACE;
    Api::<Secret>::namespaced(c.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": net::PUBLIC_KEY_SECRET, "labels": {net::KEY_LABEL: net::WIREGUARD}},
                "stringData": {net::PUBLIC_KEY: key},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let svcs = Api::<Service>::namespaced(c.clone(), ns);
    svcs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "liqo-gateway", "labels": {net::GATEWAY_SERVICE_LABEL: "true"}},
            "spec": {"type": "LoadBalancer", "selector": {"app": "liqo-gateway"},
                "ports": [{"name": "wireguard", "port": port, "protocol": "UDP"}]},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    svcs.patch_status(
        "liqo-gateway",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}})),
    )
    .await
    .unwrap();
    svcs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": liqoctl::inband::PROXY_SERVICE},
            "spec": {"selector": {"app": "liqo-proxy"},
                "ports": [{"name": "http", "port": PROXY_PORT}]},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
}

async fn cluster_ip(c: &Client, name: &str) -> Ipv4Addr {
    let svc = Api::<Service>::namespaced(c.clone(), objects::LIQO_NAMESPACE)
        .get(name)
        .await
        .unwrap();
    svc.spec.unwrap().cluster_ip.unwrap().parse().unwrap()
}

async fn fc_for(c: &Client, peer_id: &str) -> Option<ForeignCluster> {
    Api::<ForeignCluster>::all(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|fc| fc.spec.cluster_identity.cluster_id.as_str() == peer_id)
}

async fn teps(c: &Client) -> Vec<TunnelEndpoint> {
    Api::<TunnelEndpoint>::all(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

fn host(url: &str) -> Ipv4Addr {
    let rest = url.split_once("://").unwrap().1;
    rest.split(':').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_band_builds_the_network_maps_the_auth_service_and_proxy_and_unpeers() {
    let bins = k8s::binaries().unwrap();
    let opts = Options {
        prefix: format!("inb{}", std::process::id() % 100_000)
            .parse()
            .unwrap(),
        clusters: 2,
        nodes: 1,
        overlapping: true,
    };
    let set = Clusters::up(&bins, &opts).await.unwrap();
    let _guard = DownOnDrop(set.prefix.clone());
    let installed = liqo::install(
        &set,
        &bins,
        &liqo::Options {
            network: true,
            ..liqo::Options::default()
        },
    )
    .await
    .unwrap();
    let (rome, milan) = (&set.clusters[0], &set.clusters[1]);
    let (rc, mc) = (rome.client().await.unwrap(), milan.client().await.unwrap());
    network_objects(&rc, KEYS[0], 51820).await;
    network_objects(&mc, KEYS[1], 51821).await;
    let ipam = |name: &str| {
        let i = installed.get(name).unwrap();
        format!(
            "http://{}",
            i.get(liqo::IPAM).unwrap().listen.clone().unwrap()
        )
    };
    let (rome_ipam, milan_ipam) = (ipam(&rome.name), ipam(&milan.name));
    let rome_id = installed.get(&rome.name).unwrap().cluster_id.clone();
    let milan_id = installed.get(&milan.name).unwrap().cluster_id.clone();
    let ctl = Ctl {
        kubeconfig: set.kubeconfig.clone(),
        context: rome.name.clone(),
    };
    let peer_args = [
        "peer",
        "in-band",
        "--remote-context",
        milan.name.as_str(),
        "--ipam-address",
        rome_ipam.as_str(),
        "--remote-ipam-address",
        milan_ipam.as_str(),
        "--timeout",
        "45s",
    ];

    // Bad input first: an unreachable IPAM is named, and nothing is written.
    let mut bad = peer_args.to_vec();
    bad[5] = "http://127.0.0.1:1";
    let out = ctl.run(&bad).await;
    assert_ne!(out.status.code(), Some(0));
    let err = common::stderr(&out);
    assert!(err.contains("http://127.0.0.1:1"), "{err}");
    assert!(fc_for(&rc, &milan_id).await.is_none());
    assert!(fc_for(&mc, &rome_id).await.is_none());

    // The network is built in-band; the authentication through the (absent) tunnel times out.
    let out = ctl.run(&peer_args).await;
    let text = stdout(&out);
    assert_ne!(out.status.code(), Some(0), "no tunnel carries packets here");
    assert!(text.contains("TunnelEndpoints created"), "{text}");
    assert!(text.contains("Mapped for"), "{text}");
    assert!(
        common::stderr(&out).contains("authentication"),
        "{}",
        common::stderr(&out)
    );

    for (c, peer_c, peer_id, key, outgoing) in [
        (&rc, &mc, &milan_id, KEYS[1], PeeringEnabled::Yes),
        (&mc, &rc, &rome_id, KEYS[0], PeeringEnabled::No),
    ] {
        let fc = fc_for(c, peer_id).await.unwrap();
        assert_eq!(fc.spec.outgoing_peering_enabled, outgoing);
        let proxy = fc.spec.foreign_proxy_url.clone().unwrap();
        assert!(proxy.ends_with(&format!(":{PROXY_PORT}")), "{proxy}");
        // Both TunnelEndpoints: the peer's gateway key, and where the peer sees its external
        // CIDR; the mapped auth service and proxy of the peer are in that range.
        let tep = teps(c).await.into_iter().next().unwrap();
        assert_eq!(tep.spec.backend_config[net::PUBLIC_KEY], key);
        let peer_tep = teps(peer_c).await.into_iter().next().unwrap();
        let seen: Cidr = match peer_tep.spec.local_nat_external_cidr {
            NatCidr(Some(c)) => c,
            NatCidr(None) => peer_tep.spec.local_external_cidr,
        };
        let (auth, proxy) = (host(&fc.spec.foreign_auth_url), host(&proxy));
        assert!(
            seen.net().contains(&auth) && seen.net().contains(&proxy),
            "{auth} {proxy} not in {seen}"
        );
        assert_ne!(auth, cluster_ip(peer_c, objects::AUTH_SERVICE).await);
    }
    // Each IPAM holds the two endpoint mappings for its peer.
    for (addr, peer_id, c) in [(&rome_ipam, &milan_id, &rc), (&milan_ipam, &rome_id, &mc)] {
        let mut ipam = ipam::service::client::connect(&ClientOptions::new(addr.clone()))
            .await
            .unwrap();
        let list = ipam.list(proto::Empty {}).await.unwrap().into_inner();
        let text = format!("{list:?}");
        for svc in [objects::AUTH_SERVICE, liqoctl::inband::PROXY_SERVICE] {
            let ip = cluster_ip(c, svc).await.to_string();
            assert!(
                text.contains(&ip) && text.contains(peer_id.as_str()),
                "{ip}: {text}"
            );
        }
    }
    // Idempotent: a second run maps the same addresses.
    let before = fc_for(&rc, &milan_id).await.unwrap().spec;
    let out = ctl.run(&peer_args).await;
    assert!(stdout(&out).contains("TunnelEndpoints created"));
    let after = fc_for(&rc, &milan_id).await.unwrap().spec;
    assert_eq!(before.foreign_auth_url, after.foreign_auth_url);
    assert_eq!(before.foreign_proxy_url, after.foreign_proxy_url);

    // Unpeer: both ForeignClusters, TunnelEndpoints, tenant namespaces and IPAM peers go.
    let mut unpeer_args = peer_args.to_vec();
    unpeer_args[0] = "unpeer";
    let out = ctl.run(&unpeer_args).await;
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    assert!(stdout(&out).contains("In-band peering between"));
    for (c, peer_id, addr) in [(&rc, &milan_id, &rome_ipam), (&mc, &rome_id, &milan_ipam)] {
        assert!(fc_for(c, peer_id).await.is_none());
        assert!(teps(c).await.is_empty());
        let tenants = Api::<Namespace>::all(c.clone())
            .list(&ListParams::default().labels("discovery.liqo.io/tenant-namespace=true"))
            .await
            .unwrap()
            .items;
        assert!(
            tenants
                .iter()
                .all(|n| n.metadata.deletion_timestamp.is_some()),
            "{tenants:?}"
        );
        let mut ipam = ipam::service::client::connect(&ClientOptions::new(addr.clone()))
            .await
            .unwrap();
        let list = ipam.list(proto::Empty {}).await.unwrap().into_inner();
        assert!(!format!("{list:?}").contains(peer_id.as_str()), "{list:?}");
    }
}
