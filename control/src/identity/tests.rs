use serde_json::json;

use super::*;

const CSR: &[u8] =
    b"-----BEGIN CERTIFICATE REQUEST-----\nMIIBxx\n-----END CERTIFICATE REQUEST-----\n";

fn rome() -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: "b07938e3-d241-460c-a77b-e286c0f733c7".parse().unwrap(),
        cluster_name: "rome".parse().unwrap(),
    }
}

fn token(c: char) -> AuthToken {
    c.to_string().repeat(TOKEN_LEN).parse().unwrap()
}

#[test]
fn ids_wire_form() {
    let info = ClusterInfo {
        cluster_id: rome().cluster_id,
        cluster_name: rome().cluster_name,
    };
    let value = serde_json::to_value(&info).unwrap();
    assert_eq!(
        value,
        json!({"clusterId": "b07938e3-d241-460c-a77b-e286c0f733c7", "clusterName": "rome"})
    );
    assert_eq!(
        decode::<ClusterInfo>(value.to_string().as_bytes()).unwrap(),
        info
    );
}

#[test]
fn request_wire_form() {
    let req = CertificateIdentityRequest::new(rome(), &token('a'), Some(&token('b')), CSR.to_vec());
    let value = serde_json::to_value(&req).unwrap();
    insta::assert_json_snapshot!(value);
    let back: CertificateIdentityRequest = decode(value.to_string().as_bytes()).unwrap();
    assert_eq!(back, req);
    assert_eq!(back.certificate_signing_request, CSR);
    assert_eq!(
        back.destination_cluster_token.check(&token('b')),
        TokenCheck::Match
    );
    assert_eq!(back.origin_cluster_token.parse().unwrap(), token('a'));
}

#[test]
fn request_without_the_providers_token() {
    let req = CertificateIdentityRequest::new(rome(), &token('a'), None, CSR.to_vec());
    let value = serde_json::to_value(&req).unwrap();
    assert_eq!(value["destinationClusterToken"], "");
    assert_eq!(
        req.destination_cluster_token.check(&token('b')),
        TokenCheck::Empty
    );
    // Upstream omits an empty origin token; both absent tokens decode as empty.
    let body = json!({
        "cluster": {"clusterID": "b07938e3-d241-460c-a77b-e286c0f733c7", "clusterName": "rome"},
        "certificateSigningRequest": "AAEC",
    });
    let req: CertificateIdentityRequest = decode(body.to_string().as_bytes()).unwrap();
    assert!(req.origin_cluster_token.is_empty() && req.destination_cluster_token.is_empty());
    assert_eq!(req.certificate_signing_request, [0, 1, 2]);
    assert!(
        !serde_json::to_value(&req)
            .unwrap()
            .as_object()
            .unwrap()
            .contains_key("originClusterToken")
    );
}

#[test]
fn response_wire_form() {
    let resp = CertificateIdentityResponse {
        namespace: "liqo-tenant-rome-9a1f02".parse().unwrap(),
        certificate: b"-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n".to_vec(),
        api_server_url: "https://127.0.0.1:36443".into(),
        api_server_ca: Some(
            b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n".to_vec(),
        ),
    };
    let value = serde_json::to_value(&resp).unwrap();
    insta::assert_json_snapshot!(value);
    assert_eq!(
        decode::<CertificateIdentityResponse>(value.to_string().as_bytes()).unwrap(),
        resp
    );
    // No CA (publicly trusted): absent, and an empty string reads as absent.
    let trusted = CertificateIdentityResponse {
        api_server_ca: None,
        ..resp
    };
    let value = serde_json::to_value(&trusted).unwrap();
    assert!(value.get("apiServerCA").is_none());
    let mut with_empty = value.clone();
    with_empty["apiServerCA"] = json!("");
    assert_eq!(
        decode::<CertificateIdentityResponse>(with_empty.to_string().as_bytes()).unwrap(),
        trusted
    );
}

#[test]
fn decode_errors_name_the_field() {
    let cases = [
        (
            json!({"cluster": {"clusterID": "Rome", "clusterName": "rome"}, "certificateSigningRequest": ""}),
            "cluster.clusterID",
        ),
        (
            json!({"cluster": {"clusterID": "rome", "clusterName": "rome"}, "certificateSigningRequest": "!!"}),
            "certificateSigningRequest",
        ),
        (
            json!({"cluster": {"clusterID": "rome", "clusterName": "rome"}}),
            "certificateSigningRequest",
        ),
    ];
    for (body, field) in cases {
        let err = decode::<CertificateIdentityRequest>(body.to_string().as_bytes()).unwrap_err();
        assert!(err.field.contains(field), "{field}: {err}");
    }
    let err = decode::<CertificateIdentityRequest>(b"{not json").unwrap_err();
    assert_eq!(err.field, "<body>");
    let bad_ns = json!({"namespace": "Tenant", "certificate": "", "apiServerUrl": "https://x"});
    let err = decode::<CertificateIdentityResponse>(bad_ns.to_string().as_bytes()).unwrap_err();
    assert_eq!(err.field, "namespace");
    assert!(err.problem.contains("\"Tenant\""), "{err}");
}

#[test]
fn debug_of_a_request_hides_the_tokens() {
    let req = CertificateIdentityRequest::new(rome(), &token('a'), Some(&token('b')), CSR.to_vec());
    let shown = format!("{req:?}");
    assert!(
        !shown.contains("aaaa") && !shown.contains("bbbb"),
        "{shown}"
    );
}

#[test]
fn authentication_from_the_answer() {
    use Authentication::*;
    let rows = [
        (None, true, NotReachable),
        (None, false, NotReachable),
        (Some(200), true, Accepted),
        (Some(201), true, Accepted),
        (Some(202), false, Accepted),
        (Some(401), true, Denied),
        (Some(403), true, Denied),
        (Some(403), false, EmptyDenied),
        (Some(401), false, EmptyDenied),
        (Some(500), true, Pending),
        (Some(404), true, Pending),
    ];
    for (status, sent, want) in rows {
        assert_eq!(authentication(status, sent), want, "{status:?} {sent}");
    }
}
