//! Asking the peer for an identity: its `/ids` first (nothing sent to another cluster), then
//! the request with a proof of possession, then the answer stored and checked.

use control::{
    api::discovery::ForeignCluster,
    conditions::{Authentication, Condition},
    consts::{annotations, keys, labels, values},
    identity::{CertificateIdentityRequest, authentication, check},
};
use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{Api, ResourceExt, api::PostParams};
use serde_json::json;

use super::verify::{IdentityOutcome, verify};
use crate::{
    context::Context,
    error::{Error, kube as kerr},
    identity,
    kit::now,
};
use control::peering::fc::AuthStep;

/// Asks the peer to sign our identity: first checks that its auth service is the cluster the
/// ForeignCluster names (nothing is sent otherwise), makes the key and CSR if needed, sends
/// them with a proof of possession, stores the answer. The outcome's message says why a
/// request failed.
pub(super) async fn authenticate(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    secret: Option<Secret>,
    step: AuthStep,
) -> Result<IdentityOutcome, Error> {
    let peer = &fc.spec.cluster_identity.cluster_id;
    let failed = |c: Authentication, why: String| {
        Ok(IdentityOutcome::new(
            Condition::Authentication(c).with_message(why),
            None,
        ))
    };
    // The tokens first, then the ForeignCluster as the API server holds it now: `liqoctl peer
    // out-of-band` writes an existing peer's new auth URL before its new token, so the token
    // read here never goes to an older URL than its own. The reconciled copy may lag behind
    // (a token's event handled before the ForeignCluster's), and would send the new token to
    // the old URL.
    let ns = &ctx.settings.namespace;
    let ours = liqo_auth::tokens::local_token(&ctx.client, ns)
        .await
        .map_err(|e| Error::Token(Box::new(e)))?;
    let theirs = liqo_auth::tokens::remote_token(&ctx.client, ns, peer)
        .await
        .map_err(|e| Error::Token(Box::new(e)))?;
    let name = fc.name_any();
    let current = Api::<ForeignCluster>::all(ctx.client.clone())
        .get_opt(&name)
        .await
        .map_err(kerr(format!("read ForeignCluster {name}")))?
        .filter(|c| c.uid() == fc.uid());
    let Some(current) = current else {
        return failed(
            Authentication::Pending,
            format!("ForeignCluster {name} is gone or was made again: no token was sent"),
        );
    };
    let url = &current.spec.foreign_auth_url;
    let client = ctx.auth(current.spec.insecure_skip_tls_verify);
    match client.ids(url).await {
        Ok(info) => {
            if let Err(wrong) = check::auth_service(url, peer, &info) {
                tracing::warn!(peer = %peer, error = %wrong, "not sending our identity request");
                return failed(
                    Authentication::WrongCluster,
                    format!("{wrong}: no token was sent"),
                );
            }
        }
        Err(e) => {
            tracing::warn!(peer = %peer, error = %liqo_types::chain(&e), "the auth service does not say who it is");
            let c = authentication(e.http_status(), true);
            let c = if c == Authentication::Accepted {
                Authentication::Pending
            } else {
                c
            };
            return failed(c, format!("asking who it is: {}", liqo_types::chain(&e)));
        }
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), tenant);
    let secret = match (step, secret) {
        (AuthStep::Request, Some(s)) => s,
        _ => create_identity(ctx, &secrets, tenant, peer).await?,
    };
    let csr = identity::data(&secret, keys::CSR)
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    let time_ms = u64::try_from(now().0.as_millisecond()).unwrap_or(0);
    let proof =
        identity::prove(&secret, peer, time_ms).map_err(|e| Error::Identity(Box::new(e)))?;
    let request = CertificateIdentityRequest::new(ctx.local.clone(), &ours, theirs.as_ref(), csr)
        .with_proof(proof);
    let response = match client.certificate(url, &request).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(peer = %peer, error = %liqo_types::chain(&e), "identity request failed");
            return failed(
                authentication(e.http_status(), theirs.is_some()),
                liqo_types::chain(&e).to_string(),
            );
        }
    };
    store(ctx, &current, tenant, &secrets, secret, &request, response).await
}

/// A new key and CSR in a new identity Secret.
async fn create_identity(
    ctx: &Context,
    secrets: &Api<Secret>,
    tenant: &str,
    peer: &control::api::ClusterId,
) -> Result<Secret, Error> {
    let new =
        identity::new_identity(&ctx.local.cluster_id).map_err(|e| Error::Identity(Box::new(e)))?;
    let expire = now().0.as_second() + 365 * 24 * 3600;
    let s: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "generateName": control::consts::objects::IDENTITY_GENERATE_NAME,
            "namespace": tenant,
            "labels": {labels::LOCAL_IDENTITY: values::TRUE, labels::CLUSTER_ID: peer.as_str()},
            "annotations": {annotations::CERTIFICATE_EXPIRE_TIME: expire.to_string()},
        },
        "stringData": {keys::PRIVATE_KEY: new.private_key_pem, keys::CSR: new.csr_pem},
    }))
    .expect("a Secret deserializes");
    secrets
        .create(&PostParams::default(), &s)
        .await
        .map_err(kerr(format!("create identity Secret in {tenant}")))
}

/// Stores a signed identity in its Secret: on a fresh read, again on a conflict (a concurrent
/// update), so the certificate is never left unsaved for a stale copy (update, not patch: the
/// chart's ClusterRole grants no patch on Secrets). The key and CSR are kept as read.
async fn store(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    secrets: &Api<Secret>,
    secret: Secret,
    request: &CertificateIdentityRequest,
    response: control::identity::CertificateIdentityResponse,
) -> Result<IdentityOutcome, Error> {
    let peer = &fc.spec.cluster_identity.cluster_id;
    let mut data = std::collections::BTreeMap::new();
    let mut put = |k: &str, v: Vec<u8>| {
        data.insert(k.to_owned(), ByteString(v));
    };
    put(keys::CERTIFICATE, response.certificate.clone());
    put(
        keys::API_SERVER_URL,
        response.api_server_url.clone().into_bytes(),
    );
    if let Some(ca) = &response.api_server_ca {
        put(keys::API_SERVER_CA, ca.clone());
    }
    put(keys::NAMESPACE, response.namespace.to_string().into_bytes());
    // In-band: the API server is reached through the peer's liqo-proxy.
    if let Some(proxy) = fc.spec.proxy_url() {
        put(keys::PROXY_URL, proxy.as_bytes().to_vec());
    }
    let secret_name = secret.name_any();
    let mut current = secret;
    let mut attempts = 0;
    loop {
        attempts += 1;
        current.data.get_or_insert_default().extend(data.clone());
        current
            .labels_mut()
            .insert(labels::CERTIFICATE_AVAILABLE.into(), values::TRUE.into());
        match secrets
            .replace(&secret_name, &PostParams::default(), &current)
            .await
        {
            Ok(stored) => {
                tracing::info!(peer = %peer, namespace = %response.namespace, "identity accepted");
                // Checked at once: the API server the provider gave must be the peer's.
                return verify(ctx, fc, tenant, &stored, response.namespace.as_str(), None).await;
            }
            Err(kube::Error::Api(s)) if s.code == 409 && attempts < 5 => {
                current = secrets
                    .get(&secret_name)
                    .await
                    .map_err(kerr(format!("read identity Secret {tenant}/{secret_name}")))?;
                let same_csr = current
                    .data
                    .as_ref()
                    .and_then(|d| d.get(keys::CSR))
                    .is_some_and(|c| c.0 == request.certificate_signing_request);
                if !same_csr {
                    // A new key pair replaced the one the certificate was asked for: the
                    // certificate is useless; the next reconcile asks for the new one.
                    tracing::warn!(peer = %peer, "identity Secret changed its CSR meanwhile");
                    return Ok(IdentityOutcome::new(
                        Condition::Authentication(Authentication::Pending),
                        None,
                    ));
                }
            }
            Err(e) => {
                return Err(kerr(format!(
                    "store identity Secret {tenant}/{secret_name}"
                ))(e));
            }
        }
    }
}
