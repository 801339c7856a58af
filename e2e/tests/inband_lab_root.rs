//! Acceptance 4 of issue 14 (root): in-band peering on the lab with control planes. Each
//! cluster's auth service and API server listen only on the host's loopback (no WAN access);
//! for the peer they are reached inside the cluster's gateway node: the `liqo-auth` and
//! `liqo-proxy` ClusterIPs are local addresses there (a minimal kube-proxy), a relay carries
//! the auth service, `liqo-proxy` CONNECTs only to the API server (through the lab's relay),
//! and the controller-manager runs in the gateway node as a host-network pod would. Then
//! `liqoctl peer in-band --bidirectional` peers both ways, and `liqo-proxy` logs every
//! CONNECT of the peer from the peer's external CIDR as we see it; `unpeer in-band` removes
//! both ForeignClusters, TunnelEndpoints and tenant namespaces.
//!
//! Needs the binaries `liqoctl`, `liqo-proxy`, `liqo-controller-manager` built next to
//! `liqo-lab` (`cargo build -p liqoctl -p liqo-proxy -p liqo-controller-manager`).

mod lab_k8s;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use control::api::{discovery::ForeignCluster, net::TunnelEndpoint};
use e2e::lab::WAN0;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::{
    Api, Client, Config,
    api::{ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use lab_k8s::{DownOnDrop, ONE_AT_A_TIME, prefix};
use serde_json::{Value, json};

const CLUSTERS: [&str; 2] = ["rome", "milan"];
use control::consts::objects::PROXY_SERVICE;

fn bin(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_liqo-lab")).parent().unwrap();
    let p = dir.join(name);
    assert!(p.exists(), "build {name} first: {} is missing", p.display());
    p
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    eprintln!(
        "$ {cmd:?}\n-> {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A detached process inside `netns` (killed with the node by `down`).
fn spawn_in(
    netns: &str,
    log: &Path,
    env: &[(&str, &Path)],
    program: &Path,
    args: &[&str],
) -> Child {
    let file = std::fs::File::create(log).unwrap();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns])
        .arg(program)
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// The processes this test started, stopped (and reaped) even when it fails, before the lab
/// goes down.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // Best effort in a destructor: it may have exited (with its node) already.
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

async fn client(kubeconfig: &Path, context: &str) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let opts = KubeConfigOptions {
        context: Some(context.to_owned()),
        ..KubeConfigOptions::default()
    };
    Client::try_from(Config::from_custom_kubeconfig(kc, &opts).await.unwrap()).unwrap()
}

fn running<'a>(liqo: &'a Value, cluster: &str, program: &str) -> &'a Value {
    liqo["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cluster"] == cluster)
        .and_then(|c| {
            c["running"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["program"] == program)
        })
        .unwrap()
}

fn port(addr: &str) -> &str {
    addr.rsplit_once(':').unwrap().1
}

fn pid_gone(pid: u64) -> bool {
    lab_k8s::gone(u32::try_from(pid).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_band_peering_goes_through_the_tunnel() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (liqoctl, proxy, manager) = (
        bin("liqoctl"),
        bin("liqo-proxy"),
        bin("liqo-controller-manager"),
    );
    let p = prefix("ib");
    let _down = DownOnDrop(p.clone());
    let mut children = Children(Vec::new());
    let lab = env!("CARGO_BIN_EXE_liqo-lab");
    let out = run(Command::new(lab).args([
        "--prefix",
        p.as_str(),
        "up",
        "--k8s",
        "--preset",
        "two-clusters",
    ]));
    assert_eq!(out.status.code(), Some(0));
    let dir = Path::new(e2e::k8s::ROOT).join(p.as_str());
    let kubeconfig = dir.join("kubeconfig");
    let liqo: Value =
        serde_json::from_slice(&std::fs::read(dir.join("liqo.json")).unwrap()).unwrap();
    // Where `down` finds the relays it did not start.
    let tags = PathBuf::from(format!("/run/liqo-lab/{p}.d/inband"));
    std::fs::create_dir_all(&tags).unwrap();
    let kc = Kubeconfig::read_from(&kubeconfig).unwrap();

    // Per cluster: (auth ClusterIP, its port, liqo-proxy's ClusterIP).
    let mut cluster_ips = Vec::new();
    for c in CLUSTERS {
        let netns = format!("{p}-{c}-n0");
        let kube = client(&kubeconfig, c).await;
        let svcs = Api::<Service>::namespaced(kube.clone(), "liqo");
        svcs.create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": PROXY_SERVICE},
                "spec": {"ports": [{"name": "http", "port": 8118}]},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
        let ip = |s: &Service| s.spec.as_ref().unwrap().cluster_ip.clone().unwrap();
        let auth = svcs
            .get(control::consts::objects::AUTH_SERVICE)
            .await
            .unwrap();
        let auth_port = auth.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].port;
        let (auth_ip, proxy_ip) = (ip(&auth), ip(&svcs.get(PROXY_SERVICE).await.unwrap()));
        for a in [&auth_ip, &proxy_ip] {
            let out = run(Command::new("ip").args([
                "netns",
                "exec",
                &netns,
                "ip",
                "addr",
                "add",
                &format!("{a}/32"),
                "dev",
                "lo",
            ]));
            assert_eq!(out.status.code(), Some(0));
        }
        // What kube-proxy gives: ClusterIPs reachable in the cluster (and through the
        // tunnel), never from the WAN.
        let out = nft_in(
            &netns,
            &format!(
                "table ip inband-kube-proxy {{\n  chain input {{\n    type filter hook input \
                 priority 0; policy accept;\n    iifname \"{WAN0}\" ip daddr {{ {auth_ip}, \
                 {proxy_ip} }} drop\n  }}\n}}\n"
            ),
        );
        assert_eq!(out.status.code(), Some(0));
        cluster_ips.push((auth_ip.clone(), auth_port, proxy_ip.clone()));
        let auth_listen = running(&liqo, c, "liqo-auth")["listen"].as_str().unwrap();
        let relay = Command::new(lab)
            .args([
                "--prefix",
                p.as_str(),
                "relay",
                "--netns",
                &netns,
                "--forward",
            ])
            .arg(format!("{auth_ip}:{auth_port}={auth_listen}"))
            .arg("--tag")
            .arg(tags.join(c))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        children.0.push(relay);
        let server = server_of(&kc, c);
        let authority = server.trim_start_matches("https://");
        let child = spawn_in(
            &netns,
            &dir.join(format!("{c}-proxy.log")),
            &[],
            &proxy,
            &[
                "--listen",
                &format!("{proxy_ip}:8118"),
                "--allow",
                &format!("{authority}=127.0.0.1:6443"),
            ],
        );
        children.0.push(child);
        // The controller-manager moves into the gateway node: API server and IPAM through
        // the lab's relays there, the peer through the tunnel.
        let cm = running(&liqo, c, "liqo-controller-manager");
        let pid = cm["proc"]["pid"].as_u64().unwrap();
        let out = run(Command::new("kill").arg(pid.to_string()));
        assert_eq!(out.status.code(), Some(0));
        let deadline = Instant::now() + Duration::from_secs(20);
        while !pid_gone(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(pid_gone(pid), "the controller-manager {pid} did not stop");
        let own = dir.join(c).join("liqo/liqo-controller-manager.kubeconfig");
        let text = std::fs::read_to_string(&own).unwrap();
        let moved = text.replace(&server, "https://127.0.0.1:6443");
        assert_ne!(moved, text);
        let moved_path = dir.join(c).join("inband-cm.kubeconfig");
        std::fs::write(&moved_path, moved).unwrap();
        std::fs::set_permissions(
            &moved_path,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        let child = spawn_in(
            &netns,
            &dir.join(format!("{c}-cm.log")),
            &[("KUBECONFIG", &moved_path)],
            &manager,
            &[
                "--namespace",
                "liqo",
                "--metrics-listen",
                "127.0.0.1:9547",
                "--ipam-address",
                "http://127.0.0.1:6000",
            ],
        );
        children.0.push(child);
    }
    // What rome exposes in its gateway node (the auth relay and liqo-proxy on ClusterIPs) is
    // not reachable from the WAN, even by a neighbour routing those ClusterIPs to rome's WAN
    // address; nor is rome's API server on that address. Reachable inside rome's node.
    let topology = e2e::topology::Topology::preset("two-clusters").unwrap();
    let rome_wan = topology
        .clusters
        .iter()
        .find(|x| x.name.as_str() == "rome")
        .unwrap()
        .wan_addr
        .addr()
        .to_string();
    let (rome_n0, milan_n0) = (format!("{p}-rome-n0"), format!("{p}-milan-n0"));
    let (auth_ip, auth_port, proxy_ip) = cluster_ips[0].clone();
    let milan_ips = [&cluster_ips[1].0, &cluster_ips[1].2];
    assert!(
        !milan_ips.contains(&&auth_ip) && !milan_ips.contains(&&proxy_ip),
        "the ClusterIPs of rome {:?} and milan {milan_ips:?} collide: the WAN check would \
         dial milan's own",
        (&auth_ip, &proxy_ip)
    );
    assert!(
        connects(&rome_n0, &auth_ip, auth_port),
        "positive control: auth in rome's node"
    );
    assert!(
        connects(&rome_n0, &proxy_ip, 8118),
        "positive control: proxy in rome's node"
    );
    for ip in [&auth_ip, &proxy_ip] {
        let out = run(Command::new("ip").args([
            "netns", "exec", &milan_n0, "ip", "route", "add", ip, "via", &rome_wan,
        ]));
        assert_eq!(out.status.code(), Some(0));
    }
    let from_wan = [
        connects(&milan_n0, &auth_ip, auth_port),
        connects(&milan_n0, &proxy_ip, 8118),
        connects(&milan_n0, &rome_wan, port(&server_of(&kc, "rome"))),
    ];
    for ip in [&auth_ip, &proxy_ip] {
        let out = run(Command::new("ip").args([
            "netns", "exec", &milan_n0, "ip", "route", "del", ip, "via", &rome_wan,
        ]));
        assert_eq!(out.status.code(), Some(0));
    }
    assert_eq!(
        from_wan, [false; 3],
        "from milan's node over the WAN: [auth, proxy, API server] of rome connect"
    );

    let ipam = |c: &str| {
        format!(
            "http://{}",
            running(&liqo, c, "liqo-ipam")["listen"].as_str().unwrap()
        )
    };
    let ctl = |args: &[&str]| {
        let mut cmd = Command::new(&liqoctl);
        cmd.arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--context", "rome"])
            .args(args)
            .env_remove("KUBECONFIG");
        run(&mut cmd)
    };
    let (ri, mi) = (ipam("rome"), ipam("milan"));
    let common = [
        "--remote-context",
        "milan",
        "--ipam-address",
        ri.as_str(),
        "--remote-ipam-address",
        mi.as_str(),
        "--timeout",
        "120s",
    ];
    let started = Instant::now();
    let out = ctl(&[&["peer", "in-band", "--bidirectional"][..], &common[..]].concat());
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Peering with the remote cluster \"milan\" established"),
        "{text}"
    );
    assert!(
        text.contains("Peering with the remote cluster \"rome\" established"),
        "{text}"
    );
    eprintln!("peer in-band --bidirectional: {secs:.1} s");

    for (c, peer) in [("rome", "milan"), ("milan", "rome")] {
        let kube = client(&kubeconfig, c).await;
        // The last conditions follow the replicated status within a few seconds.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let fc = Api::<ForeignCluster>::all(kube.clone())
                .get(peer)
                .await
                .unwrap();
            let status = serde_json::to_value(&fc.status).unwrap();
            let not_yet: Vec<String> = [
                "AuthenticationStatus",
                "OutgoingPeering",
                "IncomingPeering",
                "NetworkStatus",
            ]
            .iter()
            .filter_map(|t| {
                let cond = status["peeringConditions"]
                    .as_array()?
                    .iter()
                    .find(|x| x["type"] == *t);
                match cond {
                    Some(x) if x["status"] == "Established" => None,
                    other => Some(format!("{t}: {other:?}")),
                }
            })
            .collect();
            if not_yet.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "{c}: {not_yet:?}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // The peer's requests reached our proxy from its external CIDR as we see it.
        let tep = Api::<TunnelEndpoint>::all(kube)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .remove(0);
        let seen = tep
            .spec
            .remote_nat_external_cidr
            .0
            .unwrap_or(tep.spec.remote_external_cidr);
        let log = std::fs::read_to_string(dir.join(format!("{c}-proxy.log"))).unwrap();
        let sources: Vec<std::net::Ipv4Addr> = log
            .lines()
            .filter(|l| l.contains(" CONNECT "))
            .filter_map(|l| l.split("from=").nth(1)?.split(':').next()?.parse().ok())
            .collect();
        assert!(
            !sources.is_empty(),
            "{c}: no CONNECT through the proxy:\n{log}"
        );
        assert!(
            sources.iter().all(|s| seen.net().contains(s)),
            "{c}: sources {sources:?} not all in {seen}"
        );
        eprintln!(
            "{c}: {} CONNECTs to the API server through liqo-proxy, from {:?} (in {seen}, {peer}'s external CIDR here)",
            sources.len(),
            sources[0]
        );
    }

    // The auth and proxy mappings exist while peered (what unpeer must leave none of).
    for (c, address) in [("rome", &ri), ("milan", &mi)] {
        let mapped = endpoints(address).await;
        assert!(mapped.len() >= 2, "{c}: endpoint mappings {mapped:?}");
    }
    let started = Instant::now();
    let out = ctl(&[&["unpeer", "in-band"][..], &common[..]].concat());
    assert_eq!(out.status.code(), Some(0));
    eprintln!("unpeer in-band: {:.1} s", started.elapsed().as_secs_f64());
    // No endpoint mapping left in either IPAM (the auth and proxy ones of the peering).
    for (c, address) in [("rome", &ri), ("milan", &mi)] {
        let left = endpoints(address).await;
        assert!(
            left.is_empty(),
            "{c}: endpoint mappings left after unpeer: {left:?}"
        );
    }
    for c in CLUSTERS {
        let kube = client(&kubeconfig, c).await;
        assert!(
            Api::<ForeignCluster>::all(kube.clone())
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
        assert!(
            Api::<TunnelEndpoint>::all(kube.clone())
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
        let tenants = Api::<Namespace>::all(kube)
            .list(&ListParams::default().labels("discovery.liqo.io/tenant-namespace=true"))
            .await
            .unwrap()
            .items;
        assert!(
            tenants
                .iter()
                .all(|n| n.metadata.deletion_timestamp.is_some()),
            "{c}: {tenants:?}"
        );
    }
}

/// The endpoint mappings the IPAM at `address` holds (its `List`).
async fn endpoints(address: &str) -> Vec<ipam::service::proto::Endpoint> {
    let options = ipam::service::client::ClientOptions::new(address.to_owned());
    let mut client = ipam::service::client::connect(&options).await.unwrap();
    client
        .list(ipam::service::proto::Empty {})
        .await
        .unwrap()
        .into_inner()
        .endpoints
}

/// `nft -f -` with `rules` inside `netns`.
fn nft_in(netns: &str, rules: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["netns", "exec", netns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(rules.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    eprintln!(
        "$ nft -f - in {netns}:\n{rules}-> {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether a TCP connect to `ip`:`port` succeeds from inside `netns` (3 s at most).
fn connects(netns: &str, ip: &str, port: impl std::fmt::Display) -> bool {
    let out = run(Command::new("ip")
        .args(["netns", "exec", netns, "timeout", "3", "bash", "-c"])
        .arg(format!("echo > /dev/tcp/{ip}/{port}")));
    out.status.code() == Some(0)
}

/// The API server URL of `cluster` in the kubeconfig.
fn server_of(kc: &Kubeconfig, cluster: &str) -> String {
    kc.clusters
        .iter()
        .find(|n| n.name == cluster)
        .and_then(|n| n.cluster.as_ref())
        .and_then(|x| x.server.clone())
        .unwrap()
}
