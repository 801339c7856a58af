//! The controller-manager's client to an in-band peer, built as it builds it (the identity
//! Secret's kubeconfig, with `proxyURL`), reaches a real API server only through `liqo-proxy`
//! (the binary): the API server's certificate verifies against its own name through the
//! tunnel, the proxy logs the source of every CONNECT, requests at once share one tunnel
//! (HTTP/2) while a watch takes its own, and a proxy whose allow-list lacks the API server
//! refuses it (the client's request fails).

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::Duration,
};

use base64::{Engine, engine::general_purpose::STANDARD};
use control::consts::keys;
use futures::future::join_all;
use k8s_openapi::{
    ByteString,
    api::core::v1::{Namespace, Secret},
};
use kube::{
    Api, Client, Config,
    api::{ListParams, ObjectMeta, WatchParams},
    config::KubeConfigOptions,
};
use serde_json::Value;
use testkit::k8s::{self, Clusters, Options};

struct Guard(testkit::Prefix, Vec<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        for c in &mut self.1 {
            // Best effort in a destructor: the proxy may have exited already.
            let _ = c.kill();
            let _ = c.wait();
        }
        // Best effort in a destructor: a failed teardown cannot be reported better here.
        let _ = k8s::down(&self.0);
    }
}

/// Starts `liqo-proxy` on a free port with these `--allow`s; its address and its log lines.
fn proxy(allow: &[String], guard: &mut Guard) -> (String, std::sync::mpsc::Receiver<String>) {
    // A port free now (bound, then released for the proxy).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_liqo-proxy"));
    cmd.args(["--listen", &listen]);
    for a in allow {
        cmd.args(["--allow", a]);
    }
    let mut child = cmd
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[liqo-proxy] {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    guard.1.push(child);
    let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.contains("serving CONNECT"), "{first}");
    (format!("http://{listen}"), rx)
}

fn b64(v: &Value, key: &str) -> Vec<u8> {
    STANDARD.decode(v[key].as_str().unwrap()).unwrap()
}

/// The identity Secret a signed in-band identity would be, for the harness's admin user.
fn identity(kubeconfig: &Value, server: &str, proxy_url: &str) -> Secret {
    let cluster = &kubeconfig["clusters"][0]["cluster"];
    let user = &kubeconfig["users"][0]["user"];
    let data = [
        (keys::API_SERVER_URL, server.as_bytes().to_vec()),
        (
            keys::API_SERVER_CA,
            b64(cluster, "certificate-authority-data"),
        ),
        (keys::CERTIFICATE, b64(user, "client-certificate-data")),
        (keys::PRIVATE_KEY, b64(user, "client-key-data")),
        (keys::NAMESPACE, b"default".to_vec()),
        (keys::PROXY_URL, proxy_url.as_bytes().to_vec()),
    ];
    Secret {
        metadata: ObjectMeta {
            name: Some("liqo-identity-test".into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k.to_owned(), ByteString(v)))
                .collect(),
        ),
        ..Secret::default()
    }
}

async fn peer_client(secret: &Secret) -> Client {
    let kc = liqo_controller_manager::identity::kubeconfig(secret).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    assert!(config.proxy_url.is_some());
    // The peer client the controller-manager and the virtual kubelet use (keepalive on the
    // connection to the proxy, its CONNECT tunnel, TLS inside).
    liqo_controller_manager::identity::PeerClient::from_config(config, liqo_auth::rate::DEFAULT)
        .unwrap()
        .api
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_client_goes_through_the_proxy_and_only_where_allowed() {
    let bins = k8s::binaries().unwrap();
    let opts = Options {
        prefix: format!("inbp{}", std::process::id() % 100_000)
            .parse()
            .unwrap(),
        clusters: 1,
        nodes: 1,
        overlapping: false,
    };
    let set = Clusters::up(&bins, &opts).await.unwrap();
    let mut guard = Guard(set.prefix.clone(), Vec::new());
    let c = &set.clusters[0];
    let kubeconfig: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&c.kubeconfig).unwrap()).unwrap();
    let authority = c.server.trim_start_matches("https://").to_owned();

    // Allowed: the API server's own address (what the auth service hands out).
    let (url, logs) = proxy(std::slice::from_ref(&authority), &mut guard);
    let client = peer_client(&identity(&kubeconfig, &c.server, &url)).await;
    let namespaces = Api::<Namespace>::all(client);
    let nss = namespaces.list(&ListParams::default()).await.unwrap();
    assert!(
        nss.items
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some("default"))
    );
    let line = logs.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        line.contains("CONNECT") && line.contains("from=127.0.0.1:") && line.contains(&authority),
        "{line}"
    );

    // Requests share the API server's HTTP/2 connection: eight at once open no other tunnel.
    let all = ListParams::default();
    let lists = (0..8).map(|_| namespaces.list(&all));
    for (i, list) in join_all(lists).await.into_iter().enumerate() {
        assert!(list.is_ok(), "list {i}: {list:?}");
    }
    if let Ok(line) = logs.recv_timeout(Duration::from_millis(500)) {
        panic!("a request at once with others opened a tunnel of its own: {line}");
    }
    // A watch keeps an HTTP/1.1 connection of its own (a kube-apiserver lets a connection carry
    // 100 streams): a second tunnel.
    let watch = namespaces
        .watch(&WatchParams::default().timeout(5), "0")
        .await
        .unwrap();
    let line = logs.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        line.contains("CONNECT") && line.contains(&authority),
        "{line}"
    );
    if let Ok(line) = logs.recv_timeout(Duration::from_millis(500)) {
        panic!("a watch opened more than one tunnel: {line}");
    }
    drop(watch);

    // Not allowed: a proxy for another target refuses the API server; no request passes.
    let (url, logs) = proxy(&["kubernetes.default:443".to_owned()], &mut guard);
    let client = peer_client(&identity(&kubeconfig, &c.server, &url)).await;
    let e = Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    eprintln!("refused as expected: {e}");
    let line = logs.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        line.contains("status=403") && line.contains("is not allowed"),
        "{line}"
    );
}
