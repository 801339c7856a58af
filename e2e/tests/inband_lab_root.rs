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
        let server = kc
            .clusters
            .iter()
            .find(|n| n.name == c)
            .and_then(|n| n.cluster.as_ref())
            .and_then(|x| x.server.clone())
            .unwrap();
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
    // Neither auth service nor API server is reachable from the peer's gateway node but
    // through the tunnel (the WAN address of rome's host loopback services).
    let rome_auth = running(&liqo, "rome", "liqo-auth")["listen"]
        .as_str()
        .unwrap();
    let out = run(Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("{p}-milan-n0"),
            "timeout",
            "3",
            "bash",
            "-c",
        ])
        .arg(format!("echo > /dev/tcp/198.18.0.1/{}", port(rome_auth))));
    assert_ne!(
        out.status.code(),
        Some(0),
        "rome's auth service answers on the WAN"
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

    let started = Instant::now();
    let out = ctl(&[&["unpeer", "in-band"][..], &common[..]].concat());
    assert_eq!(out.status.code(), Some(0));
    eprintln!("unpeer in-band: {:.1} s", started.elapsed().as_secs_f64());
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
