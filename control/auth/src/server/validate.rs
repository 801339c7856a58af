//! The checks of an identity request before anything is created: the body decodes, the
//! destination token is ours, the CSR is a valid signed request whose subject is `CN=<the
//! requesting cluster ID>, O=liqo.io`, the origin token (if any) is well formed. Pure.

use control::{
    api::discovery::ClusterIdentity,
    consts::auth,
    identity::{self, AuthToken, CertificateIdentityRequest, TokenCheck},
};
use liqo_types::field::bad;
use rcgen::{CertificateSigningRequestParams, DnType, DnValue};

use super::AuthError;

/// A request that passed every check.
#[derive(Debug)]
pub struct Validated {
    /// The requesting cluster.
    pub cluster: ClusterIdentity,
    /// Its CSR (PEM), signature checked.
    pub csr_pem: Vec<u8>,
    /// Its token, to store so we can authenticate back (`None` when it sent none).
    pub origin_token: Option<AuthToken>,
}

/// Checks a request body against our token.
pub fn validate(body: &[u8], ours: &AuthToken) -> Result<Validated, AuthError> {
    let request: CertificateIdentityRequest = identity::decode(body)?;
    match request.destination_cluster_token.check(ours) {
        TokenCheck::Match => {}
        TokenCheck::Empty => return Err(AuthError::MissingToken),
        TokenCheck::Mismatch => return Err(AuthError::WrongToken),
    }
    check_csr(&request.certificate_signing_request, &request.cluster)?;
    let origin_token = if request.origin_cluster_token.is_empty() {
        None
    } else {
        Some(
            request
                .origin_cluster_token
                .parse()
                .map_err(|e| bad("originClusterToken", e.to_string()))?,
        )
    };
    Ok(Validated {
        cluster: request.cluster,
        csr_pem: request.certificate_signing_request,
        origin_token,
    })
}

const CSR_FIELD: &str = "certificateSigningRequest";

fn dn_text(value: &DnValue) -> Option<String> {
    match value {
        DnValue::Utf8String(s) => Some(s.clone()),
        DnValue::PrintableString(s) => Some(s.as_str().to_owned()),
        DnValue::Ia5String(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

/// The CSR is PEM, correctly signed, with subject CN = the cluster ID and O = liqo.io.
fn check_csr(pem: &[u8], cluster: &ClusterIdentity) -> Result<(), AuthError> {
    let text = std::str::from_utf8(pem).map_err(|_| bad(CSR_FIELD, "not PEM text"))?;
    let csr = CertificateSigningRequestParams::from_pem(text)
        .map_err(|e| bad(CSR_FIELD, format!("not a valid signed PEM CSR ({e})")))?;
    let dn = &csr.params.distinguished_name;
    let cn = dn.get(&DnType::CommonName).and_then(dn_text);
    if cn.as_deref() != Some(cluster.cluster_id.as_str()) {
        return Err(bad(
            CSR_FIELD,
            format!(
                "subject CN is {cn:?}, expected the requesting cluster ID {:?} (cluster.clusterID)",
                cluster.cluster_id.as_str()
            ),
        )
        .into());
    }
    let o = dn.get(&DnType::OrganizationName).and_then(dn_text);
    if o.as_deref() != Some(auth::CSR_ORGANIZATION) {
        return Err(bad(
            CSR_FIELD,
            format!("subject O is {o:?}, expected {:?}", auth::CSR_ORGANIZATION),
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, KeyPair};

    const ID: &str = "4c1b5b8e-8f0e-4d5c-9f8a-2b7d6c5e4f3a";

    fn token(c: char) -> AuthToken {
        c.to_string().repeat(128).parse().unwrap()
    }

    fn csr(cn: &str, o: &str) -> String {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, cn);
        dn.push(DnType::OrganizationName, o);
        params.distinguished_name = dn;
        let key = KeyPair::generate().unwrap();
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    fn body(dest: &str, origin: &str, csr: &str) -> Vec<u8> {
        use base64::Engine;
        serde_json::to_vec(&serde_json::json!({
            "cluster": {"clusterID": ID, "clusterName": "rome"},
            "originClusterToken": origin,
            "destinationClusterToken": dest,
            "certificateSigningRequest": base64::engine::general_purpose::STANDARD.encode(csr),
        }))
        .unwrap()
    }

    fn err(body: &[u8]) -> AuthError {
        validate(body, &token('a')).unwrap_err()
    }

    #[test]
    fn a_good_request_passes() {
        let ours = token('a');
        let good = csr(ID, "liqo.io");
        let v = validate(&body(ours.expose(), token('b').expose(), &good), &ours).unwrap();
        assert_eq!(v.cluster.cluster_id.as_str(), ID);
        assert_eq!(v.csr_pem, good.as_bytes());
        assert_eq!(v.origin_token, Some(token('b')));
        let v = validate(&body(ours.expose(), "", &good), &ours).unwrap();
        assert_eq!(v.origin_token, None);
    }

    #[test]
    fn tokens_are_checked_first() {
        let bad_csr = "garbage";
        assert!(matches!(
            err(&body("", "", bad_csr)),
            AuthError::MissingToken
        ));
        assert!(matches!(
            err(&body(token('c').expose(), "", bad_csr)),
            AuthError::WrongToken
        ));
        assert!(matches!(
            err(&body("short", "", bad_csr)),
            AuthError::WrongToken
        ));
    }

    #[test]
    fn bad_bodies_name_the_field() {
        let a = token('a');
        let a = a.expose();
        let msg = |e: AuthError| {
            assert_eq!(e.status().as_u16(), 400, "{e}");
            e.to_string()
        };
        let m = msg(err(b"{not json"));
        assert!(m.contains("not JSON"), "{m}");
        let m = msg(err(&body(a, "", "garbage")));
        assert!(
            m.contains("certificateSigningRequest: not a valid signed PEM CSR"),
            "{m}"
        );
        let m = msg(err(&body(a, "", &csr("someone-else", "liqo.io"))));
        assert!(m.contains("subject CN is Some(\"someone-else\")"), "{m}");
        let m = msg(err(&body(a, "", &csr(ID, "system:masters"))));
        assert!(m.contains("subject O is Some(\"system:masters\")"), "{m}");
        let m = msg(err(&body(a, "xyz", &csr(ID, "liqo.io"))));
        assert!(m.starts_with("bad request: originClusterToken:"), "{m}");
        assert!(!m.contains("xyz"), "{m}");
        let mut v: serde_json::Value = serde_json::from_slice(&body(a, "", "x")).unwrap();
        v["certificateSigningRequest"] = "***".into();
        let m = msg(err(&serde_json::to_vec(&v).unwrap()));
        assert!(m.contains("certificateSigningRequest"), "{m}");
        v["certificateSigningRequest"] = "".into();
        v["cluster"]["clusterID"] = "Bad_ID".into();
        let m = msg(err(&serde_json::to_vec(&v).unwrap()));
        assert!(m.contains("cluster.clusterID"), "{m}");
        // A wrong token is never echoed.
        let m = err(&body(&"f".repeat(128), "", "x")).to_string();
        assert!(!m.contains("ffff"), "{m}");
    }
}
