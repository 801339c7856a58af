//! `unpeer` of a ForeignCluster that never authenticated (its identity request refused, its
//! auth service unreachable or another cluster's, a peering half made): it is removed with
//! everything it made on this cluster that nothing else needs, each removal printed, and what
//! is kept or could not be removed is named with why.
//!
//! What a ForeignCluster makes here before it authenticates: the remote cluster's token
//! (Secret `remote-token-<id>`, written by `peer out-of-band`), our tenant namespace for it,
//! and in it our key and CSR (an identity Secret). The plan ([`plan_tenant`], pure) keeps:
//! - our identity when the remote cluster may hold a certificate for it: signed already, or
//!   sent without a definite refusal (its answer lost): peering again asks with it once more,
//!   and a provider answers a repeated request with the certificate it signed, where a new key
//!   would be refused for good;
//! - the tenant namespace while it holds such an identity, or an identity this cluster issued
//!   to the remote cluster (Secret `liqo-remote-certificate`, with its RoleBindings), and then
//!   the token too (the remote cluster authenticates to us with it).
//!
//! An authenticated ForeignCluster is never removed here (its identity is reused when peering
//! again, as upstream).

use std::time::Duration;

use control::peering::{fc::IdentityState, secret as identity};
use control::{
    api::{
        ClusterId,
        discovery::{
            ForeignCluster, ForeignClusterStatus, PeeringConditionStatus as S,
            PeeringConditionType as T,
        },
    },
    consts::{labels, objects, values},
    names,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Preconditions},
};

use crate::{
    peer::error::{PeerError, kube_err},
    stages,
};

/// Why a ForeignCluster whose outgoing peering is gone may be removed whole (`None`: it must
/// stay): it never authenticated and no direction is left.
pub fn removable(status: Option<&ForeignClusterStatus>) -> Option<String> {
    let auth = stages::seen(status, T::AuthenticationStatus);
    let incoming = stages::seen(status, T::IncomingPeering);
    let outgoing = stages::seen(status, T::OutgoingPeering);
    let unused = incoming.status == S::None && outgoing.status == S::None;
    (auth.status != S::Established && unused).then(|| format!("never authenticated ({auth})"))
}

/// What to do in one tenant namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantPlan {
    /// Our identity Secrets to delete.
    pub delete: Vec<String>,
    /// Our identity Secrets kept, with why.
    pub keep: Vec<(String, &'static str)>,
    /// Why the namespace (and the token) stays; `None`: it is deleted.
    pub keep_namespace: Option<String>,
}

/// The plan for a tenant namespace holding our `identities` (name, state), `issued_here`
/// whether it holds an identity this cluster issued to the remote cluster, after an
/// authentication whose last status was `auth`.
pub fn plan_tenant(
    identities: &[(String, IdentityState)],
    issued_here: bool,
    auth: S,
) -> TenantPlan {
    let refused = matches!(auth, S::Denied | S::EmptyDenied);
    let mut plan = TenantPlan {
        delete: Vec::new(),
        keep: Vec::new(),
        keep_namespace: None,
    };
    for (name, state) in identities {
        match state {
            IdentityState::Signed { .. } => plan.keep.push((
                name.clone(),
                "signed by the remote cluster: peering again reuses it",
            )),
            IdentityState::Unsigned if !refused => plan.keep.push((
                name.clone(),
                "sent without a definite answer (the remote cluster may have signed it): \
                 peering again asks with it once more",
            )),
            IdentityState::Unsigned | IdentityState::Missing => plan.delete.push(name.clone()),
        }
    }
    plan.keep_namespace = if issued_here {
        Some(format!(
            "the remote cluster holds an identity this cluster issued (Secret {})",
            objects::REMOTE_CERTIFICATE_SECRET
        ))
    } else if !plan.keep.is_empty() {
        Some("it holds our identity for the remote cluster".into())
    } else {
        None
    };
    plan
}

/// How often the removals are looked at.
const POLL: Duration = Duration::from_millis(200);

/// Why something a ForeignCluster made could not be removed (collected, then reported
/// together in [`PeerError::Leftovers`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Leftover {
    /// A call to the apiserver failed.
    #[error("{what}")]
    Kube {
        /// What was being done, on which object.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The namespace was still there at the deadline.
    #[error("namespace {namespace}: still there ({phase})")]
    StillThere {
        /// The namespace.
        namespace: String,
        /// Its phase.
        phase: String,
    },
}

fn leftover(what: String) -> impl FnOnce(kube::Error) -> Leftover {
    move |source| Leftover::Kube { what, source }
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Removes `fc` (this very object, as read: UID and resourceVersion preconditions; changed
/// meanwhile, it is read and judged again) and what it made here (see the module
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
    let mut current = fc.clone();
    let auth = loop {
        let auth = stages::seen(current.status.as_ref(), T::AuthenticationStatus).status;
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: current.uid(),
                resource_version: current.resource_version(),
            }),
            ..DeleteParams::default()
        };
        match fcs.delete(&name, &dp).await {
            Ok(_) => break auth,
            Err(e) if not_found(&e) => break auth,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Its controller wrote it meanwhile: judged again on what it says now.
                let again = fcs
                    .get_opt(&name)
                    .await
                    .map_err(kube_err(format!("reading ForeignCluster {name}")))?;
                match again {
                    Some(f) if f.uid() == fc.uid() => {
                        if removable(f.status.as_ref()).is_none() {
                            return Err(PeerError::Leftovers(format!(
                                "ForeignCluster {name:?} authenticated (or peered) meanwhile: \
                                 nothing was removed; run the command again to tear it down"
                            )));
                        }
                        current = f;
                    }
                    _ => break auth,
                }
            }
            Err(e) => return Err(kube_err(format!("deleting ForeignCluster {name}"))(e)),
        }
    };
    wait_fc_gone(&fcs, &name, fc, deadline).await?;
    println!("Removed ForeignCluster {name:?}");

    let mut left = Vec::new();
    let mut keep_token = None;
    let selector = format!(
        "{}={id},{}={}",
        labels::CLUSTER_ID,
        labels::TENANT_NAMESPACE,
        values::TRUE
    );
    let tenants = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(kube_err(format!(
            "listing the tenant namespaces of {cluster:?}"
        )))?;
    for t in tenants.items {
        let tenant = t.name_any();
        match remove_tenant(client, &tenant, id, &cluster, auth, deadline).await {
            Ok(Some(why)) => keep_token = Some(why),
            Ok(None) => {}
            Err(why) => left.push(liqo_types::chain(&why)),
        }
    }

    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let token = names::remote_token_secret(id).to_string();
    if let Some(why) = keep_token {
        println!("Kept Secret {ns}/{token} (the token of cluster {cluster:?}): {why}");
    } else {
        match secrets.delete(&token, &DeleteParams::default()).await {
            Ok(_) => println!("Removed Secret {ns}/{token} (the token of cluster {cluster:?})"),
            Err(e) if not_found(&e) => {}
            Err(e) => {
                let why = leftover(format!("Secret {ns}/{token}"))(e);
                left.push(liqo_types::chain(&why));
            }
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

/// Waits until ForeignCluster `name` (the object `fc`) is gone.
async fn wait_fc_gone(
    fcs: &Api<ForeignCluster>,
    name: &str,
    fc: &ForeignCluster,
    deadline: tokio::time::Instant,
) -> Result<(), PeerError> {
    loop {
        let now = fcs
            .get_opt(name)
            .await
            .map_err(kube_err(format!("reading ForeignCluster {name}")))?;
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
            _ => return Ok(()),
        }
    }
}

/// Carries out [`plan_tenant`] in tenant namespace `tenant`. `Ok(Some(why))`: the namespace
/// is kept (and with it the token, why); `Err`: what could not be removed, and why.
async fn remove_tenant(
    client: &Client,
    tenant: &str,
    id: &ClusterId,
    cluster: &str,
    auth: S,
    deadline: tokio::time::Instant,
) -> Result<Option<String>, Leftover> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), tenant);
    let identities = secrets
        .list(&ListParams::default().labels(&identity::selector(id)))
        .await
        .map_err(leftover(format!(
            "listing the identity Secrets in {tenant}"
        )))?;
    let issued = secrets
        .get_opt(objects::REMOTE_CERTIFICATE_SECRET)
        .await
        .map_err(leftover(format!(
            "reading Secret {tenant}/{}",
            objects::REMOTE_CERTIFICATE_SECRET
        )))?
        .is_some();
    let states: Vec<(String, IdentityState)> = identities
        .items
        .iter()
        .map(|s| (s.name_any(), identity::state(Some(s))))
        .collect();
    let plan = plan_tenant(&states, issued, auth);
    for (n, why) in &plan.keep {
        println!("Kept Secret {tenant}/{n} (our key for cluster {cluster:?}): {why}");
    }
    if let Some(why) = &plan.keep_namespace {
        for n in &plan.delete {
            match secrets.delete(n, &DeleteParams::default()).await {
                Ok(_) => println!(
                    "Removed Secret {tenant}/{n} (our key and CSR for cluster {cluster:?}, refused)"
                ),
                Err(e) if not_found(&e) => {}
                Err(e) => return Err(leftover(format!("Secret {tenant}/{n}"))(e)),
            }
        }
        println!("Kept namespace {tenant}: {why}");
        return Ok(Some(why.clone()));
    }
    delete_namespace(client, tenant, deadline).await?;
    let with = if plan.delete.is_empty() {
        String::new()
    } else {
        format!(
            ", with our key and CSR for cluster {cluster:?} (Secret {}, refused)",
            plan.delete.join(", ")
        )
    };
    println!("Removed namespace {tenant}{with}");
    Ok(None)
}

/// Deletes namespace `tenant` and waits until it is gone; a controller reconcile that began
/// before the ForeignCluster went may apply it once more: looked at again a second later, and
/// deleted again if so. `unpeer in-band` removes its tenant namespaces with it too.
pub(crate) async fn delete_namespace(
    client: &Client,
    tenant: &str,
    deadline: tokio::time::Instant,
) -> Result<(), Leftover> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for pass in 0..2 {
        match namespaces.delete(tenant, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if not_found(&e) => {
                if pass > 0 {
                    return Ok(());
                }
            }
            Err(e) => return Err(leftover(format!("namespace {tenant}"))(e)),
        }
        loop {
            match namespaces.get_opt(tenant).await {
                Ok(None) => break,
                Ok(Some(n)) if tokio::time::Instant::now() >= deadline => {
                    let phase = n.status.and_then(|s| s.phase).unwrap_or_default();
                    return Err(Leftover::StillThere {
                        namespace: tenant.to_owned(),
                        phase,
                    });
                }
                Ok(Some(_)) => tokio::time::sleep(POLL).await,
                Err(e) => return Err(leftover(format!("namespace {tenant}"))(e)),
            }
        }
        if pass == 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
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

    fn ids(states: &[IdentityState]) -> Vec<(String, IdentityState)> {
        states
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("liqo-identity-{i}"), s.clone()))
            .collect()
    }

    #[test]
    fn a_refused_key_goes_one_the_remote_may_have_signed_stays() {
        let unsigned = ids(&[IdentityState::Unsigned]);
        // Refused: the remote cluster holds nothing for it; the namespace goes.
        for auth in [S::Denied, S::EmptyDenied] {
            let p = plan_tenant(&unsigned, false, auth);
            assert_eq!(p.delete, ["liqo-identity-0"]);
            assert!(p.keep.is_empty() && p.keep_namespace.is_none(), "{p:?}");
        }
        // No definite answer (unreachable, an error, pending): kept with its namespace.
        for auth in [S::Error, S::Pending, S::None] {
            let p = plan_tenant(&unsigned, false, auth);
            assert!(p.delete.is_empty(), "{auth:?}: {p:?}");
            assert_eq!(p.keep.len(), 1);
            assert!(p.keep_namespace.is_some());
        }
        // Signed (the API server check failed or waits): kept, whatever the condition.
        let signed = ids(&[IdentityState::Signed {
            namespace: "liqo-tenant-rome-1".into(),
        }]);
        let p = plan_tenant(&signed, false, S::Error);
        assert!(p.delete.is_empty() && p.keep.len() == 1 && p.keep_namespace.is_some());
        // Nothing of ours: the namespace goes, unless the remote holds an identity we issued.
        assert_eq!(
            plan_tenant(&[], false, S::Denied),
            TenantPlan {
                delete: vec![],
                keep: vec![],
                keep_namespace: None
            }
        );
        let p = plan_tenant(&unsigned, true, S::Denied);
        assert_eq!(p.delete, ["liqo-identity-0"]);
        assert!(
            p.keep_namespace
                .as_deref()
                .is_some_and(|w| w.contains("liqo-remote-certificate"))
        );
    }
}
