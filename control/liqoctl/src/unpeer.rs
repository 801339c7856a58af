//! `unpeer` of a ForeignCluster that never authenticated (its identity request refused, its
//! auth service unreachable or another cluster's, a peering half made): nothing of it is worth
//! keeping, so it is removed with everything it made here, each removal printed, and what could
//! not be removed is named.
//!
//! What a ForeignCluster makes on this cluster before it authenticates: the remote cluster's
//! token (Secret `remote-token-<id>`, written by `peer out-of-band`), our tenant namespace for
//! it, and in it our key and CSR (an identity Secret, never signed). The tenant namespace is
//! kept when the remote cluster holds an identity this cluster issued (Secret
//! `liqo-remote-certificate` there, with its RoleBindings): only our identity Secrets go then.
//! An authenticated ForeignCluster is never removed here (its identity is reused when peering
//! again, as upstream).

use std::time::Duration;

use control::{
    api::discovery::{
        ForeignCluster, ForeignClusterStatus, PeeringConditionStatus as S,
        PeeringConditionType as T,
    },
    consts::{labels, objects, values},
    names,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Preconditions},
};

use crate::{peer::PeerError, stages};

/// Why a ForeignCluster whose outgoing peering is gone may be removed whole (`None`: it must
/// stay): it never authenticated and no direction is left.
pub fn removable(status: Option<&ForeignClusterStatus>) -> Option<String> {
    let auth = stages::seen(status, T::AuthenticationStatus);
    let incoming = stages::seen(status, T::IncomingPeering);
    let outgoing = stages::seen(status, T::OutgoingPeering);
    let unused = incoming.status == S::None && outgoing.status == S::None;
    (auth.status != S::Established && unused).then(|| format!("never authenticated ({auth})"))
}

/// How often the removals are looked at.
const POLL: Duration = Duration::from_millis(200);

fn failed(what: String) -> impl FnOnce(kube::Error) -> PeerError {
    move |e| PeerError::Kube {
        what,
        source: e.into(),
    }
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Removes `fc` (this very object: a UID precondition) and what it made here (see the module
/// documentation), waiting for each until `deadline`.
pub async fn remove(
    client: &Client,
    ns: &str,
    fc: &ForeignCluster,
    deadline: tokio::time::Instant,
) -> Result<(), PeerError> {
    let name = fc.name_any();
    let id = &fc.spec.cluster_identity.cluster_id;
    let cluster = fc.spec.cluster_identity.cluster_name.to_string();
    let fcs: Api<ForeignCluster> = Api::all(client.clone());
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: fc.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match fcs.delete(&name, &dp).await {
        Ok(_) => {}
        Err(e) if not_found(&e) => {}
        Err(e) => return Err(failed(format!("deleting ForeignCluster {name}"))(e)),
    }
    loop {
        let now = fcs
            .get_opt(&name)
            .await
            .map_err(failed(format!("reading ForeignCluster {name}")))?;
        match now {
            Some(f) if f.uid() == fc.uid() => {
                if tokio::time::Instant::now() >= deadline {
                    // What it made stays while it does: its controllers may still use it.
                    return Err(PeerError::Leftovers(format!(
                        "could not remove ForeignCluster {name:?}: still there (finalizers {:?}); \
                         its token and tenant namespace are kept while it is",
                        f.finalizers()
                    )));
                }
                tokio::time::sleep(POLL).await;
            }
            _ => break,
        }
    }
    println!("Removed ForeignCluster {name:?}");
    let mut left = Vec::new();

    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let token = names::remote_token_secret(id).to_string();
    match secrets.delete(&token, &DeleteParams::default()).await {
        Ok(_) => println!("Removed Secret {ns}/{token} (the token of cluster {cluster:?})"),
        Err(e) if not_found(&e) => {}
        Err(e) => left.push(format!("Secret {ns}/{token}: {}", liqo_types::chain(&e))),
    }

    let selector = format!(
        "{}={id},{}={}",
        labels::CLUSTER_ID,
        labels::TENANT_NAMESPACE,
        values::TRUE
    );
    let tenants = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(failed(format!(
            "listing the tenant namespaces of {cluster:?}"
        )))?;
    for t in tenants.items {
        let tenant = t.name_any();
        if let Err(why) = remove_tenant(client, &tenant, id, &cluster, deadline).await {
            left.push(why);
        }
    }
    if left.is_empty() {
        Ok(())
    } else {
        Err(PeerError::Leftovers(format!(
            "ForeignCluster {name:?} removed, but not all it made: {}",
            left.join("; ")
        )))
    }
}

/// Our identity Secrets in tenant namespace `tenant`, then the namespace unless the remote
/// cluster holds an identity issued here. `Err`: what could not be removed, and why.
async fn remove_tenant(
    client: &Client,
    tenant: &str,
    id: &control::api::ClusterId,
    cluster: &str,
    deadline: tokio::time::Instant,
) -> Result<(), String> {
    let chain = |e: kube::Error| liqo_types::chain(&e).to_string();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), tenant);
    let identities = secrets
        .list(&ListParams::default().labels(&format!(
            "{}={},{}={id}",
            labels::LOCAL_IDENTITY,
            values::TRUE,
            labels::CLUSTER_ID
        )))
        .await
        .map_err(|e| format!("listing the identity Secrets in {tenant}: {}", chain(e)))?;
    let issued = secrets
        .get_opt(objects::REMOTE_CERTIFICATE_SECRET)
        .await
        .map_err(|e| {
            format!(
                "reading Secret {tenant}/{}: {}",
                objects::REMOTE_CERTIFICATE_SECRET,
                chain(e)
            )
        })?
        .is_some();
    if issued {
        for s in identities.items {
            let n = s.name_any();
            match secrets.delete(&n, &DeleteParams::default()).await {
                Ok(_) => println!(
                    "Removed Secret {tenant}/{n} (our key and CSR for cluster {cluster:?}, never signed)"
                ),
                Err(e) if not_found(&e) => {}
                Err(e) => return Err(format!("Secret {tenant}/{n}: {}", chain(e))),
            }
        }
        println!(
            "Kept namespace {tenant}: cluster {cluster:?} holds an identity this cluster issued \
             (Secret {tenant}/{})",
            objects::REMOTE_CERTIFICATE_SECRET
        );
        return Ok(());
    }
    let held: Vec<String> = identities.items.iter().map(ResourceExt::name_any).collect();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.delete(tenant, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(e) if not_found(&e) => return Ok(()),
        Err(e) => return Err(format!("namespace {tenant}: {}", chain(e))),
    }
    loop {
        match namespaces.get_opt(tenant).await {
            Ok(None) => break,
            Ok(Some(n)) if tokio::time::Instant::now() >= deadline => {
                let phase = n.status.and_then(|s| s.phase).unwrap_or_default();
                return Err(format!("namespace {tenant}: still there ({phase})"));
            }
            Ok(Some(_)) => tokio::time::sleep(POLL).await,
            Err(e) => return Err(format!("namespace {tenant}: {}", chain(e))),
        }
    }
    let with = if held.is_empty() {
        String::new()
    } else {
        format!(
            ", with our key and CSR for cluster {cluster:?} (Secret {}, never signed)",
            held.join(", ")
        )
    };
    println!("Removed namespace {tenant}{with}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use control::conditions::{Authentication, Condition, Peering, set};
    use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

    use super::*;

    fn status(conds: &[Condition]) -> ForeignClusterStatus {
        let now = Time(Timestamp::UNIX_EPOCH);
        let mut s = ForeignClusterStatus::default();
        for c in conds {
            set(&mut s.peering_conditions, *c, &now);
        }
        s
    }

    #[test]
    fn only_a_foreign_cluster_that_never_authenticated_and_is_unused_goes() {
        use Authentication as A;
        for a in [
            A::Denied,
            A::EmptyDenied,
            A::Pending,
            A::NotReachable,
            A::WrongCluster,
        ] {
            let s = status(&[Condition::Authentication(a)]);
            let why = removable(Some(&s)).unwrap();
            assert!(
                why.starts_with("never authenticated (AuthenticationStatus"),
                "{why}"
            );
        }
        assert!(
            removable(None).is_some(),
            "no status at all: never authenticated"
        );
        let signed = status(&[Condition::Authentication(A::Accepted)]);
        assert_eq!(removable(Some(&signed)), None);
        // The remote cluster consumes us: kept, whatever our authentication.
        let incoming = status(&[
            Condition::Authentication(A::Denied),
            Condition::Incoming(Peering::Accepted),
        ]);
        assert_eq!(removable(Some(&incoming)), None);
        let outgoing = status(&[
            Condition::Authentication(A::Pending),
            Condition::Outgoing(Peering::Deleting),
        ]);
        assert_eq!(removable(Some(&outgoing)), None);
    }
}
