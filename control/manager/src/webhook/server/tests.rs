use super::*;

use axum::{body::Body, http::Request as HttpRequest};
use serde_json::{Value, json};
use tower::ServiceExt as _;

fn local() -> ClusterIdentity {
    serde_json::from_value(json!({
        "clusterID": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
        "clusterName": "rome",
    }))
    .unwrap()
}

fn nsoff(name: &str, strategy: &str) -> NamespaceOffloading {
    serde_json::from_value(json!({
        "apiVersion": "offloading.liqo.io/v1alpha1",
        "kind": "NamespaceOffloading",
        "metadata": {"name": name, "namespace": "app"},
        "spec": {"podOffloadingStrategy": strategy},
    }))
    .unwrap()
}

fn hooks(answer: Looked, metrics: &Metrics) -> Webhooks {
    Webhooks {
        local: local(),
        lookup: Arc::new(move |ns: String| {
            let answer = answer.clone();
            Box::pin(async move {
                assert_eq!(ns, "app");
                answer
            })
        }),
        metrics: metrics.clone(),
        max_body: 64 * 1024,
        timeout: Duration::from_secs(5),
    }
}

fn review(object: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "operation": "CREATE",
            "namespace": "app",
            "object": object,
        },
    }))
    .unwrap()
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}})
}

async fn post(router: Router, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let r = router
        .oneshot(
            HttpRequest::post(path)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap(),
        )
        .await
        .unwrap();
    let status = r.status();
    let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
        .await
        .unwrap();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, v)
}

#[tokio::test]
async fn a_pod_is_patched_with_the_namespaces_strategy() {
    let m = Metrics::default();
    let r = router(hooks(Ok(Some(nsoff("offloading", "Remote"))), &m));
    let (status, v) = post(r, webhook::POD_PATH, review(pod())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["kind"], "AdmissionReview");
    assert_eq!(v["response"]["uid"], "u-1");
    assert_eq!(v["response"]["allowed"], true);
    assert_eq!(v["response"]["patchType"], "JSONPatch");
    assert!(
        m.encode()
            .contains(r#"webhook_reviews_total{webhook="pod.mutate.liqo.io",outcome="patched"} 1"#),
        "{}",
        m.encode()
    );
}

#[tokio::test]
async fn a_pod_without_a_namespaceoffloading_or_with_a_read_error_is_refused() {
    let m = Metrics::default();
    let (_, v) = post(
        router(hooks(Ok(None), &m)),
        webhook::POD_PATH,
        review(pod()),
    )
    .await;
    assert_eq!(v["response"]["allowed"], false);
    assert_eq!(v["response"]["status"]["code"], 500);
    let msg = v["response"]["status"]["message"].as_str().unwrap();
    assert!(
        msg.contains("\"app\"") && msg.contains("offloading"),
        "{msg}"
    );

    let r = router(hooks(Err("connection refused".to_owned()), &m));
    let (_, v) = post(r, webhook::POD_PATH, review(pod())).await;
    assert_eq!(v["response"]["allowed"], false);
    let msg = v["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.contains("connection refused"), "{msg}");
    assert!(
        m.encode()
            .contains(r#"webhook_reviews_total{webhook="pod.mutate.liqo.io",outcome="error"} 2"#)
    );
}

#[tokio::test]
async fn a_namespaceoffloading_with_another_name_is_denied() {
    let m = Metrics::default();
    let r = router(hooks(Ok(None), &m));
    let obj = serde_json::to_value(nsoff("other", "Local")).unwrap();
    let (status, v) = post(r, webhook::NSOFF_PATH, review(obj)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["response"]["allowed"], false);
    assert_eq!(v["response"]["status"]["code"], 403);
    assert!(
        m.encode().contains(
            r#"webhook_reviews_total{webhook="nsoff.validate.liqo.io",outcome="denied"} 1"#
        )
    );
}

#[tokio::test]
async fn bad_bodies_other_methods_and_paths_and_large_bodies_are_refused() {
    let m = Metrics::default();
    let r = router(hooks(Ok(None), &m));
    let (status, v) = post(r.clone(), webhook::POD_PATH, b"{not json".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        v.as_str().unwrap().contains("not an AdmissionReview"),
        "{v}"
    );
    let (status, _) = post(r.clone(), "/mutate/other", review(pod())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let get = r
        .clone()
        .oneshot(
            HttpRequest::get(webhook::POD_PATH)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    let big = review(json!({"metadata": {"annotations": {"a": "x".repeat(70 * 1024)}}}));
    let (status, _) = post(r, webhook::POD_PATH, big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let text = m.encode();
    assert!(
        text.contains(
            r#"webhook_reviews_total{webhook="pod.mutate.liqo.io",outcome="too_large"} 1"#
        ) && text.contains(
            r#"webhook_reviews_total{webhook="pod.mutate.liqo.io",outcome="bad_request"} 1"#
        ),
        "{text}"
    );
}

#[tokio::test]
async fn a_review_slower_than_the_limit_is_answered_503() {
    let m = Metrics::default();
    let mut h = hooks(Ok(None), &m);
    h.timeout = Duration::from_millis(50);
    h.lookup = Arc::new(|_| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(None)
        })
    });
    let started = std::time::Instant::now();
    let (status, _) = post(router(h), webhook::POD_PATH, review(pod())).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(m.encode().contains(r#"outcome="timeout"} 1"#));
}
