//! Two clusters installed by `liqoctl install kubeadm`, their components run from what the
//! chart created (`testkit::liqo::from_chart`: each Deployment's image, arguments, environment,
//! ServiceAccount and mounted files read back; only the pod network is plumbed), peer and
//! offload as in the earlier issues: rome peers with milan by `liqoctl generate peer-command`,
//! its virtual node gets Ready, a namespace offloaded by `liqoctl offload namespace` runs a pod
//! on milan. `liqoctl uninstall` is refused while peered; after `unoffload` and `unpeer`, both
//! clusters are uninstalled with `--purge` and no Liqo object of any kind is left.
//!
//! Its own clusters: it installs and removes the CRDs and cluster-wide objects that the other
//! tests' clusters hold with other owners.

use std::{
    collections::BTreeMap,
    process::{Output, Stdio},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::{
    Api,
    api::{ListParams, PostParams},
};
use serde_json::json;
use testkit::{
    k8s::{self, Clusters, Options},
    liqo::from_chart,
};

use crate::common::{Ctl, DownOnDrop, NEXT, stderr, stdout};
use crate::install_k8s::{kubeadm_config, liqo_objects};

const LIQOCTL: &str = env!("CARGO_BIN_EXE_liqoctl");

async fn run(ctl: &Ctl, helm: &str, args: &[&str]) -> Output {
    let mut c = ctl.command(args);
    c.env("HELM", helm);
    let out = c.output().await.unwrap();
    eprintln!(
        "$ liqoctl --context {} {}\n-> {:?}\nstdout:\n{}stderr:\n{}",
        ctl.context,
        args.join(" "),
        out.status.code(),
        stdout(&out),
        stderr(&out)
    );
    out
}

/// Waits for `f`; on a timeout, panics with the end of every component's log.
async fn eventually<F, Fut>(logs: &[String], secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match f().await {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => {
                for log in logs {
                    let text = std::fs::read_to_string(log).unwrap_or_default();
                    let lines: Vec<&str> = text.lines().collect();
                    let tail = lines[lines.len().saturating_sub(30)..].join("\n");
                    eprintln!("== the end of {log}:\n{tail}");
                }
                panic!("{what} after {secs} s: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

fn ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_installed_by_liqoctl_peer_offload_and_uninstall_clean() {
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let prefix: testkit::Prefix = format!("lq{n}p{}", std::process::id() % 100_000)
        .parse()
        .unwrap();
    let _guard = DownOnDrop(prefix.clone());
    let bins = k8s::binaries().unwrap();
    let helm = bins.path("helm").display().to_string();
    let set = Clusters::up(
        &bins,
        &Options {
            prefix,
            clusters: 2,
            nodes: 1,
            overlapping: true,
        },
    )
    .await
    .unwrap();
    let ctl = |name: &str| Ctl {
        kubeconfig: set.kubeconfig.clone(),
        context: name.to_owned(),
    };
    let mut clients = BTreeMap::new();
    for c in &set.clusters {
        clients.insert(c.name.clone(), c.client().await.unwrap());
    }

    // The install, and the components run from what it created.
    let mut logs = Vec::new();
    for c in &set.clusters {
        kubeadm_config(&clients[&c.name]).await;
        let auth = k8s::free_port().unwrap();
        let t = Instant::now();
        let o = run(
            &ctl(&c.name),
            &helm,
            &[
                "install",
                "kubeadm",
                "--cluster-name",
                &c.name,
                "--set",
                &format!("auth.config.portOverride={auth}"),
                // The components run here as processes of this host, not in their pods: a
                // virtual kubelet the controller-manager would start as a child process finds
                // none of its pod's files. Tasks of the controller-manager instead (the chart's
                // process mode runs in pods on real nodes: e2e's real_nodes test).
                "--set",
                "virtualKubelet.mode=in-process",
                "--set",
                "virtualKubelet.apiServerSupport=false",
                "--timeout",
                "3m",
            ],
        )
        .await;
        assert!(o.status.success(), "{}", stderr(&o));
        let pinned: from_chart::Pinned =
            [(("liqo-auth".to_owned(), "https".to_owned()), auth)].into();
        let running = from_chart::run(c, &pinned).await.unwrap();
        assert_eq!(running.len(), from_chart::DEPLOYMENTS.len());
        logs.extend(running.iter().map(|r| r.proc.log.clone()));
        println!(
            "TIMING {}: liqoctl install and the chart's components serving: {:.1} s",
            c.name,
            t.elapsed().as_secs_f64()
        );
    }
    let rome = clients["rome"].clone();
    let milan = clients["milan"].clone();

    // rome peers with milan: milan's peer command, run against rome.
    let t = Instant::now();
    let cmd = run(
        &ctl("milan"),
        &helm,
        &["generate", "peer-command", "--only-command"],
    )
    .await;
    assert!(cmd.status.success(), "{}", stderr(&cmd));
    let dir = std::path::Path::new(LIQOCTL).parent().unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut bash = std::process::Command::new("bash")
        .args(["-c", &format!("set -e; {}", stdout(&cmd).trim())])
        .env("KUBECONFIG", &set.get("rome").unwrap().kubeconfig)
        .env("PATH", &path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(bash.stdin.take());
    let done = bash.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "peer: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    eventually(&logs, 120, "rome's virtual node liqo-milan Ready", || {
        let rome = rome.clone();
        async move {
            let n = Api::<Node>::all(rome)
                .get_opt("liqo-milan")
                .await
                .map_err(|e| e.to_string())?
                .ok_or("no node")?;
            if ready(&n) {
                Ok(())
            } else {
                Err("not Ready".into())
            }
        }
    })
    .await;
    println!(
        "TIMING peering rome -> milan to the virtual node Ready: {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // A namespace offloaded, a pod of it on the virtual node, run on milan.
    Api::<Namespace>::all(rome.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "liqo-demo"}})).unwrap(),
        )
        .await
        .unwrap();
    let o = run(
        &ctl("rome"),
        &helm,
        &[
            "offload",
            "namespace",
            "liqo-demo",
            "--namespace-mapping-strategy",
            "EnforceSameName",
        ],
    )
    .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "nodeSelector": {"liqo.io/type": "virtual-node"},
            "containers": [{"name": "web", "image": "registry.example/web:1"}],
        },
    }))
    .unwrap();
    Api::<Pod>::namespaced(rome.clone(), "liqo-demo")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    eventually(
        &logs,
        90,
        "web Running on milan and on rome's virtual node",
        || {
            let (rome, milan) = (rome.clone(), milan.clone());
            async move {
                let home = Api::<Pod>::namespaced(rome, "liqo-demo")
                    .get("web")
                    .await
                    .map_err(|e| e.to_string())?;
                let node = home.spec.as_ref().and_then(|s| s.node_name.clone());
                if node.as_deref() != Some("liqo-milan") {
                    return Err(format!("home pod on {node:?}"));
                }
                let remote = Api::<Pod>::namespaced(milan, "liqo-demo")
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                if !remote.items.iter().any(running) {
                    return Err(format!(
                        "{} pods on milan, none Running",
                        remote.items.len()
                    ));
                }
                if !running(&home) {
                    return Err("home pod not Running".into());
                }
                Ok(())
            }
        },
    )
    .await;

    // Uninstall refused while peered: nothing removed.
    let o = run(&ctl("rome"), &helm, &["uninstall"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("milan"), "{}", stderr(&o));
    let fcs: Api<control::api::discovery::ForeignCluster> = Api::all(rome.clone());
    assert!(
        fcs.get_opt("milan").await.unwrap().is_some(),
        "the ForeignCluster stays"
    );
    assert!(
        Api::<Namespace>::all(rome.clone())
            .get_opt("liqo")
            .await
            .unwrap()
            .is_some(),
        "the release's namespace stays"
    );

    // Unoffload, unpeer, uninstall both: nothing of Liqo is left.
    let o = run(
        &ctl("rome"),
        &helm,
        &["unoffload", "namespace", "liqo-demo"],
    )
    .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&ctl("rome"), &helm, &["unpeer", "out-of-band", "milan"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    // The user's own namespace, no longer offloaded.
    Api::<Namespace>::all(rome.clone())
        .delete("liqo-demo", &Default::default())
        .await
        .unwrap();
    for name in ["rome", "milan"] {
        let o = run(
            &ctl(name),
            &helm,
            &["uninstall", "--purge", "--timeout", "2m"],
        )
        .await;
        assert!(o.status.success(), "{name}: {}", stderr(&o));
    }
    for (name, client) in &clients {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = liqo_objects(client).await;
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name}: nothing of Liqo is left: {left:?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
