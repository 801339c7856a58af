//! The kubelet API on real apiservers (control-plane.md §2.5): two plain clusters, rome (home)
//! and milan (provider); `liqo_virtual_kubelet::http::serve_on` in a task, its client CA
//! rome's CA (which signed rome's `--kubelet-client-certificate`); the virtual node written by
//! the test (InternalIP 127.0.0.1, kubelet port = the server's, `declaredFeatures:
//! [ExtendWebSocketsToKubelet]`); a home pod bound to it and its copy on milan (created by the
//! test with our origin label, on milan's kwok node, which serves milan's container log file
//! and runs execs locally). Checks, through rome's apiserver: logs (whole, `tailLines`,
//! `follow` streaming a line appended later), 404s for a namespace not offloaded and a remote
//! pod not ours, exec (stdout, stderr, exit code, stdin, 2 MiB in and out at once) with
//! kubectl; directly: a bad query value is a 400 naming it, a client without a certificate is
//! refused, a certificate of the same CA without `nodes/proxy` is a 403, an exec naming a UID
//! that is not the local pod's is a 404; without a client CA, only `/healthz` answers.

use crate::common;
#[path = "http_k8s/support.rs"]
mod support;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use common::{AbortOnDrop, DownOnDrop, create, eventually, patch_status};
use control::api::virtualkubelet::NamespaceMap;
use futures::{AsyncBufReadExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use kube::{Api, api::LogParams};
use liqo_virtual_kubelet::{VkConfig, config, http};
use serde_json::json;
use support::{
    NODE, REMOTE_NS, append_log, curl, identity, kubectl, local_pod, nobody_cert, remote_pod,
};
use testkit::k8s::{self, Clusters};

const ROME_ID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
const MILAN_ID: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";
const TENANT: &str = "liqo-tenant-milan";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_exec_of_offloaded_pods_are_relayed_to_the_provider() {
    let bins = k8s::binaries().unwrap();
    let set = Clusters::up(&bins, &common::options(2)).await.unwrap();
    let _down = DownOnDrop(set.prefix.clone());
    let (rome_c, milan_c) = (set.get("rome").unwrap(), set.get("milan").unwrap());
    let rome = rome_c.client().await.unwrap();
    let milan = milan_c.client().await.unwrap();
    let kwok_node = milan_c.nodes[0].clone();
    k8s::install_crds(&rome, &common::repo("chart/crds"))
        .await
        .unwrap();
    let ns_api = |c: &kube::Client| Api::<Namespace>::all(c.clone());
    for ns in [TENANT, "demo", "plain"] {
        create(&ns_api(&rome), json!({"metadata": {"name": ns}})).await;
    }
    create(&ns_api(&milan), json!({"metadata": {"name": REMOTE_NS}})).await;
    for (c, ns) in [(&rome, "demo"), (&rome, "plain"), (&milan, REMOTE_NS)] {
        let sa: Api<ServiceAccount> = Api::namespaced(c.clone(), ns);
        eventually(60, &format!("ServiceAccount default in {ns}"), || {
            let sa = sa.clone();
            async move { sa.get("default").await.map(drop).map_err(|e| e.to_string()) }
        })
        .await;
    }
    let maps: Api<NamespaceMap> = Api::namespaced(rome.clone(), TENANT);
    create(
        &maps,
        json!({"apiVersion": "virtualkubelet.liqo.io/v1alpha1", "kind": "NamespaceMap",
               "metadata": {"name": "milan", "namespace": TENANT,
                            "labels": {"liqo.io/remote-cluster-id": MILAN_ID}},
               "spec": {}}),
    )
    .await;
    patch_status(
        &maps,
        "milan",
        json!({"currentMapping": {"demo": {"remoteNamespace": REMOTE_NS, "phase": "Accepted"}}}),
    )
    .await;

    // The kubelet API, on a port of its own; the virtual node points at it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let nodes: Api<Node> = Api::all(rome.clone());
    create(&nodes, json!({"metadata": {"name": NODE}})).await;
    nodes
        .patch_status(
            NODE,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
                "declaredFeatures": ["ExtendWebSocketsToKubelet"],
            }})),
        )
        .await
        .unwrap();

    let rome_pods = |ns: &str| Api::<Pod>::namespaced(rome.clone(), ns);
    create(&rome_pods("demo"), local_pod("web", "demo")).await;
    create(&rome_pods("demo"), local_pod("stranger", "demo")).await;
    create(&rome_pods("plain"), local_pod("alone", "plain")).await;
    let milan_pods: Api<Pod> = Api::namespaced(milan.clone(), REMOTE_NS);
    let ours = BTreeMap::from([(
        control::consts::labels::OFFLOADED_ORIGIN.to_owned(),
        ROME_ID.to_owned(),
    )]);
    create(&milan_pods, remote_pod("web", &kwok_node, &ours)).await;
    let theirs = BTreeMap::from([(
        control::consts::labels::OFFLOADED_ORIGIN.to_owned(),
        "someone-else".to_owned(),
    )]);
    create(&milan_pods, remote_pod("stranger", &kwok_node, &theirs)).await;
    eventually(60, "remote pod web running", || {
        let pods = milan_pods.clone();
        async move {
            let p = pods.get("web").await.map_err(|e| e.to_string())?;
            match p.status.and_then(|s| s.phase).as_deref() {
                Some("Running") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    append_log(milan_c, &["first line", "second line", "third line"]);

    let cfg = Arc::new(VkConfig {
        local: rome.clone(),
        remote: config::Remote::from_config(
            common::config(milan_c).await,
            liqo_auth::rate::DEFAULT,
        )
        .unwrap(),
        home: identity(ROME_ID, "rome"),
        foreign: identity(MILAN_ID, "milan"),
        tenant_namespace: TENANT.into(),
        offer: "milan".into(),
        node_ip: "127.0.0.1".parse().unwrap(),
        listen: "127.0.0.1:0".parse().unwrap(),
        client_ca: Some(rome_c.ca_crt()),
        ipam: None,
        liqo_network: false,
        pod_workers: 4,
        lease_duration: config::DEFAULT_LEASE_DURATION,
        ping_interval: config::DEFAULT_PING_INTERVAL,
        ping_timeout: config::DEFAULT_PING_TIMEOUT,
        extra_labels: BTreeMap::new(),
        apiserver_support: false,
        home_api: None,
        reflection: Default::default(),
    });
    let _server = AbortOnDrop(tokio::spawn(http::serve_on(cfg.clone(), listener)));

    // Logs through rome's apiserver.
    let web = rome_pods("demo");
    let lp = |tail: Option<i64>| LogParams {
        container: Some("c".into()),
        tail_lines: tail,
        ..LogParams::default()
    };
    let all = eventually(30, "the log through the home apiserver", || {
        let web = web.clone();
        let lp = lp(None);
        async move { web.logs("web", &lp).await.map_err(|e| e.to_string()) }
    })
    .await;
    assert_eq!(all, "first line\nsecond line\nthird line\n");
    assert_eq!(web.logs("web", &lp(Some(1))).await.unwrap(), "third line\n");
    let (code, out, err) = kubectl(
        &bins,
        rome_c,
        &["logs", "-n", "demo", "web", "--tail=2"],
        "",
    )
    .await;
    assert_eq!(
        (code, out.as_str()),
        (0, "second line\nthird line\n"),
        "{err}"
    );

    // follow: the lines so far, then one appended later, streamed.
    let follow = LogParams {
        follow: true,
        ..lp(Some(1))
    };
    let mut lines = Box::pin(web.log_stream("web", &follow).await.unwrap().lines());
    let within = Duration::from_secs(20);
    let line = tokio::time::timeout(within, lines.try_next()).await;
    assert_eq!(line.unwrap().unwrap().as_deref(), Some("third line"));
    append_log(milan_c, &["fourth line"]);
    let line = tokio::time::timeout(within, lines.try_next()).await;
    assert_eq!(line.unwrap().unwrap().as_deref(), Some("fourth line"));
    drop(lines);

    // Not ours: 404s (the apiserver keeps the code, not a kubelet's 404 message: that one is
    // checked directly below).
    for (ns, pod) in [("demo", "stranger"), ("plain", "alone")] {
        match rome_pods(ns).logs(pod, &lp(None)).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 404, "{s:?}"),
            other => panic!("the log of {ns}/{pod}: expected a 404, got {other:?}"),
        }
    }

    // Directly, as the apiserver: a bad value is a 400 naming it; no certificate, no answer.
    let (crt, key) = rome_c.kubelet_client();
    let (crt, key) = (crt.display().to_string(), key.display().to_string());
    let (code, body) = curl(
        port,
        "/containerLogs/demo/web/c?tailLines=minus",
        &["--cert", &crt, "--key", &key],
    )
    .await;
    assert_eq!(code, 0, "{body}");
    assert!(body.ends_with("\n400"), "{body}");
    assert!(
        body.contains("\"minus\"") && body.contains("tailLines"),
        "{body}"
    );
    let (code, body) = curl(port, "/healthz", &["--cert", &crt, "--key", &key]).await;
    assert_eq!((code, body.as_str()), (0, "ok\n200"));
    let (code, body) = curl(
        port,
        "/containerLogs/demo/stranger/c",
        &["--cert", &crt, "--key", &key],
    )
    .await;
    assert_eq!(code, 0, "{body}");
    assert!(body.ends_with("\n404"), "{body}");
    assert!(body.contains("was not offloaded by this cluster"), "{body}");
    let (code, body) = curl(
        port,
        "/containerLogs/plain/alone/c",
        &["--cert", &crt, "--key", &key],
    )
    .await;
    assert!(body.ends_with("\n404"), "{code} {body}");
    assert!(body.contains("is not offloaded to cluster"), "{body}");
    // A user whose certificate the same CA signed, without nodes/proxy: 403 naming them.
    let (crt, key) = nobody_cert(rome_c);
    let (code, body) = curl(
        port,
        "/containerLogs/demo/web/c",
        &["--cert", &crt, "--key", &key],
    )
    .await;
    assert_eq!(code, 0, "{body}");
    assert!(body.ends_with("\n403"), "{body}");
    assert!(body.contains("user=nobody"), "{body}");
    let (code, body) = curl(port, "/containerLogs/demo/web/c", &[]).await;
    assert_ne!(code, 0, "a client without a certificate got {body:?}");

    // Exec through rome's apiserver (kwok runs the command on this host).
    let (code, out, err) = kubectl(
        &bins,
        rome_c,
        &[
            "exec",
            "-n",
            "demo",
            "web",
            "-c",
            "c",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3",
        ],
        "",
    )
    .await;
    // kwok reports a non-zero exit as an error Status naming it (kubectl exits 1, directly
    // against kwok too): the Status relayed is the provider's.
    assert_eq!((code, out.as_str()), (1, "out\n"), "stderr: {err}");
    assert!(err.starts_with("err\n"), "{err}");
    assert!(err.contains("exit status 3"), "{err}");
    // stdin: kwok never closes a local command's stdin (`cat` would wait forever, directly
    // against kwok too), so the command ends by itself after one line.
    let (code, out, err) = kubectl(
        &bins,
        rome_c,
        &["exec", "-i", "-n", "demo", "web", "--", "head", "-n1"],
        "to stdin and back\nnot read\n",
    )
    .await;
    assert_eq!(
        (code, out.as_str()),
        (0, "to stdin and back\n"),
        "stderr: {err}"
    );
    // Much stdin while much output comes back: neither waits on the other (the remote stdin
    // is written by its own task).
    let big = "0123456789abcde\n".repeat(128 * 1024);
    let (code, out, err) = kubectl(
        &bins,
        rome_c,
        &[
            "exec",
            "-i",
            "-n",
            "demo",
            "web",
            "--",
            "head",
            "-c",
            &big.len().to_string(),
        ],
        &big,
    )
    .await;
    assert_eq!((code, out.len()), (0, big.len()), "stderr: {err}");
    assert!(out == big, "the output differs from the input");
    // A UID in the path that is not the local pod's: 404 naming both.
    let (crt, key) = rome_c.kubelet_client();
    let (crt, key) = (crt.display().to_string(), key.display().to_string());
    let (code, body) = curl(
        port,
        "/exec/demo/web/0000-stale/c?command=true&output=1",
        &[
            "--cert",
            &crt,
            "--key",
            &key,
            "--http1.1",
            "-H",
            "Connection: Upgrade",
            "-H",
            "Upgrade: websocket",
            "-H",
            "Sec-WebSocket-Version: 13",
            "-H",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            "-H",
            "Sec-WebSocket-Protocol: v5.channel.k8s.io",
        ],
    )
    .await;
    assert_eq!(code, 0, "{body}");
    assert!(body.ends_with("\n404"), "{body}");
    assert!(body.contains("not the requested \"0000-stale\""), "{body}");
    let (code, _, err) = kubectl(
        &bins,
        rome_c,
        &["exec", "-n", "demo", "stranger", "--", "true"],
        "",
    )
    .await;
    assert_ne!(code, 0, "an exec into a pod that is not ours: {err}");

    // Without a client CA: /healthz only, anything else refused.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let open_port = listener.local_addr().unwrap().port();
    let open = Arc::new(VkConfig {
        client_ca: None,
        ..(*cfg).clone()
    });
    let _open = AbortOnDrop(tokio::spawn(http::serve_on(open, listener)));
    let (code, body) = curl(open_port, "/healthz", &[]).await;
    assert_eq!((code, body.as_str()), (0, "ok\n200"));
    let (code, body) = curl(open_port, "/containerLogs/demo/web/c", &[]).await;
    assert_eq!(code, 0, "{body}");
    assert!(body.ends_with("\n403"), "{body}");
    assert!(body.contains("only /healthz"), "{body}");
}
