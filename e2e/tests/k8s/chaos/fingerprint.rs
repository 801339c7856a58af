//! A fingerprint of the Liqo objects of both clusters: (cluster, kind, namespace, name, key
//! fields) with cluster IDs, URLs and generated suffixes normalized, as a sorted multiset, so a
//! duplicate shows as an extra entry; and the duplicate checks of acceptance 5.

use control::{
    api::{
        discovery::ResourceRequest,
        discovery::{ForeignCluster, PeeringConditionType as T},
        sharing::ResourceOffer,
    },
    consts::{labels, objects},
};
use e2e::{
    k8s::Clusters,
    liqo::{self, Liqo},
};
use k8s_openapi::api::{
    certificates::v1::CertificateSigningRequest,
    core::v1::{Namespace, Secret},
    rbac::v1::RoleBinding,
};
use kube::{Api, Client, Resource, api::ListParams};
use serde_json::Value;

use super::get;

/// One entry of a fingerprint.
pub(crate) type Entry = (String, String, String, String, String);

/// Replaces what differs between runs (cluster IDs, URLs with ports) by the cluster's name.
pub(crate) fn normalizer(set: &Clusters, installed: &Liqo) -> impl Fn(&str) -> String {
    let mut subst: Vec<(String, String)> = Vec::new();
    for i in &installed.clusters {
        subst.push((i.cluster_id.clone(), format!("<{}-id>", i.cluster)));
        if let Some(u) = &i.auth_url {
            subst.push((u.clone(), format!("<{}-auth>", i.cluster)));
        }
        if let Some(c) = set.get(&i.cluster) {
            subst.push((c.server.clone(), format!("<{}-api>", i.cluster)));
        }
    }
    move |s: &str| {
        let mut s = s.to_owned();
        for (a, b) in &subst {
            s = s.replace(a, b);
        }
        s = tenant_namespaces(&s);
        if let Some(rest) = s.strip_prefix(objects::IDENTITY_GENERATE_NAME)
            && !rest.is_empty()
        {
            s = format!("{}*", objects::IDENTITY_GENERATE_NAME);
        }
        s
    }
}

/// `s` with the hash suffix of every tenant namespace name (`liqo-tenant-milan-995d4d`, made
/// from the cluster ID) replaced by `*`.
pub(crate) fn tenant_namespaces(s: &str) -> String {
    let p = objects::TENANT_NAMESPACE_PREFIX;
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find(p) {
        out.push_str(&rest[..at + p.len()]);
        rest = &rest[at + p.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        match rest[..end].rfind('-') {
            Some(dash) => out.push_str(&format!("{}*", &rest[..=dash])),
            None => out.push_str(&rest[..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `v` without timestamps, resource versions and other per-run keys, strings normalized.
pub(crate) fn clean(v: &Value, norm: &dyn Fn(&str) -> String) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| {
                    let k = k.to_ascii_lowercase();
                    !(k.contains("time") || k.contains("resourceversion") || k == "uid")
                })
                .map(|(k, v)| (norm(k), clean(v, norm)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| clean(v, norm)).collect()),
        Value::String(s) => Value::String(norm(s)),
        other => other.clone(),
    }
}

pub(crate) async fn list<K>(client: &Client, ns: Option<&str>) -> Vec<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let api: Api<K> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    api.list(&ListParams::default()).await.unwrap().items
}

/// The Liqo objects of cluster `name`, as a sorted multiset of (cluster, kind, namespace,
/// name, key fields).
pub(crate) async fn fingerprint_of(set: &Clusters, installed: &Liqo, name: &str) -> Vec<Entry> {
    let norm = normalizer(set, installed);
    let client = get(set, name).client().await.unwrap();
    let mut out: Vec<Entry> = Vec::new();
    let mut push = |kind: &str, ns: Option<String>, n: Option<String>, key: Value| {
        out.push((
            name.to_owned(),
            kind.to_owned(),
            norm(ns.as_deref().unwrap_or("")),
            norm(n.as_deref().unwrap_or("")),
            clean(&key, &norm).to_string(),
        ));
    };
    for f in Api::<ForeignCluster>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        let st = f.status.clone().unwrap_or_default();
        let conds: Vec<String> = [
            T::OutgoingPeering,
            T::IncomingPeering,
            T::NetworkStatus,
            T::AuthenticationStatus,
        ]
        .iter()
        .map(|t| format!("{t:?}={:?}", st.condition(*t)))
        .collect();
        push(
            "ForeignCluster",
            None,
            f.metadata.name.clone(),
            serde_json::json!({"labels": f.metadata.labels, "spec": f.spec, "conditions": conds,
                "tenant": st.tenant_namespace}),
        );
    }
    for r in list::<ResourceRequest>(&client, None).await {
        push(
            "ResourceRequest",
            r.metadata.namespace.clone(),
            r.metadata.name.clone(),
            serde_json::json!({"labels": r.metadata.labels, "spec": r.spec, "status": r.status,
                "finalizers": r.metadata.finalizers}),
        );
    }
    for r in list::<ResourceOffer>(&client, None).await {
        push(
            "ResourceOffer",
            r.metadata.namespace.clone(),
            r.metadata.name.clone(),
            serde_json::json!({"labels": r.metadata.labels, "spec": r.spec, "status": r.status,
                "finalizers": r.metadata.finalizers}),
        );
    }
    let tenants: Vec<String> = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| {
            let name = n.metadata.name.clone()?;
            if !name.starts_with(objects::TENANT_NAMESPACE_PREFIX) {
                return None;
            }
            push(
                "Namespace",
                None,
                Some(name.clone()),
                serde_json::json!({"labels": n.metadata.labels}),
            );
            Some(name)
        })
        .collect();
    for ns in tenants.iter().map(String::as_str).chain([liqo::NAMESPACE]) {
        for s in list::<Secret>(&client, Some(ns)).await {
            let keys: Vec<String> = s.data.unwrap_or_default().into_keys().collect();
            push(
                "Secret",
                s.metadata.namespace.clone(),
                s.metadata.name.clone(),
                serde_json::json!({"labels": s.metadata.labels, "keys": keys, "type": s.type_}),
            );
        }
        for b in list::<RoleBinding>(&client, Some(ns)).await {
            push(
                "RoleBinding",
                b.metadata.namespace.clone(),
                b.metadata.name.clone(),
                serde_json::json!({"role": b.role_ref.name, "subjects": b.subjects}),
            );
        }
    }
    for c in Api::<CertificateSigningRequest>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        push(
            "CertificateSigningRequest",
            None,
            c.metadata.name.clone(),
            serde_json::json!({"labels": c.metadata.labels, "signer": c.spec.signer_name}),
        );
    }
    out.sort();
    out
}

pub(crate) async fn fingerprint(set: &Clusters, installed: &Liqo) -> Vec<Entry> {
    let mut all = fingerprint_of(set, installed, "rome").await;
    all.extend(fingerprint_of(set, installed, "milan").await);
    all
}

pub(crate) fn count(
    fp: &[Entry],
    cluster: &str,
    kind: &str,
    pred: impl Fn(&Entry) -> bool,
) -> usize {
    fp.iter()
        .filter(|e| e.0 == cluster && e.1 == kind && pred(e))
        .count()
}

/// The brief's explicit duplicate checks on a fingerprint of a converged peering.
pub(crate) fn assert_no_duplicates(fp: &[Entry]) {
    let bad = duplicates(fp);
    assert!(
        bad.is_empty(),
        "{}; the objects:\n{}",
        bad.join("; "),
        fp.iter()
            .map(|e| format!("{e:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// What is not there exactly once (or, for CSRs, not gone) in a converged peering.
pub(crate) fn duplicates(fp: &[Entry]) -> Vec<String> {
    let tenant = |e: &Entry| e.2.starts_with(objects::TENANT_NAMESPACE_PREFIX);
    let mut want = vec![
        (
            "identity Secrets on rome".to_owned(),
            count(fp, "rome", "Secret", |e| {
                tenant(e) && e.4.contains(labels::LOCAL_IDENTITY)
            }),
            1,
        ),
        (
            "liqo-remote-certificate Secrets on milan".to_owned(),
            count(fp, "milan", "Secret", |e| {
                e.3 == objects::REMOTE_CERTIFICATE_SECRET
            }),
            1,
        ),
        (
            "leftover CSRs on milan".to_owned(),
            count(fp, "milan", "CertificateSigningRequest", |_| true),
            0,
        ),
    ];
    for c in ["rome", "milan"] {
        for kind in ["ResourceRequest", "ResourceOffer", "ForeignCluster"] {
            want.push((format!("{kind}s on {c}"), count(fp, c, kind, |_| true), 1));
        }
    }
    let mut bindings: Vec<&Entry> = fp.iter().filter(|e| e.1 == "RoleBinding").collect();
    let n = bindings.len();
    bindings.dedup_by(|a, b| (&a.0, &a.2, &a.3) == (&b.0, &b.2, &b.3));
    want.push(("RoleBindings named twice".to_owned(), n - bindings.len(), 0));
    want.into_iter()
        .filter(|(_, got, want)| got != want)
        .map(|(what, got, want)| format!("{what}: {got}, want {want}"))
        .collect()
}

pub(crate) fn diff(want: &[Entry], got: &[Entry]) -> String {
    let mut keys: Vec<&Entry> = want.iter().chain(got).collect();
    keys.sort();
    keys.dedup();
    let mut out = String::new();
    for e in keys {
        let (w, g) = (
            want.iter().filter(|x| *x == e).count(),
            got.iter().filter(|x| *x == e).count(),
        );
        let (sign, n) = if w > g { ('-', w - g) } else { ('+', g - w) };
        for _ in 0..n {
            out.push_str(&format!("{sign} {e:?}\n"));
        }
    }
    out
}
