//! Real packets to a reflected EndpointSlice: a Service in rome's offloaded namespace whose
//! endpoints are two of rome's lab pods (real network namespaces, one per node); milan gets its
//! copy with the addresses remapped into milan's view; a pod of milan opens a TCP connection to
//! every address of the copy, reaches the rome pod behind it through the tunnel, and the server
//! sees the client at rome's view of that milan pod.

use std::{
    collections::BTreeMap,
    io::{ErrorKind, Read, Write},
    net::{Ipv4Addr, TcpListener, TcpStream},
    time::{Duration, Instant},
};

use dataplane::netns::Netns;
use e2e::lab::k8s::{self, K8sLab};
use k8s_openapi::api::{core::v1::Service, discovery::v1::EndpointSlice};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::json;

use super::{
    services::{SVC_NS, copied_addresses},
    until,
};

const SERVICE: &str = "lab-echo";
const PORT: u16 = 7307;
/// The milan pod that dials.
pub(crate) const CLIENT_POD: &str = "n1-p1";

/// rome's pod `n<i>-p0` of every node: (lab pod name, address).
fn rome_servers(k: &K8sLab) -> Vec<(String, Ipv4Addr)> {
    let c = k.lab.topology.cluster("rome").unwrap();
    c.pods()
        .filter(|(_, p)| p.name.ends_with("-p0"))
        .map(|(_, p)| (p.name.clone(), p.addr.addr()))
        .collect()
}

/// Accepts one connection on `listener` within 10 s and tells the client the address it came
/// from; returns it.
fn serve_once(listener: TcpListener) -> Result<String, String> {
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match listener.accept() {
            Ok((mut s, peer)) => {
                let seen = peer.ip().to_string();
                s.set_nonblocking(false).map_err(|e| e.to_string())?;
                s.write_all(seen.as_bytes()).map_err(|e| e.to_string())?;
                return Ok(seen);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    }
}

/// Dials `addr` from milan's client pod while `server` (a rome pod) listens; returns the
/// client address the server saw and the one the client was told.
fn dial(k: &K8sLab, server: &str, addr: Ipv4Addr) -> Result<(String, String), String> {
    let server_ns = Netns::open(&k.lab.pod_netns("rome", server)).unwrap();
    let listener = server_ns
        .run(|| TcpListener::bind((Ipv4Addr::UNSPECIFIED, PORT)))
        .unwrap()
        .map_err(|e| format!("listening in rome/{server}: {e}"))?;
    let serve = std::thread::spawn(move || serve_once(listener));
    let client = Netns::open(&k.lab.pod_netns("milan", CLIENT_POD)).unwrap();
    let told = client
        .run(move || -> std::io::Result<String> {
            let mut c = TcpStream::connect_timeout(&(addr, PORT).into(), Duration::from_secs(5))?;
            c.set_read_timeout(Some(Duration::from_secs(5)))?;
            let mut told = String::new();
            c.read_to_string(&mut told)?;
            Ok(told)
        })
        .unwrap()
        .map_err(|e| format!("milan/{CLIENT_POD} -> {addr}:{PORT}: {e}"));
    let seen = serve.join().unwrap();
    Ok((seen?, told?))
}

/// The check; returns the (slice address, source seen) pairs.
pub(crate) async fn reach_reflected_endpoints(
    k: &K8sLab,
    rome: &Client,
    milan: &Client,
) -> Vec<(Ipv4Addr, String)> {
    let servers = rome_servers(k);
    assert!(servers.len() >= 2, "two rome pods: {servers:?}");
    let pp = PatchParams::apply("offload-test").force();
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": SVC_NS},
        "spec": {"ports": [{"port": PORT, "targetPort": PORT}]}
    });
    Api::<Service>::namespaced(rome.clone(), SVC_NS)
        .patch(SERVICE, &pp, &Patch::Apply(&svc))
        .await
        .unwrap();
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{SERVICE}-lab"), "namespace": SVC_NS, "labels": {
            "kubernetes.io/service-name": SERVICE,
            "endpointslice.kubernetes.io/managed-by": "lab.liqo.io"}},
        "addressType": "IPv4",
        "ports": [{"port": PORT, "protocol": "TCP"}],
        "endpoints": servers.iter().map(|(_, ip)| json!({
            "addresses": [ip.to_string()], "conditions": {"ready": true}})).collect::<Vec<_>>(),
    });
    Api::<EndpointSlice>::namespaced(rome.clone(), SVC_NS)
        .patch(&format!("{SERVICE}-lab"), &pp, &Patch::Apply(&slice))
        .await
        .unwrap();

    // milan's copy: one address per rome pod, each a remapped one.
    let copied: Vec<Ipv4Addr> = until(60, "milan's copy of the lab-echo slice", || {
        let want = servers.len();
        async move {
            let got: Vec<Ipv4Addr> = copied_addresses(milan, SERVICE)
                .await?
                .iter()
                .filter_map(|a| a.parse().ok())
                .collect();
            (got.len() == want)
                .then_some(got.clone())
                .ok_or(format!("{got:?}"))
        }
    })
    .await;

    // Which rome pod each copied address leads to: rome's IPAM's answer for it.
    let view_of_rome = view(k, "milan", "rome").await;
    let view_of_milan = view(k, "rome", "milan").await;
    let expected_source = e2e::lab::check::translated(&k.lab, "milan", CLIENT_POD, &view_of_milan)
        .unwrap()
        .to_string();
    let by_addr: BTreeMap<Ipv4Addr, String> = servers
        .iter()
        .map(|(name, _)| {
            let seen = e2e::lab::check::translated(&k.lab, "rome", name, &view_of_rome).unwrap();
            (seen, name.clone())
        })
        .collect();
    let mut out = Vec::new();
    for addr in copied {
        let server = by_addr
            .get(&addr)
            .unwrap_or_else(|| panic!("{addr} is no rome pod in milan's view: {by_addr:?}"));
        let deadline = Instant::now() + Duration::from_secs(30);
        let (seen, told) = loop {
            match dial(k, server, addr) {
                Ok(r) => break r,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("retrying: {e}");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(seen, told, "what the server saw is what the client read");
        assert_eq!(
            seen, expected_source,
            "rome/{server} sees milan/{CLIENT_POD} at rome's view of it"
        );
        out.push((addr, seen));
    }
    out
}

/// `from`'s view of `to` (its TunnelEndpoint).
async fn view(k: &K8sLab, from: &str, to: &str) -> liqo_types::PeerView {
    let views = k8s::views::peerings(k).await.unwrap();
    views
        .into_iter()
        .find(|(f, t, _)| f == from && t == to)
        .map(|(_, _, v)| v)
        .unwrap_or_else(|| panic!("no TunnelEndpoint {from} -> {to}"))
}
