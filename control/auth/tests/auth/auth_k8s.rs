//! liqo-auth against a real apiserver (the `testkit::k8s` harness, one cluster, "milan" as its
//! Liqo identity): the service runs in-process on 127.0.0.1:0, with an admin client, then with
//! the token of a ServiceAccount bound only by `chart/files/liqo-auth-ClusterRole.yaml` (the
//! binary: binary_k8s.rs; the limits: hardening_k8s.rs).
//! A consumer asks for an identity with a real CSR; the certificate the kcm signs authenticates
//! it as its cluster ID, with the basic peering permissions in its tenant namespace and nothing
//! else; wrong tokens, bad CSRs and second requests with another CSR are refused and leave
//! nothing behind; the same CSR again is answered the same certificate only with a proof of
//! possession of its key newer than the last (a replayed request gets 403 and nothing stored).

#[allow(
    dead_code,
    reason = "helpers shared with the other test files, not all used here"
)]
use crate::common;

use std::time::Instant;

use control::{
    api::discovery::{ClusterIdentity, ResourceRequest},
    consts::{auth, keys, labels, objects},
    identity::{AuthToken, CertificateIdentityRequest},
    names,
};
use k8s_openapi::api::{
    authentication::v1::SelfSubjectReview,
    certificates::v1::CertificateSigningRequest,
    core::v1::{Namespace, Pod, Secret},
    rbac::v1::{ClusterRole, RoleBinding},
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use liqo_auth::{
    client::{AuthClient, ClientError},
    tokens,
};
use testkit::k8s;

use common::*;

/// Sends a request that must be refused with `status`.
async fn refused(url: &str, request: &CertificateIdentityRequest, status: u16) -> ClientError {
    let e = AuthClient::new(true)
        .certificate(url, request)
        .await
        .unwrap_err();
    assert_eq!(e.http_status(), Some(status), "{e}");
    e
}

/// Refusals that must create nothing, then a good request whose certificate works, then a
/// second request refused.
async fn issue_and_check(
    admin: &Client,
    running: &Running,
    milan_token: &AuthToken,
    consumer: &ClusterIdentity,
    apiserver: &str,
    ca: &[u8],
    alg: &'static rcgen::SignatureAlgorithm,
) {
    let (url, metrics) = (running.url.as_str(), &running.metrics);
    let http = AuthClient::new(true);
    let tenant = names::tenant_namespace(consumer);
    let consumer_token = AuthToken::generate().unwrap();
    let id = consumer.cluster_id.as_str();

    // Refusals: nothing created.
    let (_, good_csr) = csr(id, auth::CSR_ORGANIZATION);
    let wrong = AuthToken::generate().unwrap();
    let e = refused(
        url,
        &request(consumer, &consumer_token, Some(&wrong), &good_csr),
        403,
    )
    .await;
    assert!(!e.to_string().contains(wrong.expose()));
    refused(
        url,
        &request(consumer, &consumer_token, None, &good_csr),
        401,
    )
    .await;
    let (_, other_cn) = csr(ROME_ID.replace('0', "1").as_str(), auth::CSR_ORGANIZATION);
    let e = refused(
        url,
        &request(consumer, &consumer_token, Some(milan_token), &other_cn),
        400,
    )
    .await;
    assert!(e.to_string().contains("certificateSigningRequest"), "{e}");
    let (_, masters) = csr(id, "system:masters");
    refused(
        url,
        &request(consumer, &consumer_token, Some(milan_token), &masters),
        400,
    )
    .await;
    // A request carrying the provider's own cluster ID.
    let (_, own) = csr(MILAN_ID, auth::CSR_ORGANIZATION);
    let e = refused(
        url,
        &request(
            &identity(MILAN_ID, "milan"),
            &consumer_token,
            Some(milan_token),
            &own,
        ),
        400,
    )
    .await;
    assert!(e.to_string().contains("own ID"), "{e}");
    assert!(
        !namespace_exists(admin, tenant.as_str()).await,
        "refusals made {tenant}"
    );
    assert_eq!(remote_tenant_csrs(admin).await, 0);
    assert!(
        tokens::remote_token(admin, "liqo", &consumer.cluster_id)
            .await
            .unwrap()
            .is_none()
    );

    // A leftover of an attempt that crashed before storing its record is cleaned up.
    let (_, leftover) = csr(id, auth::CSR_ORGANIZATION);
    let leftover: CertificateSigningRequest = serde_json::from_value(serde_json::json!({
        "metadata": {
            "generateName": "liqo-identity-",
            "labels": {labels::REMOTE_TENANT_CSR: "true", labels::CLUSTER_ID: id},
        },
        "spec": {
            "request": b64(leftover.as_bytes()),
            "signerName": auth::CSR_SIGNER,
            "usages": ["digital signature", "key encipherment", "client auth"],
        },
    }))
    .unwrap();
    Api::<CertificateSigningRequest>::all(admin.clone())
        .create(&PostParams::default(), &leftover)
        .await
        .unwrap();
    assert_eq!(remote_tenant_csrs(admin).await, 1);

    // A good request, with a proof of possession (as our consumers send).
    let (key, good_csr) = csr_with(id, auth::CSR_ORGANIZATION, alg);
    let t = Instant::now();
    let first = proved(
        request(consumer, &consumer_token, Some(milan_token), &good_csr),
        &key,
        1_000,
    );
    let first_bytes = serde_json::to_vec(&first).unwrap();
    let (status, body) = http
        .raw(
            url,
            auth::CERTIFICATE_PATH,
            http::Method::POST,
            Some(first_bytes.clone()),
        )
        .await
        .unwrap();
    assert_eq!(status, 202, "{}", String::from_utf8_lossy(&body));
    let resp: control::identity::CertificateIdentityResponse =
        control::identity::decode(&body).unwrap();
    eprintln!(
        "identity for {id} issued in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(resp.namespace, tenant);
    assert_eq!(resp.api_server_url, apiserver);
    assert_eq!(resp.api_server_ca.as_deref(), Some(ca));
    let cert_pem = String::from_utf8(resp.certificate.clone()).unwrap();
    assert!(cert_pem.contains("BEGIN CERTIFICATE"), "{cert_pem}");

    // Side effects.
    let ns = Api::<Namespace>::all(admin.clone())
        .get(tenant.as_str())
        .await
        .unwrap();
    let ns_labels = ns.metadata.labels.unwrap();
    assert_eq!(
        ns_labels.get(labels::CLUSTER_ID).map(String::as_str),
        Some(id)
    );
    assert_eq!(
        ns_labels.get(labels::TENANT_NAMESPACE).map(String::as_str),
        Some("true")
    );
    // It says which cluster it lives in (the consumer checks its API server with it).
    assert_eq!(
        ns.metadata
            .annotations
            .unwrap_or_default()
            .get(control::consts::annotations::HOST_CLUSTER_ID)
            .map(String::as_str),
        Some(MILAN_ID)
    );
    let record = Api::<Secret>::namespaced(admin.clone(), tenant.as_str())
        .get(objects::REMOTE_CERTIFICATE_SECRET)
        .await
        .unwrap();
    let data = record.data.unwrap();
    assert_eq!(data[keys::CSR].0, good_csr.as_bytes());
    assert_eq!(data[keys::CERTIFICATE].0, resp.certificate);
    let stored = tokens::remote_token(admin, "liqo", &consumer.cluster_id)
        .await
        .unwrap()
        .expect("the origin token is stored");
    assert_eq!(stored, consumer_token);
    let rb = Api::<RoleBinding>::namespaced(admin.clone(), tenant.as_str())
        .get("liqo-binding-liqo-remote-peering-basic")
        .await
        .unwrap();
    assert_eq!(rb.role_ref.name, "liqo-remote-peering-basic");
    // Only the fixed basic role: another ClusterRole labelled basic is not bound.
    let bound: Vec<_> = Api::<RoleBinding>::namespaced(admin.clone(), tenant.as_str())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|rb| rb.metadata.name)
        .collect();
    assert_eq!(bound, ["liqo-binding-liqo-remote-peering-basic"]);
    let subject = &rb.subjects.unwrap()[0];
    assert_eq!((subject.kind.as_str(), subject.name.as_str()), ("User", id));
    assert_eq!(
        remote_tenant_csrs(admin).await,
        0,
        "the CSR object is deleted"
    );

    // The certificate authenticates the consumer as its cluster ID, with the basic
    // permissions in its tenant namespace and nothing else.
    let user = format!(
        "    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(&resp.certificate),
        b64(key.serialize_pem().as_bytes())
    );
    let peer = client_of(
        &resp.api_server_url,
        resp.api_server_ca.as_deref().unwrap(),
        &user,
    )
    .await;
    let review = Api::<SelfSubjectReview>::all(peer.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let info = review.status.unwrap().user_info.unwrap();
    assert_eq!(info.username.as_deref(), Some(id));
    assert!(
        info.groups
            .unwrap_or_default()
            .contains(&"liqo.io".to_owned())
    );
    let rrs = Api::<ResourceRequest>::namespaced(peer.clone(), tenant.as_str())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(rrs.items.is_empty());
    match Api::<Pod>::namespaced(peer.clone(), "default")
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("listing pods in default: {other:?}"),
    }
    match Api::<ResourceRequest>::namespaced(peer, "liqo")
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("listing ResourceRequests in liqo: {other:?}"),
    }

    // The same CSR again. A replay of the request byte for byte (its proof already seen), the
    // request without a proof, or with an older proof: 403, nothing stored answered, nothing
    // new (no CSR object, the record unchanged), each counted.
    let record = || async {
        Api::<Secret>::namespaced(admin.clone(), tenant.as_str())
            .get(objects::REMOTE_CERTIFICATE_SECRET)
            .await
            .unwrap()
    };
    let proof_time = |s: &Secret| {
        s.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(control::consts::annotations::LAST_PROOF_TIME))
            .cloned()
    };
    let before = record().await;
    assert_eq!(proof_time(&before).as_deref(), Some("1000"));
    let replays_before = certificate_count(metrics, "replay");
    let unproved = serde_json::to_vec(&request(
        consumer,
        &consumer_token,
        Some(milan_token),
        &good_csr,
    ))
    .unwrap();
    let older = serde_json::to_vec(&proved(
        request(consumer, &consumer_token, Some(milan_token), &good_csr),
        &key,
        999,
    ))
    .unwrap();
    for (what, bytes) in [
        ("a byte-for-byte replay", &first_bytes),
        ("no proof", &unproved),
        ("an older proof", &older),
    ] {
        let (status, body) = http
            .raw(
                url,
                auth::CERTIFICATE_PATH,
                http::Method::POST,
                Some(bytes.clone()),
            )
            .await
            .unwrap();
        let body = String::from_utf8_lossy(&body);
        assert_eq!(status, 403, "{what}: {body}");
        assert!(body.contains("prove possession"), "{what}: {body}");
        for secret in [tenant.as_str(), "BEGIN CERTIFICATE", apiserver] {
            assert!(
                !body.contains(secret),
                "{what} disclosed {secret:?}: {body}"
            );
        }
    }
    assert_eq!(certificate_count(metrics, "replay"), replays_before + 3);
    let after = record().await;
    assert_eq!(
        after.metadata.resource_version, before.metadata.resource_version,
        "the record is rewritten"
    );
    assert_eq!(remote_tenant_csrs(admin).await, 0, "a CSR object made");

    // Its reply lost, the consumer asks again with a newer proof: 202 with the same
    // certificate, the proof's time recorded; that request replayed is refused in turn.
    let retry = proved(
        request(consumer, &consumer_token, Some(milan_token), &good_csr),
        &key,
        2_000,
    );
    let again = http.certificate(url, &retry).await.unwrap();
    assert_eq!(again.certificate, resp.certificate);
    assert_eq!(again.namespace, tenant);
    assert_eq!(again.api_server_url, apiserver);
    assert_eq!(again.api_server_ca.as_deref(), Some(ca));
    let after = record().await;
    assert_eq!(proof_time(&after).as_deref(), Some("2000"));
    assert_eq!(after.data, before.data);
    refused(url, &retry, 403).await;
    assert_eq!(certificate_count(metrics, "replay"), replays_before + 4);
    assert_eq!(remote_tenant_csrs(admin).await, 0, "a CSR object made");
    let namespaces = Api::<Namespace>::all(admin.clone())
        .list(&ListParams::default().labels(&format!("{}={id}", labels::CLUSTER_ID)))
        .await
        .unwrap();
    assert_eq!(namespaces.items.len(), 1, "a second tenant namespace");

    // A second request for the same cluster ID with another CSR is refused, and changes
    // nothing.
    let (_, again) = csr(id, auth::CSR_ORGANIZATION);
    refused(
        url,
        &request(consumer, &consumer_token, Some(milan_token), &again),
        403,
    )
    .await;
    let record = Api::<Secret>::namespaced(admin.clone(), tenant.as_str())
        .get(objects::REMOTE_CERTIFICATE_SECRET)
        .await
        .unwrap();
    assert_eq!(record.data.unwrap()[keys::CERTIFICATE].0, resp.certificate);
    assert_eq!(remote_tenant_csrs(admin).await, 0);

    // The same cluster ID under another cluster name finds the same tenant namespace (by
    // label): refused, its token not overwritten, no second namespace.
    let renamed = identity(id, "othername");
    let other_token = AuthToken::generate().unwrap();
    refused(
        url,
        &request(&renamed, &other_token, Some(milan_token), &again),
        403,
    )
    .await;
    let stored = tokens::remote_token(admin, "liqo", &consumer.cluster_id)
        .await
        .unwrap();
    assert_eq!(
        stored.as_ref(),
        Some(&consumer_token),
        "remote token overwritten"
    );
    let second = names::tenant_namespace(&renamed);
    assert_ne!(second, tenant);
    assert!(
        !namespace_exists(admin, second.as_str()).await,
        "a second tenant namespace {second}"
    );
    assert_eq!(remote_tenant_csrs(admin).await, 0);
}

/// The service run with an admin client, then under the ServiceAccount bound only by the
/// chart's ClusterRole (which proves the role suffices), each issuing one consumer's identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issues_a_working_identity_once_and_refuses_bad_requests_without_side_effects() {
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, ONE).await.unwrap();
    let cluster = &set.clusters[0];
    let admin = cluster.client().await.unwrap();
    let ca = cluster_ca(&cluster.kubeconfig);
    install(&admin).await;
    // A second ClusterRole labelled basic, which the service must not bind (under the
    // ServiceAccount it could not: a failure after signing).
    let extra: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "liqo-remote-peering-extra",
            "labels": {labels::REMOTE_PEERING_PERMISSIONS: "basic"},
        },
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    }))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &extra)
        .await
        .unwrap();
    let sa = service_account_client(&admin, &cluster.server, &ca).await;

    let http = AuthClient::new(true);
    for (who, client, consumer, alg) in [
        (
            "admin",
            admin.clone(),
            identity(ROME_ID, "rome"),
            &rcgen::PKCS_ECDSA_P256_SHA256,
        ),
        (
            "ServiceAccount",
            sa,
            identity(NAPLES_ID, "naples"),
            &rcgen::PKCS_ED25519,
        ),
    ] {
        eprintln!("liqo-auth with the {who} client");
        let running = start(client, &cluster.server, &ca).await;
        let ids = http.ids(&running.url).await.unwrap();
        assert_eq!(ids.cluster_id.as_str(), MILAN_ID);
        assert_eq!(ids.cluster_name.as_str(), "milan");
        // Verifying the self-signed certificate fails: the switch matters.
        assert!(AuthClient::new(false).ids(&running.url).await.is_err());
        let milan_token = tokens::local_token(&admin, "liqo").await.unwrap();
        issue_and_check(
            &admin,
            &running,
            &milan_token,
            &consumer,
            &cluster.server,
            &ca,
            alg,
        )
        .await;

        // The local token is made again when deleted (a new one).
        Api::<Secret>::namespaced(admin.clone(), "liqo")
            .delete(objects::AUTH_TOKEN_SECRET, &DeleteParams::default())
            .await
            .unwrap();
        let renewed = eventually(10, "auth-token recreated", || {
            let admin = admin.clone();
            async move { tokens::local_token(&admin, "liqo").await.ok() }
        })
        .await;
        assert_ne!(renewed, milan_token, "{who}");
        running.stop().await;
    }
    set.release().await.unwrap();
}
