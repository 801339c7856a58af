//! High availability (`liqoctl install --enable-ha`, the chart's `--leader-elect`): two
//! controller-manager processes per cluster under the chart's RBAC (the Role of
//! `chart/files/liqo-controller-manager-leader-election-Role.yaml`). Exactly one leads (the
//! Lease's holder, and the only one whose `liqo_controller_manager_leader` gauge is 1); both serve
//! their webhooks and metrics. rome peers with milan: the leader runs the virtual kubelet. The
//! leader killed with SIGKILL: its virtual kubelet dies with it, the other takes the Lease within
//! 15 s and runs the virtual kubelet again, and a peering made afterwards (milan with rome)
//! completes. A leader stopped with SIGTERM gives the Lease back.
//!
//! Its own clusters, not the shared pool's: it kills a component and leaves a peering with
//! running virtual kubelets behind, which the pool's clean-up cannot undo.

use crate::common::{self, DownOnDrop, eventually, offloading::peer};

use std::time::{Duration, Instant};

use control::consts::objects::MANAGER_LEADER_LEASE;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::{Api, Client};
use testkit::{
    k8s::{self, Clusters},
    liqo::{self, Running},
};

const MANAGER: &str = "liqo-controller-manager";

/// The Lease's holder, if any.
async fn holder(client: &Client) -> Result<String, String> {
    Api::<Lease>::namespaced(client.clone(), liqo::NAMESPACE)
        .get_opt(MANAGER_LEADER_LEASE)
        .await
        .map_err(|e| e.to_string())?
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
        .ok_or_else(|| "no holder".to_owned())
}

/// The replica number of a holder identity `<cluster>-<n>_<random>`.
fn replica_of(cluster: &str, holder: &str) -> usize {
    holder
        .strip_prefix(&format!("{cluster}-"))
        .and_then(|r| r.split_once('_'))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("holder {holder:?} is not one of {cluster}'s replicas"))
}

/// The `liqo_controller_manager_leader` gauge of a replica.
async fn gauge(r: &Running) -> Result<u8, String> {
    let url = format!("http://{}/metrics", r.metrics.as_ref().ok_or("no metrics")?);
    let text = http_get(&url).await?;
    text.lines()
        .find_map(|l| l.strip_prefix("liqo_controller_manager_leader "))
        .ok_or_else(|| format!("no leader gauge at {url}"))?
        .trim()
        .parse()
        .map_err(|e| format!("{e}"))
}

async fn http_get(url: &str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").ok_or("not http")?;
    let (host, path) = rest.split_once('/').ok_or("no path")?;
    let mut s = tokio::net::TcpStream::connect(host)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    s.write_all(format!("GET /{path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// The replicas of the controller-manager of `cluster`, in start order.
fn managers(installed: &liqo::Liqo, cluster: &str) -> Vec<Running> {
    installed
        .get(cluster)
        .unwrap()
        .running
        .iter()
        .filter(|r| r.program == MANAGER)
        .cloned()
        .collect()
}

/// One leader whose gauge says 1, every other replica's 0: its replica number.
async fn one_leader(client: &Client, cluster: &str, replicas: &[Running]) -> Result<usize, String> {
    let h = holder(client).await?;
    let leader = replica_of(cluster, &h);
    for (n, r) in replicas.iter().enumerate() {
        if !std::path::Path::new(&format!("/proc/{}", r.proc.pid)).exists() {
            continue;
        }
        let want = u8::from(n == leader);
        let got = gauge(r).await?;
        if got != want {
            return Err(format!(
                "replica {n}'s gauge says {got} while {h} holds the Lease"
            ));
        }
    }
    Ok(leader)
}

/// Node `node` of `client` is Ready and belongs to `provider`.
async fn node_ready(client: &Client, node: &str, provider: &str) -> Result<(), String> {
    let n = Api::<Node>::all(client.clone())
        .get_opt(node)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no node yet")?;
    let labels = n.metadata.labels.clone().unwrap_or_default();
    if labels
        .get(control::consts::labels::REMOTE_CLUSTER_ID)
        .map(String::as_str)
        != Some(provider)
    {
        return Err(format!("labels {labels:?}"));
    }
    let ready = n
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if ready {
        Ok(())
    } else {
        Err("not Ready".into())
    }
}

/// The pids of the children of `pid` (its virtual kubelets).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: the comm may hold spaces, so after its last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_moves_the_lease_and_a_later_peering_completes() {
    let bins = k8s::binaries().unwrap();
    let mut options = common::options();
    options.clusters = 2;
    options.nodes = 1;
    let set = Clusters::up(&bins, &options).await.unwrap();
    let _guard = DownOnDrop(set.prefix.clone());
    let opts = liqo::Options {
        manager_replicas: 2,
        ..liqo::Options::default()
    };
    let installed = liqo::install(&set, &bins, &opts).await.unwrap();
    let rome = set.get("rome").unwrap().client().await.unwrap();
    let milan = set.get("milan").unwrap().client().await.unwrap();
    let rome_id = installed.get("rome").unwrap().cluster_id.clone();
    let milan_id = installed.get("milan").unwrap().cluster_id.clone();
    let replicas = managers(&installed, "rome");
    assert_eq!(replicas.len(), 2, "{replicas:?}");

    // One leader on each cluster, named in the Lease and by the gauges.
    for name in ["rome", "milan"] {
        let client = set.get(name).unwrap().client().await.unwrap();
        let reps = managers(&installed, name);
        eventually(30, &format!("one leader on {name}"), || {
            let (client, reps) = (client.clone(), reps.clone());
            async move { one_leader(&client, name, &reps).await.map(drop) }
        })
        .await;
    }
    let leader = one_leader(&rome, "rome", &replicas).await.unwrap();
    let follower = 1 - leader;

    // rome peers with milan: the leader runs the virtual kubelet (its child), the follower none.
    peer(&set, &installed, "rome", "milan");
    eventually(90, "virtual node liqo-milan Ready", || {
        let (rome, milan_id) = (rome.clone(), milan_id.clone());
        async move { node_ready(&rome, "liqo-milan", &milan_id).await }
    })
    .await;
    let kubelets = children(replicas[leader].proc.pid);
    assert_eq!(
        kubelets.len(),
        1,
        "the leader's virtual kubelets: {kubelets:?}"
    );
    assert_eq!(children(replicas[follower].proc.pid), Vec::<u32>::new());

    // The leader killed: its virtual kubelet goes with it, the follower takes the Lease and
    // runs the virtual kubelet again.
    let killed = Instant::now();
    assert!(
        k8s::kill9(&replicas[leader].proc, Duration::from_secs(10)),
        "rome's leader (pid {}) still runs",
        replicas[leader].proc.pid
    );
    eventually(10, "the dead leader's virtual kubelet gone", || {
        let alive: Vec<u32> = kubelets
            .iter()
            .copied()
            .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
            .collect();
        async move {
            if alive.is_empty() {
                Ok(())
            } else {
                Err(format!("still running: {alive:?}"))
            }
        }
    })
    .await;
    // From now on, only another virtual kubelet can renew the node's Lease.
    let killed_wall = k8s_openapi::jiff::Timestamp::now();
    eventually(30, "the follower holding the Lease", || {
        let rome = rome.clone();
        async move {
            match holder(&rome).await {
                Ok(h) if replica_of("rome", &h) == follower => Ok(()),
                other => Err(format!("holder {other:?}")),
            }
        }
    })
    .await;
    let moved = killed.elapsed();
    println!(
        "TIMING the Lease moved to the follower after the leader's SIGKILL: {:.1} s",
        moved.as_secs_f64()
    );
    assert!(moved < Duration::from_secs(15), "{moved:?}");
    assert_eq!(gauge(&replicas[follower]).await, Ok(1));
    eventually(60, "the new leader's virtual kubelet", || {
        let n = children(replicas[follower].proc.pid).len();
        async move {
            if n == 1 {
                Ok(())
            } else {
                Err(format!("{n} children"))
            }
        }
    })
    .await;
    // Ready, and its Lease renewed since the kill: by the new leader's virtual kubelet (the
    // old status stays Ready for the node controller's grace period).
    eventually(
        60,
        "virtual node liqo-milan Ready and renewed again",
        || {
            let (rome, milan_id) = (rome.clone(), milan_id.clone());
            async move {
                node_ready(&rome, "liqo-milan", &milan_id).await?;
                let renewed = Api::<Lease>::namespaced(rome, "kube-node-lease")
                    .get_opt("liqo-milan")
                    .await
                    .map_err(|e| e.to_string())?
                    .and_then(|l| l.spec?.renew_time)
                    .ok_or("no node Lease")?;
                if renewed.0 > killed_wall {
                    Ok(())
                } else {
                    Err(format!(
                        "node Lease last renewed {}, before the old virtual kubelet died",
                        renewed.0
                    ))
                }
            }
        },
    )
    .await;

    // A peering made now completes: milan peers with rome, whose new leader answers the
    // request with an offer; milan's virtual node gets Ready.
    let t = Instant::now();
    peer(&set, &installed, "milan", "rome");
    eventually(90, "milan's virtual node liqo-rome Ready", || {
        let (milan, rome_id) = (milan.clone(), rome_id.clone());
        async move { node_ready(&milan, "liqo-rome", &rome_id).await }
    })
    .await;
    println!(
        "TIMING peering milan -> rome after the failover, to the virtual node Ready: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // Still one leader: the survivor.
    assert_eq!(one_leader(&rome, "rome", &replicas).await, Ok(follower));

    // The leader stopped cleanly (SIGTERM) gives the Lease back: no holder.
    let killed = k8s::stop_procs(
        std::slice::from_ref(&replicas[follower].proc),
        Duration::from_secs(20),
    );
    assert_eq!(
        killed, 0,
        "the survivor did not stop on SIGTERM within 20 s"
    );
    assert_eq!(holder(&rome).await, Err("no holder".to_owned()));
}
