//! Acceptance 4 of issue 14 (root): in-band peering on the lab with control planes.
//! `liqo-lab up --k8s --in-band` makes each cluster's auth service and API server reachable
//! only inside the cluster (see `e2e::lab::k8s::inband`): the `liqo-auth` and `liqo-proxy`
//! ClusterIPs are local in the gateway node, `liqo-proxy` CONNECTs only to the API server,
//! the controller-manager runs in the gateway node. Then `liqoctl peer in-band
//! --bidirectional` peers both ways, and `liqo-proxy` logs every CONNECT of the peer from the
//! peer's external CIDR as we see it; `unpeer in-band` removes both ForeignClusters,
//! TunnelEndpoints, tenant namespaces and endpoint mappings. Peered again, they are unpeered
//! by hand, then rome leaves a milan that does not answer (`inband_by_hand`). `liqo-lab down`
//! leaves nothing.
//!
//! Needs the binaries `liqoctl`, `liqo-proxy`, `liqo-controller-manager` built next to
//! `liqo-lab` (`cargo build -p liqoctl -p liqo-proxy -p liqo-controller-manager`).

use crate::lab_k8s;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use control::api::{discovery::ForeignCluster, net::TunnelEndpoint};
use e2e::lab::k8s::{
    K8sLab,
    inband::{self, InBand},
    restart,
};
use kube::{Api, Client, api::ListParams};
use lab_k8s::{DownOnDrop, ONE_AT_A_TIME, assert_all_gone, managers_of, prefix, procs_mentioning};

const CLUSTERS: [&str; 2] = ["rome", "milan"];
const LAB: &str = env!("CARGO_BIN_EXE_liqo-lab");

fn bin(name: &str) -> PathBuf {
    let dir = Path::new(LAB).parent().unwrap();
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

fn lab(p: &str, args: &[&str]) -> Output {
    run(Command::new(LAB).args(["--prefix", p]).args(args))
}

/// Whether a TCP connect to `ip`:`port` succeeds from inside `netns` (3 s at most).
fn connects(netns: &str, ip: impl std::fmt::Display, port: impl std::fmt::Display) -> bool {
    let out = run(Command::new("ip")
        .args(["netns", "exec", netns, "timeout", "3", "bash", "-c"])
        .arg(format!("echo > /dev/tcp/{ip}/{port}")));
    out.status.code() == Some(0)
}

/// `ip route <verb> <ip> via <via>` in `netns`.
fn route(netns: &str, verb: &str, ip: impl std::fmt::Display, via: &str) {
    let out = run(Command::new("ip")
        .args(["netns", "exec", netns, "ip", "route", verb])
        .args([ip.to_string().as_str(), "via", via]));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn in_band_needs_k8s() {
    for args in [
        &["up", "--in-band"][..],
        &["up", "--in-band", "--preset", "three-clusters"],
    ] {
        let out = lab("ibbad", args);
        assert_eq!(out.status.code(), Some(2), "a usage error");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--k8s") && err.contains("--in-band"), "{err}");
    }
}

/// What rome exposes in its gateway node (the auth relay and liqo-proxy on ClusterIPs) is not
/// reachable from the WAN, even by a neighbour routing those ClusterIPs to rome's WAN address;
/// nor is rome's API server on that address. Reachable inside rome's node.
fn only_in_band(rome: &InBand, milan: &InBand) {
    let topology = e2e::topology::Topology::preset("two-clusters").unwrap();
    let rome_wan = topology
        .cluster("rome")
        .unwrap()
        .wan_addr
        .addr()
        .to_string();
    let (auth, proxy) = (rome.auth, rome.proxy);
    let milan_ips = [milan.auth.ip(), milan.proxy.ip()];
    assert!(
        !milan_ips.contains(&auth.ip()) && !milan_ips.contains(&proxy.ip()),
        "the ClusterIPs of rome {:?} and milan {milan_ips:?} collide: the WAN check would \
         dial milan's own",
        (auth, proxy)
    );
    assert!(
        connects(&rome.netns, auth.ip(), auth.port()),
        "positive control: auth in rome's node"
    );
    assert!(
        connects(&rome.netns, proxy.ip(), proxy.port()),
        "positive control: proxy in rome's node"
    );
    for ip in [auth.ip(), proxy.ip()] {
        route(&milan.netns, "add", ip, &rome_wan);
    }
    let api_port = rome.api_server.rsplit_once(':').unwrap().1;
    let from_wan = [
        connects(&milan.netns, auth.ip(), auth.port()),
        connects(&milan.netns, proxy.ip(), proxy.port()),
        connects(&milan.netns, &rome_wan, api_port),
    ];
    for ip in [auth.ip(), proxy.ip()] {
        route(&milan.netns, "del", ip, &rome_wan);
    }
    assert_eq!(
        from_wan, [false; 3],
        "from milan's node over the WAN: [auth, proxy, API server] of rome connect"
    );
}

/// Waits until every peering condition of `peer`'s ForeignCluster in `kube` is Established,
/// at most 60 s after the peer command ended (`peered`). The last ones follow the replicated
/// status within a few seconds on a quiet machine; the deadline is for a loaded one (CI runs
/// two test binaries at once on 2 cores).
async fn established(kube: &Client, c: &str, peer: &str, peered: Instant) {
    let deadline = peered + Duration::from_secs(60);
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
            eprintln!(
                "{c}: every peering condition of {peer} Established {:.1} s after the peer \
                 command",
                peered.elapsed().as_secs_f64()
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{c}: not Established 60 s after the peer command: {not_yet:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The peer's requests reached our proxy from its external CIDR as we see it; how many.
async fn connects_from_peer(kube: &Client, r: &InBand, peer: &str) -> usize {
    let tep = Api::<TunnelEndpoint>::all(kube.clone())
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
    let log = std::fs::read_to_string(&r.proxy_log).unwrap();
    let sources: Vec<std::net::Ipv4Addr> = log
        .lines()
        .filter(|l| l.contains(" CONNECT "))
        .filter_map(|l| l.split("from=").nth(1)?.split(':').next()?.parse().ok())
        .collect();
    let c = &r.cluster;
    assert!(
        !sources.is_empty(),
        "{c}: no CONNECT through the proxy:\n{log}"
    );
    assert!(
        sources.iter().all(|s| seen.net().contains(s)),
        "{c}: sources {sources:?} not all in {seen}"
    );
    eprintln!(
        "{c}: {} CONNECTs to the API server through liqo-proxy, from {:?} (in {seen}, {peer}'s \
         external CIDR here)",
        sources.len(),
        sources[0]
    );
    sources.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_band_peering_goes_through_the_tunnel() {
    let _one = ONE_AT_A_TIME.lock().await;
    let liqoctl = bin("liqoctl");
    let p = prefix("ib");
    let _down = DownOnDrop(p.clone());
    let out = lab(
        p.as_str(),
        &["up", "--k8s", "--in-band", "--preset", "two-clusters"],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("peer them: liqoctl --context rome peer in-band"),
        "{text}"
    );
    assert!(e2e::lab::k8s::is_in_band(&p));
    let out = lab(p.as_str(), &["status"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("in-band: API servers"));
    // The lab refuses its own peering there, naming liqoctl's.
    let out = lab(p.as_str(), &["peer", "rome", "milan"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("peer in-band"));

    let record = inband::load(&p).unwrap().expect("recorded by up --in-band");
    let names: Vec<&str> = record.iter().map(|r| r.cluster.as_str()).collect();
    assert_eq!(names, CLUSTERS);
    let k = K8sLab::load(&p).unwrap();
    let _why = e2e::lab::k8s::DiagnoseOnPanic::new(&k, &CLUSTERS);
    // What runs in the gateway nodes (and what `down` must stop): liqo-proxy, the moved
    // controller-manager; and the auth relays, found by their tag.
    let mut pids = Vec::new();
    for c in CLUSTERS {
        let node = k
            .lab
            .topology
            .cluster(c)
            .unwrap()
            .gateway()
            .name
            .to_string();
        for program in ["liqo-proxy", "liqo-controller-manager"] {
            pids.push(restart::find(&k.lab, c, &node, program).unwrap().pid);
        }
        let r = record.iter().find(|r| r.cluster == c).unwrap();
        assert_eq!(
            Some(&r.manager_pid),
            pids.last(),
            "{c}: the recorded controller-manager"
        );
        // The install's record names the moved one; the one it started is gone.
        let recorded = k
            .liqo
            .get(c)
            .unwrap()
            .get("liqo-controller-manager")
            .unwrap();
        assert_eq!(recorded.proc.pid, r.manager_pid, "{c}: liqo.json");
    }
    // The controller-managers of this lab that run are the moved ones (the install's stopped).
    let mut managers = managers_of(p.as_str());
    managers.sort_unstable();
    let mut moved: Vec<u32> = record.iter().map(|r| r.manager_pid).collect();
    moved.sort_unstable();
    assert_eq!(managers, moved, "controller-managers running for the lab");
    // A relay started by hand with the lab's directory as its tag (and `--prefix` before
    // `relay`) is the lab's too: `down` stops it.
    let mut by_hand = Command::new(LAB)
        .args(["--prefix", p.as_str(), "relay", "--netns", &record[0].netns])
        .args(["--forward", "127.0.0.1:7999=127.0.0.1:9", "--tag"])
        .arg(format!("/run/liqo-lab/{p}.d/by-hand"))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        by_hand.try_wait().unwrap().is_none(),
        "the relay by hand exited"
    );
    let dir = format!("/run/liqo-lab/{p}.d/");
    let tagged: Vec<u32> =
        dataplane::procs::find(|q| q.mentions(&dir) && q.args.iter().any(|a| a == "relay"))
            .expect("listing /proc")
            .into_iter()
            .map(|q| q.pid)
            .collect();
    // Per cluster, one per node (2) and the auth relay; and the one by hand.
    assert_eq!(tagged.len(), 7, "the relays: {tagged:?}");
    pids.extend(tagged);
    only_in_band(&record[0], &record[1]);

    let ipam = |c: &str| {
        format!(
            "http://{}",
            k.liqo
                .get(c)
                .unwrap()
                .get("liqo-ipam")
                .unwrap()
                .listen
                .as_ref()
                .unwrap()
        )
    };
    let ctl = |args: &[&str]| {
        let mut cmd = Command::new(&liqoctl);
        cmd.arg("--kubeconfig")
            .arg(&k.set.kubeconfig)
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
    let peered = Instant::now();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for peer in ["milan", "rome"] {
        let line = format!("Peering with the remote cluster \"{peer}\" established");
        assert!(text.contains(&line), "{text}");
    }
    eprintln!("peer in-band --bidirectional: {secs:.1} s");

    let clients = [
        k.set.get("rome").unwrap().client().await.unwrap(),
        k.set.get("milan").unwrap().client().await.unwrap(),
    ];
    for ((kube, r), peer) in clients.iter().zip(&record).zip(["milan", "rome"]) {
        established(kube, &r.cluster, peer, peered).await;
        connects_from_peer(kube, r, peer).await;
    }

    // The auth and proxy mappings exist while peered (what unpeer must leave none of).
    for (c, address) in [("rome", &ri), ("milan", &mi)] {
        let mapped = inband::report::endpoint_mappings(address).await.unwrap();
        assert!(mapped.len() >= 2, "{c}: endpoint mappings {mapped:?}");
    }
    let started = Instant::now();
    let out = ctl(&[&["unpeer", "in-band"][..], &common[..]].concat());
    assert_eq!(out.status.code(), Some(0));
    eprintln!("unpeer in-band: {:.1} s", started.elapsed().as_secs_f64());
    for (c, address) in [("rome", &ri), ("milan", &mi)] {
        let left = inband::report::endpoint_mappings(address).await.unwrap();
        assert!(
            left.is_empty(),
            "{c}: endpoint mappings left after unpeer: {left:?}"
        );
    }
    for (c, kube) in CLUSTERS.iter().zip(&clients) {
        let left = inband::report::leftovers(kube).await.unwrap();
        assert!(left.is_empty(), "{c}: left after unpeer in-band: {left:?}");
    }

    // Peered again, then unpeered by hand on each side in turn (no liqoctl).
    let out = ctl(&[&["peer", "in-band", "--bidirectional"][..], &common[..]].concat());
    assert_eq!(out.status.code(), Some(0));
    let peered = Instant::now();
    for ((kube, r), peer) in clients.iter().zip(&record).zip(["milan", "rome"]) {
        established(kube, &r.cluster, peer, peered).await;
    }
    crate::inband_by_hand::unpeer_by_hand(&clients[0], &clients[1]).await;
    // Rome consumes milan, then deletes its ForeignCluster while milan does not answer.
    let out = ctl(&[&["peer", "in-band"][..], &common[..]].concat());
    assert_eq!(out.status.code(), Some(0));
    crate::inband_by_hand::peer_not_answering(&clients[0], &record[0].netns).await;

    // Gone below: nothing left to diagnose.
    drop(_why);
    let out = lab(p.as_str(), &["down"]);
    assert_eq!(out.status.code(), Some(0));
    assert_all_gone(&p, &pids);
    assert!(
        by_hand.wait().unwrap().code().is_none(),
        "the relay by hand was killed"
    );
    assert!(
        procs_mentioning(p.as_str()).is_empty(),
        "processes of {p} left after down"
    );
    eprintln!(
        "down: no namespace, relay, liqo-proxy, controller-manager or harness process of {p} left"
    );
}
