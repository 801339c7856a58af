//! The checks of an identity request before anything is created: the body decodes, the
//! destination token is ours, the requesting cluster ID is not ours, the CSR is a valid signed
//! request whose subject is exactly `CN=<the requesting cluster ID>, O=liqo.io` (every
//! attribute read, none other allowed, no CSR attribute), the origin token (if any) is well
//! formed, and a proof of possession (if any, [`control::identity::proof`]) verifies with the
//! CSR's key for this cluster. Pure.

use control::{
    api::{ClusterId, discovery::ClusterIdentity},
    consts::auth,
    identity::{self, AuthToken, CertificateIdentityRequest, Proof, TokenCheck, proof},
};
use liqo_types::field::bad;
use ring::signature::{self as sig, UnparsedPublicKey, VerificationAlgorithm};

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
    /// The time (unix ms) of its proof of possession of the CSR's key, verified; `None`
    /// when it sent none.
    pub proof_time: Option<u64>,
}

/// How far ahead of our clock a proof of possession may be (clocks differ a little); a proof
/// further ahead is refused: accepted, it would lock its sender out of repeated requests until
/// its clock caught up.
pub const PROOF_AHEAD_MAX_MS: u64 = 5 * 60 * 1000;

/// Checks a request body against our token and our cluster ID (`local`: a request carrying it
/// is refused), at `now_ms` (unix milliseconds, our clock: a proof may not be much ahead).
pub fn validate(
    body: &[u8],
    ours: &AuthToken,
    local: &ClusterId,
    now_ms: u64,
) -> Result<Validated, AuthError> {
    let request: CertificateIdentityRequest = identity::decode(body)?;
    match request.destination_cluster_token.check(ours) {
        TokenCheck::Match => {}
        TokenCheck::Empty => return Err(AuthError::MissingToken),
        TokenCheck::Mismatch => return Err(AuthError::WrongToken),
    }
    if request.cluster.cluster_id == *local {
        return Err(bad(
            "cluster.clusterID",
            format!("{local} is this cluster's own ID"),
        )
        .into());
    }
    let key = check_csr(&request.certificate_signing_request, &request.cluster)?;
    let proof_time = request
        .proof_of_possession
        .as_ref()
        .map(|p| check_proof(p, &key, local, &request.certificate_signing_request, now_ms))
        .transpose()?;
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
        proof_time,
    })
}

/// A CSR's public key, as a signature verifier takes it.
struct CsrKey {
    algorithm: &'static dyn VerificationAlgorithm,
    key: Vec<u8>,
}

const PROOF_FIELD: &str = "proofOfPossession";

/// The proof's signature verifies, with the CSR's key, over the message for this cluster
/// (`local`), this CSR and the proof's time, which is not more than [`PROOF_AHEAD_MAX_MS`]
/// ahead of `now_ms`; returns that time.
fn check_proof(
    p: &Proof,
    key: &Option<CsrKey>,
    local: &ClusterId,
    csr: &[u8],
    now_ms: u64,
) -> Result<u64, AuthError> {
    if p.time_ms > now_ms.saturating_add(PROOF_AHEAD_MAX_MS) {
        return Err(bad(
            "proofOfPossession.timeMs",
            format!(
                "is {} s ahead of this cluster's clock (at most {} s allowed): check the clocks",
                (p.time_ms - now_ms) / 1000,
                PROOF_AHEAD_MAX_MS / 1000
            ),
        )
        .into());
    }
    let Some(key) = key else {
        return Err(bad(
            PROOF_FIELD,
            "the CSR's key type cannot sign a proof (ECDSA P-256/P-384, Ed25519 or RSA are)",
        )
        .into());
    };
    let message = proof::message(local, csr, p.time_ms);
    UnparsedPublicKey::new(key.algorithm, &key.key)
        .verify(&message, &p.signature)
        .map_err(|_| {
            bad(
                PROOF_FIELD,
                "the signature does not verify with the CSR's key for this cluster",
            )
        })?;
    Ok(p.time_ms)
}

const CSR_FIELD: &str = "certificateSigningRequest";

fn csr_bad(reason: impl Into<String>) -> AuthError {
    bad(CSR_FIELD, reason.into()).into()
}

/// The CSR is one PEM `CERTIFICATE REQUEST`, correctly signed, whose subject is exactly
/// `CN=<the cluster ID>` and `O=liqo.io`: one attribute per RDN, no other attribute (the
/// apiserver makes every O a group, every CN the user), and no CSR attribute at all (no
/// extension request: the signer copies requested SANs; usages are set by us). Returns its
/// public key when it is of a type a proof of possession can be verified with.
fn check_csr(pem: &[u8], cluster: &ClusterIdentity) -> Result<Option<CsrKey>, AuthError> {
    use x509_parser::{
        certification_request::X509CertificationRequest, oid_registry, pem::parse_x509_pem,
        prelude::FromDer,
    };
    let (rest, pem) =
        parse_x509_pem(pem).map_err(|e| csr_bad(format!("not a valid signed PEM CSR ({e})")))?;
    if pem.label != "CERTIFICATE REQUEST" {
        return Err(csr_bad(format!(
            "PEM block is {:?}, expected \"CERTIFICATE REQUEST\"",
            pem.label
        )));
    }
    if !rest.iter().all(u8::is_ascii_whitespace) {
        return Err(csr_bad("data after the PEM block"));
    }
    let (rest, csr) = X509CertificationRequest::from_der(&pem.contents)
        .map_err(|e| csr_bad(format!("not a valid signed PEM CSR ({e})")))?;
    if !rest.is_empty() {
        return Err(csr_bad("data after the CSR in the PEM block"));
    }
    csr.verify_signature()
        .map_err(|e| csr_bad(format!("not a valid signed PEM CSR (signature: {e})")))?;
    let info = &csr.certification_request_info;
    if !info.attributes().is_empty() {
        return Err(csr_bad(format!(
            "has {} attribute(s) (e.g. an extension request): none is allowed",
            info.attributes().len()
        )));
    }
    let mut cn = Vec::new();
    let mut o = Vec::new();
    for rdn in info.subject.iter_rdn() {
        let attrs: Vec<_> = rdn.iter().collect();
        let [attr] = attrs.as_slice() else {
            return Err(csr_bad(format!(
                "subject has a multi-valued RDN ({} values): one attribute per RDN is allowed",
                attrs.len()
            )));
        };
        let oid = attr.attr_type();
        let value = attr
            .as_str()
            .map_err(|_| csr_bad(format!("subject attribute {oid} is not a string")))?;
        if *oid == oid_registry::OID_X509_COMMON_NAME {
            cn.push(value);
        } else if *oid == oid_registry::OID_X509_ORGANIZATION_NAME {
            o.push(value);
        } else {
            return Err(csr_bad(format!(
                "subject has attribute {oid} ({value:?}): only CN and O = {:?} are allowed",
                auth::CSR_ORGANIZATION
            )));
        }
    }
    if cn != [cluster.cluster_id.as_str()] {
        return Err(csr_bad(format!(
            "subject CN is {cn:?}, expected exactly the requesting cluster ID {:?} (cluster.clusterID)",
            cluster.cluster_id.as_str()
        )));
    }
    if o != [auth::CSR_ORGANIZATION] {
        return Err(csr_bad(format!(
            "subject O is {o:?}, expected exactly [{:?}]",
            auth::CSR_ORGANIZATION
        )));
    }
    let spki = &info.subject_pki;
    let oid = &spki.algorithm.algorithm;
    let curve = spki
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.as_oid().ok());
    let algorithm: Option<&'static dyn VerificationAlgorithm> = if *oid
        == oid_registry::OID_SIG_ED25519
    {
        Some(&sig::ED25519)
    } else if *oid == oid_registry::OID_KEY_TYPE_EC_PUBLIC_KEY {
        match curve {
            Some(c) if c == oid_registry::OID_EC_P256 => Some(&sig::ECDSA_P256_SHA256_ASN1),
            Some(c) if c == oid_registry::OID_NIST_EC_P384 => Some(&sig::ECDSA_P384_SHA384_ASN1),
            _ => None,
        }
    } else if *oid == oid_registry::OID_PKCS1_RSAENCRYPTION {
        Some(&sig::RSA_PKCS1_2048_8192_SHA256)
    } else {
        None
    };
    Ok(algorithm.map(|algorithm| CsrKey {
        algorithm,
        key: spki.subject_public_key.data.to_vec(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

    const ID: &str = "4c1b5b8e-8f0e-4d5c-9f8a-2b7d6c5e4f3a";
    const LOCAL: &str = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a";

    /// Our clock in the tests: a little after the proofs' times.
    const NOW_MS: u64 = 1_700_000_060_000;

    fn validate(body: &[u8], ours: &AuthToken) -> Result<Validated, AuthError> {
        super::validate(body, ours, &LOCAL.parse().unwrap(), NOW_MS)
    }

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
        // Our own cluster ID is refused.
        let e = super::validate(
            &body(ours.expose(), "", &good),
            &ours,
            &ID.parse().unwrap(),
            NOW_MS,
        )
        .unwrap_err();
        assert_eq!(e.status().as_u16(), 400, "{e}");
        assert!(e.to_string().contains("this cluster's own ID"), "{e}");
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
        assert!(m.contains("subject CN is [\"someone-else\"]"), "{m}");
        let m = msg(err(&body(a, "", &csr(ID, "system:masters"))));
        assert!(m.contains("subject O is [\"system:masters\"]"), "{m}");
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

    fn keyed_csr(alg: &'static rcgen::SignatureAlgorithm) -> (KeyPair, String) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, ID);
        dn.push(DnType::OrganizationName, "liqo.io");
        params.distinguished_name = dn;
        let key = KeyPair::generate_for(alg).unwrap();
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        (key, pem)
    }

    fn with_proof(body: &[u8], proof: serde_json::Value) -> Vec<u8> {
        let mut v: serde_json::Value = serde_json::from_slice(body).unwrap();
        v["proofOfPossession"] = proof;
        serde_json::to_vec(&v).unwrap()
    }

    fn proof(key: &KeyPair, provider: &str, csr: &str, time_ms: u64) -> serde_json::Value {
        use base64::Engine;
        use rcgen::SigningKey;
        let m = proof::message(&provider.parse().unwrap(), csr.as_bytes(), time_ms);
        let s = key.sign(&m).unwrap();
        serde_json::json!({
            "timeMs": time_ms,
            "signature": base64::engine::general_purpose::STANDARD.encode(s),
        })
    }

    #[test]
    fn a_proof_verifies_with_the_csrs_key_for_this_cluster_only() {
        let ours = token('a');
        for alg in [&rcgen::PKCS_ECDSA_P256_SHA256, &rcgen::PKCS_ED25519] {
            let (key, pem) = keyed_csr(alg);
            let plain = body(ours.expose(), "", &pem);
            let good = with_proof(&plain, proof(&key, LOCAL, &pem, 1_700_000_000_000));
            let v = validate(&good, &ours).unwrap();
            assert_eq!(v.proof_time, Some(1_700_000_000_000));
            assert_eq!(validate(&plain, &ours).unwrap().proof_time, None);
            // Made for another provider, with another key, or with another time: refused,
            // the field named.
            let (other, _) = keyed_csr(alg);
            for bad_proof in [
                proof(&key, ID, &pem, 1_700_000_000_000),
                proof(&other, LOCAL, &pem, 1_700_000_000_000),
                {
                    let mut p = proof(&key, LOCAL, &pem, 1_700_000_000_000);
                    p["timeMs"] = 1_700_000_000_001u64.into();
                    p
                },
            ] {
                let e = validate(&with_proof(&plain, bad_proof), &ours).unwrap_err();
                assert_eq!(e.status().as_u16(), 400, "{e}");
                assert!(e.to_string().contains("proofOfPossession"), "{e}");
            }
            // Up to 5 minutes ahead of our clock is fine; more is refused, saying so.
            let ahead = NOW_MS + PROOF_AHEAD_MAX_MS;
            let v = validate(&with_proof(&plain, proof(&key, LOCAL, &pem, ahead)), &ours);
            assert_eq!(v.unwrap().proof_time, Some(ahead));
            let e = validate(
                &with_proof(&plain, proof(&key, LOCAL, &pem, ahead + 1000)),
                &ours,
            )
            .unwrap_err();
            assert!(
                e.to_string()
                    .contains("proofOfPossession.timeMs: is 301 s ahead of this cluster's clock"),
                "{e}"
            );
        }
    }

    /// CSRs made with openssl (tests/auth/fixtures, made once with `openssl req -new -newkey
    /// ed25519 -subj ...`): every subject attribute counts, not the last of each type.
    #[test]
    fn every_subject_attribute_counts() {
        let ours = token('a');
        let fixture = |name: &str| {
            std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/auth/fixtures")
                    .join(name),
            )
            .unwrap()
        };
        let good = fixture("csr-good-openssl.pem");
        validate(&body(ours.expose(), "", &good), &ours).unwrap();
        for (name, expect) in [
            (
                "csr-two-orgs.pem",
                "subject O is [\"kubeadm:cluster-admins\", \"liqo.io\"]",
            ),
            ("csr-two-cns.pem", "subject CN is [\""),
            (
                "csr-extra-ou.pem",
                "subject has attribute 2.5.4.11 (\"admins\")",
            ),
            ("csr-multivalued-rdn.pem", "multi-valued RDN (2 values)"),
            ("csr-san.pem", "has 1 attribute(s)"),
        ] {
            let e = validate(&body(ours.expose(), "", &fixture(name)), &ours).unwrap_err();
            assert_eq!(e.status().as_u16(), 400, "{name}: {e}");
            let m = e.to_string();
            assert!(m.contains(expect), "{name}: {m}");
        }
        // A signature that does not match: the subject altered after signing.
        let tampered = {
            use base64::Engine;
            let b64 = base64::engine::general_purpose::STANDARD;
            let inner: String = good.lines().filter(|l| !l.starts_with("-----")).collect();
            let der = b64.decode(inner).unwrap();
            let at = der.windows(7).position(|w| w == b"liqo.io").unwrap();
            let mut der = der;
            der[at + 6] = b'O';
            format!(
                "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
                b64.encode(der)
            )
        };
        let e = validate(&body(ours.expose(), "", &tampered), &ours).unwrap_err();
        assert_eq!(e.status().as_u16(), 400, "{e}");
        assert!(e.to_string().contains("(signature:"), "{e}");
        // Not a CSR block.
        let cert = good.replace("CERTIFICATE REQUEST", "CERTIFICATE");
        let m = validate(&body(ours.expose(), "", &cert), &ours)
            .unwrap_err()
            .to_string();
        assert!(m.contains("PEM block is \"CERTIFICATE\""), "{m}");
    }
}
