//! Who may call the kubelet API, as a kubelet decides it (`--authorization-mode=Webhook`): the
//! client certificate's subject (CN = user, O = groups), already verified against the client
//! CA by the TLS layer, must be allowed `<verb>` on `nodes/proxy` of this node by the home API
//! server (a SubjectAccessReview). The home API server's kubelet client is, in every
//! distribution (`system:masters` or a cluster-admin group); a user whose certificate the
//! same CA signed is not unless RBAC says so.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::{Api, api::PostParams};
use x509_parser::prelude::{FromDer as _, X509Certificate};

/// The subject of a client certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The user (CN).
    pub user: String,
    /// The groups (every O).
    pub groups: Vec<String>,
}

/// The subject of the DER certificate `der`; `None` when it does not parse or has no CN.
pub fn subject(der: &[u8]) -> Option<Subject> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let name = cert.subject();
    let user = name.iter_common_name().next()?.as_str().ok()?.to_owned();
    let groups = name
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    Some(Subject { user, groups })
}

/// The verb of a request method, as the kubelet maps it.
pub fn verb(method: &hyper::Method) -> &'static str {
    match *method {
        hyper::Method::POST => "create",
        hyper::Method::PUT => "update",
        hyper::Method::PATCH => "patch",
        hyper::Method::DELETE => "delete",
        _ => "get",
    }
}

/// Whether the home API server allows `who` to `verb` `nodes/proxy` of `node`; `Err` when it
/// could not be asked.
pub async fn allowed(
    local: &kube::Client,
    who: &Subject,
    verb: &str,
    node: &str,
) -> Result<bool, kube::Error> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(who.user.clone()),
            groups: Some(who.groups.clone()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.to_owned()),
                resource: Some("nodes".into()),
                subresource: Some("proxy".into()),
                name: Some(node.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(local.clone());
    let answer = api.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, DnType, KeyPair};

    use super::*;

    #[test]
    fn the_subject_is_the_cn_and_every_o() {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name
            .push(DnType::CommonName, "kube-apiserver-kubelet-client");
        p.distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        assert_eq!(
            subject(cert.der()),
            Some(Subject {
                user: "kube-apiserver-kubelet-client".into(),
                groups: vec!["system:masters".into()],
            })
        );
        assert_eq!(subject(b"not a certificate"), None);
        assert_eq!(verb(&hyper::Method::GET), "get");
        assert_eq!(verb(&hyper::Method::POST), "create");
    }
}
