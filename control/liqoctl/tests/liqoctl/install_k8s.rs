//! `liqoctl install` and `uninstall` with Helm on a real API server (kwok nodes run the pods'
//! status, not their containers). The cluster is this test's own: it installs and removes the
//! CRDs and cluster-wide objects (ClusterRoles, webhook configurations) that the other tests'
//! clusters hold with other owners. Refusals first (no helm, a bad flag, an undetectable CIDR,
//! a value the chart refuses: nothing created), then an install on kubeadm's published CIDRs
//! with every component ready, an upgrade that keeps the identity, the values file alone,
//! uninstall refused while peered, then uninstall and `--purge` leaving no Liqo object of any
//! kind.

use std::{os::unix::fs::PermissionsExt, process::Output};

use control::api::discovery::ForeignCluster;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Namespace},
};
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams, PostParams},
    discovery::{Discovery, verbs},
};
use serde_json::json;
use testkit::k8s::{self, Clusters, Options};

use crate::common::{Ctl, DownOnDrop, NEXT, stderr, stdout};

/// Runs liqoctl with `HELM` set to `helm` (None: unset, and a PATH without it).
async fn run(ctl: &Ctl, helm: Option<&str>, args: &[&str]) -> Output {
    let mut c = ctl.command(args);
    match helm {
        Some(h) => {
            c.env("HELM", h);
        }
        None => {
            c.env_remove("HELM").env("PATH", "/nonexistent");
        }
    }
    let out = c.output().await.unwrap();
    eprintln!(
        "$ liqoctl {}\n-> {:?}\nstdout:\n{}stderr:\n{}",
        args.join(" "),
        out.status.code(),
        stdout(&out),
        stderr(&out)
    );
    out
}

async fn no_namespace(client: &Client) {
    let ns = Api::<Namespace>::all(client.clone())
        .get_opt("liqo")
        .await
        .unwrap();
    assert!(ns.is_none(), "nothing created: namespace liqo exists");
}

/// kubeadm's published CIDRs (what `install kubeadm` detects): pod 10.244.0.0/16, service
/// 10.96.0.0/16.
pub(crate) async fn kubeadm_config(client: &Client) {
    Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "kubeadm-config"},
                "data": {"ClusterConfiguration":
                    "kind: ClusterConfiguration\nnetworking:\n  podSubnet: 10.244.0.0/16\n  serviceSubnet: 10.96.0.0/16\n"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
}

/// Every object of every listable kind whose name or labels say Liqo.
pub(crate) async fn liqo_objects(client: &Client) -> Vec<String> {
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let mut found = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) || ar.kind == "Event" {
                continue;
            }
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            let Ok(list) = api.list(&ListParams::default()).await else {
                continue;
            };
            for o in list.items {
                let name = o.metadata.name.clone().unwrap_or_default();
                let labelled = o.metadata.labels.as_ref().is_some_and(|l| {
                    l.get("app.kubernetes.io/part-of")
                        .is_some_and(|v| v == "liqo")
                        || l.keys().any(|k| k.contains("liqo.io"))
                });
                let ns = o.metadata.namespace.clone().unwrap_or_default();
                if name.contains("liqo") || labelled || ns == "liqo" {
                    found.push(format!("{} {ns}/{name}", ar.kind));
                }
            }
        }
    }
    found
}

#[tokio::test]
async fn install_upgrade_and_uninstall_with_helm() {
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let prefix: testkit::Prefix = format!("lq{n}i{}", std::process::id() % 100_000)
        .parse()
        .unwrap();
    let _guard = DownOnDrop(prefix.clone());
    let bins = k8s::binaries().unwrap();
    let helm = bins.path("helm").display().to_string();
    let set = Clusters::up(
        &bins,
        &Options {
            prefix,
            clusters: 1,
            nodes: 1,
            overlapping: true,
        },
    )
    .await
    .unwrap();
    let cluster = &set.clusters[0];
    let client = cluster.client().await.unwrap();
    let ctl = Ctl {
        kubeconfig: set.kubeconfig.clone(),
        context: cluster.name.clone(),
    };
    let h = Some(helm.as_str());

    // Refusals: nothing is created.
    let o = run(
        &ctl,
        None,
        &["install", "kubeadm", "--cluster-name", "rome"],
    )
    .await;
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("helm not found on PATH"),
        "{}",
        stderr(&o)
    );
    let o = run(&ctl, Some("/nonexistent/helm"), &["install"]).await;
    assert!(
        stderr(&o).contains("HELM=/nonexistent/helm is not a file"),
        "{}",
        stderr(&o)
    );
    let o = run(&ctl, h, &["install", "--pod-cidr", "10.244.0.1/16"]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("10.244.0.1/16"), "{}", stderr(&o));
    let o = run(&ctl, h, &["install", "kubeadm", "--cluster-name", "rome"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("pod CIDR (give --pod-cidr) could not be found")
            && stderr(&o).contains("no ConfigMap kube-system/kubeadm-config"),
        "{}",
        stderr(&o)
    );
    no_namespace(&client).await;
    // kubeadm publishes its CIDRs.
    kubeadm_config(&client).await;
    let o = run(
        &ctl,
        h,
        &[
            "install",
            "kubeadm",
            "--cluster-name",
            "rome",
            "--set",
            "networkManager.config.reservedSubnets[0]=10.244.1.0/24",
        ],
    )
    .await;
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("networkManager.config.reservedSubnets[0]"),
        "the chart names the key: {}",
        stderr(&o)
    );
    no_namespace(&client).await;

    // The install: every component ready.
    let t = std::time::Instant::now();
    let o = run(
        &ctl,
        h,
        &[
            "install",
            "kubeadm",
            "--cluster-name",
            "rome",
            "--cluster-labels",
            "region=north",
            "--reserved-subnets",
            "192.168.7.0/24",
            "--timeout",
            "3m",
        ],
    )
    .await;
    assert!(o.status.success(), "{}", stderr(&o));
    println!("TIMING liqoctl install: {:.1} s", t.elapsed().as_secs_f64());
    let out = stdout(&o);
    assert!(
        out.contains("pod CIDR 10.244.0.0/16, service CIDR 10.96.0.0/16"),
        "{out}"
    );
    for c in [
        "Deployment/liqo-controller-manager 1/1",
        "Deployment/liqo-auth 1/1",
        "Deployment/liqo-ipam 1/1",
        "Deployment/liqo-gateway 1/1",
        "DaemonSet/liqo-route 1/1",
    ] {
        assert!(out.contains(&format!("ready: {c}")), "{c}: {out}");
    }
    let ns = Api::<Namespace>::all(client.clone())
        .get("liqo")
        .await
        .unwrap();
    let labels = ns.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("privileged")
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "liqo");
    let identity = cms
        .get("liqo-clusterid-configmap")
        .await
        .unwrap()
        .data
        .unwrap();
    assert_eq!(identity["CLUSTER_NAME"], "rome");
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "liqo");
    let args = |d: &Deployment| -> Vec<String> {
        d.spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .args
            .clone()
            .unwrap_or_default()
    };
    let manager = args(&deploys.get("liqo-controller-manager").await.unwrap()).join(" ");
    assert!(manager.contains("region=north"), "{manager}");
    let ipam = args(&deploys.get("liqo-ipam").await.unwrap()).join(" ");
    assert!(ipam.contains("192.168.7.0/24"), "{ipam}");

    // status (and its alias info): every component ready, with its version; as data too.
    let o = run(&ctl, h, &["status"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let version = format!("(version {})", env!("CARGO_PKG_VERSION"));
    for c in [
        "Deployment/liqo-controller-manager 1/1 ready",
        "DaemonSet/liqo-route 1/1 ready",
    ] {
        assert!(text.contains(&format!("{c} {version}")), "{c}: {text}");
    }
    assert!(text.contains("Cluster name: rome"), "{text}");
    let o = run(&ctl, h, &["info", "-o", "json"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["identity"]["clusterName"], "rome");
    assert_eq!(v["components"].as_array().unwrap().len(), 5, "{v}");

    // An upgrade keeps the name and the ID.
    let o = run(&ctl, h, &["install", "kubeadm"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let again = cms
        .get("liqo-clusterid-configmap")
        .await
        .unwrap()
        .data
        .unwrap();
    assert_eq!(again, identity, "the identity survives an upgrade");

    // The values file alone.
    let dump = cluster.dir.join("values.yaml");
    let dump_s = dump.display().to_string();
    let o = run(
        &ctl,
        h,
        &[
            "install",
            "kubeadm",
            "--only-output-values",
            "--dump-values-path",
            &dump_s,
        ],
    )
    .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&dump).unwrap();
    assert!(
        text.contains("clusterName: rome") && text.contains("10.244.0.0/16"),
        "{text}"
    );
    assert_eq!(
        std::fs::metadata(&dump).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // Refused while peered: nothing removed.
    let fcs: Api<ForeignCluster> = Api::all(client.clone());
    fcs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "milan"},
            "spec": {"clusterIdentity": {"clusterID": crate::common::MILAN_ID, "clusterName": "milan"},
                     "foreignAuthUrl": "https://127.0.0.2:31443",
                     "outgoingPeeringEnabled": "No", "incomingPeeringEnabled": "No"},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    // A past peering (both directions None) is no reason to refuse; an established one is.
    crate::common::set_conditions(
        &fcs,
        "milan",
        &[control::conditions::Condition::Outgoing(
            control::conditions::Peering::Accepted,
        )],
    )
    .await;
    let o = run(&ctl, h, &["uninstall"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("while peered with milan"),
        "{}",
        stderr(&o)
    );
    assert!(
        deploys
            .get_opt("liqo-controller-manager")
            .await
            .unwrap()
            .is_some()
    );
    crate::common::set_conditions(
        &fcs,
        "milan",
        &[control::conditions::Condition::Outgoing(
            control::conditions::Peering::None,
        )],
    )
    .await;

    // Uninstall: the past peering's ForeignCluster, the release and the namespace go, the CRDs
    // stay; --purge takes them too.
    let t = std::time::Instant::now();
    let o = run(&ctl, h, &["uninstall", "--timeout", "2m"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("Removing ForeignCluster milan (no active peering)"),
        "{}",
        stdout(&o)
    );
    assert!(fcs.get_opt("milan").await.unwrap().is_none());
    println!(
        "TIMING liqoctl uninstall: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    no_namespace(&client).await;
    let left = liqo_objects(&client).await;
    // The CRDs stay, and the API groups the API server serves for them.
    assert!(
        !left.is_empty()
            && left.iter().all(|o| {
                o.starts_with("CustomResourceDefinition ") || o.starts_with("APIService ")
            }),
        "only the CRDs stay: {left:?}"
    );
    let o = run(&ctl, h, &["install", "kubeadm", "--cluster-name", "rome"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&ctl, h, &["uninstall", "--purge", "--timeout", "2m"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    // The API server drops the CRDs' API groups shortly after the CRDs.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let left = liqo_objects(&client).await;
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing of Liqo is left: {left:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}
