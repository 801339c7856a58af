//! Issuing an identity to a validated request, against the apiserver: the tenant namespace,
//! the refusal of a second identity, a real CertificateSigningRequest approved here and signed
//! by the cluster's signer, the basic peering roles bound to the requesting cluster's user, its
//! token, and last the record `liqo-remote-certificate`, whose creation commits the issuance
//! (a retry after a crash before it converges). After it, a request with the very CSR of the
//! record is answered the stored certificate again (its first reply may have been lost) only
//! when it proves possession of the CSR's key with a proof newer than the last one accepted
//! ([`control::identity::proof`]; the record keeps that proof's time): a captured request
//! replayed byte for byte is refused and answers nothing stored. A request with another CSR is
//! refused. The tenant namespace ([`super::tenant`]) carries this cluster's ID.

use std::{collections::BTreeMap, time::Duration};

use control::{
    api::ClusterId,
    consts::{annotations, auth, keys, labels, objects, values},
    identity::CertificateIdentityResponse,
    names::{self, NamespaceName},
};
use k8s_openapi::{
    ByteString,
    api::{
        certificates::v1::{
            CertificateSigningRequest, CertificateSigningRequestCondition,
            CertificateSigningRequestSpec,
        },
        core::v1::Secret,
    },
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, ObjectMeta},
};

use super::{
    AuthError,
    config::Config,
    roles::{bind_basic_roles, check_basic_roles},
    tenant,
    validate::Validated,
    write::{is_conflict, post},
};
use crate::tokens;

/// One year, the validity asked for the certificate.
const EXPIRATION_SECONDS: i32 = 365 * 24 * 3600;
/// How often the CSR is read while waiting for its certificate.
const POLL: Duration = Duration::from_millis(200);

/// Whether a repeated request (the CSR of the record) is answered: only with a proof of
/// possession (`proof`, its time, verified) newer than the last one the record accepted
/// (`last`). Returns the time to record, or why not.
pub(super) fn reissue(last: Option<u64>, proof: Option<u64>) -> Result<u64, &'static str> {
    match (last, proof) {
        (_, None) => Err("the request has no proof of possession"),
        (Some(last), Some(t)) if t <= last => {
            Err("its proof is not newer than the last one accepted: a replay")
        }
        (_, Some(t)) => Ok(t),
    }
}

/// The time of the newest proof a record accepted, if any.
fn last_proof(record: &Secret) -> Option<u64> {
    record
        .metadata
        .annotations
        .as_ref()?
        .get(annotations::LAST_PROOF_TIME)?
        .parse()
        .ok()
}

/// Issues the identity of a validated request (`local`: this cluster's ID).
pub(super) async fn issue(
    client: &Client,
    config: &Config,
    local: &ClusterId,
    request: Validated,
) -> Result<Issued, AuthError> {
    let id = request.cluster.cluster_id.to_string();
    // The cluster's tenant namespace is found by its labels, whatever name it has (a request
    // under another cluster name finds the same namespace, and its record); a new one is made
    // only when the cluster has none.
    let namespace = match tenant::find(client, &id).await? {
        Some(namespace) => namespace,
        None => {
            let namespace = names::tenant_namespace(&request.cluster);
            tenant::ensure(client, &namespace, &id, local).await?;
            namespace
        }
    };

    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace.as_str());
    let record = objects::REMOTE_CERTIFICATE_SECRET;
    let already = |_| AuthError::AlreadyIssued {
        cluster_id: id.clone(),
        namespace: namespace.to_string(),
    };
    let existing = secrets
        .get_opt(record)
        .await
        .map_err(AuthError::kube(format!(
            "reading Secret {namespace}/{record}"
        )))?;
    if let Some(existing) = existing {
        // The same CSR again: the reply to it may have been lost. The certificate is answered
        // again only to the holder of the CSR's key, proven by a proof newer than the last.
        let certificate =
            stored_certificate(&existing, &request.csr_pem).ok_or_else(|| already(()))?;
        let replay = |why| AuthError::Replay {
            cluster_id: id.clone(),
            why,
        };
        let time = reissue(last_proof(&existing), request.proof_time).map_err(replay)?;
        let mut record = existing;
        record
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(annotations::LAST_PROOF_TIME.into(), time.to_string());
        // Guarded by the version read: of two requests with the same proof, one wins.
        match secrets
            .replace(objects::REMOTE_CERTIFICATE_SECRET, &post(), &record)
            .await
        {
            Ok(_) => {}
            Err(e) if is_conflict(&e) => {
                return Err(replay("another request was answered meanwhile"));
            }
            Err(e) => {
                return Err(AuthError::kube(format!(
                    "recording the proof in Secret {namespace}/{record}",
                    record = objects::REMOTE_CERTIFICATE_SECRET
                ))(e));
            }
        }
        tracing::info!(cluster_id = %id, %namespace, "answered an issued identity again (proof of possession)");
        return Ok(Issued::Again(response(config, namespace, certificate)));
    }

    // Before signing: what could fail afterwards for lack of configuration.
    check_basic_roles(client).await?;
    let certificate = sign(client, config, &id, &request.csr_pem).await?;
    bind_basic_roles(client, &namespace, &id).await?;
    if let Some(token) = &request.origin_token {
        tokens::write_remote_token(
            client,
            &config.namespace,
            &request.cluster.cluster_id,
            token,
        )
        .await
        .map_err(|source| AuthError::StoreToken {
            cluster_id: id.clone(),
            source: Box::new(source),
        })?;
    }

    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(record.to_owned()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(
                labels::CLUSTER_ID.to_owned(),
                id.clone(),
            )])),
            annotations: request.proof_time.map(|t| {
                BTreeMap::from([(annotations::LAST_PROOF_TIME.to_owned(), t.to_string())])
            }),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            (keys::CSR.to_owned(), ByteString(request.csr_pem.clone())),
            (
                keys::CERTIFICATE.to_owned(),
                ByteString(certificate.clone()),
            ),
        ])),
        ..Default::default()
    };
    match secrets.create(&post(), &secret).await {
        Ok(_) => {}
        Err(e) if is_conflict(&e) => return Err(already(())),
        Err(e) => {
            return Err(AuthError::kube(format!(
                "creating Secret {namespace}/{record}"
            ))(e));
        }
    }
    tracing::info!(cluster_id = %id, %namespace, "issued an identity");
    Ok(Issued::New(response(config, namespace, certificate)))
}

/// The answer of an identity request.
#[derive(Debug)]
pub(super) enum Issued {
    /// A new identity.
    New(CertificateIdentityResponse),
    /// The identity issued before to the same CSR, answered again.
    Again(CertificateIdentityResponse),
}

fn response(
    config: &Config,
    namespace: NamespaceName,
    certificate: Vec<u8>,
) -> CertificateIdentityResponse {
    CertificateIdentityResponse {
        namespace,
        certificate,
        api_server_url: config.api_server_url.clone(),
        api_server_ca: config.api_server_ca.clone(),
    }
}

/// The certificate a record holds when it was issued to exactly `csr_pem` (byte-equal);
/// `None` for another CSR, or a record without a certificate.
pub(super) fn stored_certificate(record: &Secret, csr_pem: &[u8]) -> Option<Vec<u8>> {
    let data = record.data.as_ref()?;
    let stored_csr = data.get(keys::CSR)?;
    if stored_csr.0.as_slice() != csr_pem {
        return None;
    }
    data.get(keys::CERTIFICATE)
        .filter(|c| !c.0.is_empty())
        .map(|c| c.0.clone())
}

/// Files a CertificateSigningRequest for the cluster, approves it, waits for the signer and
/// returns the certificate (PEM); the CSR object is deleted in the end, also on failure.
async fn sign(
    client: &Client,
    config: &Config,
    id: &str,
    csr_pem: &[u8],
) -> Result<Vec<u8>, AuthError> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let selector = format!(
        "{}={},{}={id}",
        labels::REMOTE_TENANT_CSR,
        values::TRUE,
        labels::CLUSTER_ID
    );
    // Leftovers of an attempt that crashed halfway.
    let old = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(AuthError::kube("listing CertificateSigningRequests"))?;
    for csr in old.items {
        if let Some(name) = csr.metadata.name {
            delete_csr(&api, &name).await;
        }
    }

    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some(objects::IDENTITY_GENERATE_NAME.to_owned()),
            labels: Some(BTreeMap::from([
                (
                    labels::REMOTE_TENANT_CSR.to_owned(),
                    values::TRUE.to_owned(),
                ),
                (labels::CLUSTER_ID.to_owned(), id.to_owned()),
            ])),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(csr_pem.to_vec()),
            signer_name: auth::CSR_SIGNER.to_owned(),
            usages: Some(
                ["digital signature", "key encipherment", "client auth"]
                    .map(String::from)
                    .to_vec(),
            ),
            expiration_seconds: Some(EXPIRATION_SECONDS),
            ..Default::default()
        },
        status: None,
    };
    let created = api
        .create(&post(), &csr)
        .await
        .map_err(AuthError::kube(format!(
            "creating a CertificateSigningRequest for cluster {id}"
        )))?;
    let name = created.metadata.name.clone().unwrap_or_default();
    let result = approve_and_wait(&api, created, config.signing_timeout).await;
    delete_csr(&api, &name).await;
    result
}

async fn approve_and_wait(
    api: &Api<CertificateSigningRequest>,
    mut csr: CertificateSigningRequest,
    timeout: Duration,
) -> Result<Vec<u8>, AuthError> {
    let name = csr.metadata.name.clone().unwrap_or_default();
    csr.status.get_or_insert_default().conditions =
        Some(vec![CertificateSigningRequestCondition {
            type_: "Approved".into(),
            status: "True".into(),
            reason: Some("LiqoIdentity".into()),
            message: Some(
                "approved by liqo-auth: the cluster presented this cluster's auth token".into(),
            ),
            ..Default::default()
        }]);
    api.replace_subresource("approval", &name, &post(), &csr)
        .await
        .map_err(AuthError::kube(format!(
            "approving CertificateSigningRequest {name}"
        )))?;

    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let current = api.get(&name).await.map_err(AuthError::kube(format!(
            "reading CertificateSigningRequest {name}"
        )))?;
        let status = current.status.unwrap_or_default();
        if let Some(cert) = status.certificate.filter(|c| !c.0.is_empty()) {
            return Ok(cert.0);
        }
        if let Some(c) = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True")
        {
            return Err(AuthError::Refused {
                name,
                condition: c.type_,
                message: c.message.unwrap_or_default(),
            });
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(AuthError::NotSigned {
                name,
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn delete_csr(api: &Api<CertificateSigningRequest>, name: &str) {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        // Not fatal: a leftover CSR holds no secret and is deleted by the next attempt (or by
        // the kcm's CSR cleaner after an hour).
        Err(e) => tracing::warn!(
            csr = name,
            error = %liqo_types::chain::chain(&e),
            "cannot delete a CertificateSigningRequest"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(data: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn the_same_csr_gets_the_stored_certificate_another_csr_nothing() {
        let r = record(&[(keys::CSR, b"csr-a"), (keys::CERTIFICATE, b"cert-a")]);
        assert_eq!(stored_certificate(&r, b"csr-a"), Some(b"cert-a".to_vec()));
        assert_eq!(stored_certificate(&r, b"csr-b"), None);
        assert_eq!(stored_certificate(&r, b"csr-a\n"), None);
        assert_eq!(stored_certificate(&r, b""), None);
    }

    #[test]
    fn a_repeated_request_needs_a_newer_proof() {
        assert_eq!(reissue(None, Some(5)), Ok(5));
        assert_eq!(reissue(Some(4), Some(5)), Ok(5));
        assert!(reissue(Some(5), Some(5)).is_err(), "the same proof again");
        assert!(reissue(Some(6), Some(5)).is_err(), "an older proof");
        assert!(reissue(None, None).is_err(), "no proof");
        assert!(reissue(Some(1), None).is_err(), "no proof");
        let mut r = record(&[]);
        assert_eq!(last_proof(&r), None);
        r.metadata.annotations = Some(
            [(annotations::LAST_PROOF_TIME.to_owned(), "17".to_owned())]
                .into_iter()
                .collect(),
        );
        assert_eq!(last_proof(&r), Some(17));
    }

    #[test]
    fn an_incomplete_record_answers_nothing() {
        let no_cert = record(&[(keys::CSR, b"csr-a")]);
        assert_eq!(stored_certificate(&no_cert, b"csr-a"), None);
        let empty_cert = record(&[(keys::CSR, b"csr-a"), (keys::CERTIFICATE, b"")]);
        assert_eq!(stored_certificate(&empty_cert, b"csr-a"), None);
        let no_csr = record(&[(keys::CERTIFICATE, b"cert-a")]);
        assert_eq!(stored_certificate(&no_csr, b""), None);
        assert_eq!(stored_certificate(&Secret::default(), b"csr-a"), None);
    }
}
