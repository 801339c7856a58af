//! The `liqo-auth` binary against a real apiserver (the `testkit::k8s` harness, one cluster,
//! "milan"): it serves with its kube config's apiserver URL and CA, is found through Service
//! `liqo-auth`, counts requests on its metrics endpoint and exits 0 on SIGTERM.

#[allow(
    dead_code,
    reason = "helpers shared with the other test files, not all used here"
)]
use crate::common;

use std::time::{Duration, Instant};

use control::{
    consts::{auth, objects},
    identity::AuthToken,
};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use liqo_auth::{client::AuthClient, tokens};
use testkit::k8s;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_with_its_kube_config_counts_requests_and_stops_on_sigterm() {
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, ONE).await.unwrap();
    let cluster = &set.clusters[0];
    let admin = cluster.client().await.unwrap();
    let ca = cluster_ca(&cluster.kubeconfig);
    install(&admin).await;

    let (port, metrics_port) = (free_port(), free_port());
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_liqo-auth"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
        .args(["-n", "liqo"])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .spawn()
        .unwrap();
    let mut guard = KillOnDrop(Some(child));
    let url = format!("https://127.0.0.1:{port}");
    let http = AuthClient::new(true);
    let ids = eventually(30, "liqo-auth answers GET /ids", || {
        let (http, url) = (http.clone(), url.clone());
        async move { http.ids(&url).await.ok() }
    })
    .await;
    assert_eq!(ids.cluster_name.as_str(), "milan");

    // Its URL as peers find it: Service liqo-auth, a LoadBalancer whose ingress is loopback (what
    // the harness does for a local process).
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": objects::AUTH_SERVICE, "namespace": "liqo"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "https", "port": port}]},
    }))
    .unwrap();
    let services = Api::<Service>::namespaced(admin.clone(), "liqo");
    services.create(&PostParams::default(), &svc).await.unwrap();
    services
        .patch_status(
            objects::AUTH_SERVICE,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}},
            })),
        )
        .await
        .unwrap();
    let discovered = liqo_auth::url::discover(&admin, "liqo", &Default::default())
        .await
        .unwrap();
    assert_eq!(discovered, url);
    assert_eq!(http.ids(&discovered).await.unwrap(), ids);

    // It made the local token; a wrong one is refused, a right one gets the identity with its
    // kube config's apiserver URL and CA.
    let milan_token = tokens::local_token(&admin, "liqo").await.unwrap();
    let consumer = identity(ROME_ID, "rome");
    let ours = AuthToken::generate().unwrap();
    let (key, pem) = csr(ROME_ID, auth::CSR_ORGANIZATION);
    let wrong = AuthToken::generate().unwrap();
    let e = http
        .certificate(&url, &request(&consumer, &ours, Some(&wrong), &pem))
        .await
        .unwrap_err();
    assert_eq!(e.http_status(), Some(403), "{e}");
    let resp = http
        .certificate(&url, &request(&consumer, &ours, Some(&milan_token), &pem))
        .await
        .unwrap();
    assert_eq!(resp.api_server_url, cluster.server);
    assert_eq!(resp.api_server_ca.as_deref(), Some(&ca[..]));
    // The same CSR again without a proof of possession: refused, counted as a replay; with one
    // (a lost reply): the same certificate, counted as reissued.
    let e = http
        .certificate(&url, &request(&consumer, &ours, Some(&milan_token), &pem))
        .await
        .unwrap_err();
    assert_eq!(e.http_status(), Some(403), "{e}");
    let again = http
        .certificate(
            &url,
            &proved(request(&consumer, &ours, Some(&milan_token), &pem), &key, 1),
        )
        .await
        .unwrap();
    assert_eq!(again.certificate, resp.certificate);

    let metrics = http_get(&format!("127.0.0.1:{metrics_port}"), "/metrics")
        .await
        .unwrap();
    for line in [
        r#"liqo_auth_requests_total{path="certificate",outcome="wrong_token"} 1"#,
        r#"liqo_auth_requests_total{path="certificate",outcome="accepted"} 1"#,
        r#"liqo_auth_requests_total{path="certificate",outcome="reissued"} 1"#,
        r#"liqo_auth_requests_total{path="certificate",outcome="replay"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }

    let mut child = guard.0.take().unwrap();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            guard.0 = Some(child);
            panic!("liqo-auth still running 10 s after SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "liqo-auth exited with {status}");
    set.release().await.unwrap();
}
