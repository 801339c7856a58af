//! The Lease `liqo-gateway` in the Liqo namespace: its holder is the node the gateway runs on
//! (the route operators route the remote ranges there). It is an announcement, not an
//! election: one gateway runs (a Deployment of one replica, strategy Recreate), and the
//! operator that starts beside it takes the Lease at once (a move must not wait for the old
//! one to expire). An operator that finds another holder on renewal has been replaced: it
//! stops renewing and reports it. A renewal replaces the Lease it read (its resourceVersion is
//! the precondition), so it never overwrites a holder that took the Lease meanwhile: a conflict
//! (409) counts as lost.

use std::time::Duration;

use control::consts::net;
use k8s_openapi::{
    api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::MicroTime, jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};

use super::error::{KubeError, api};

/// How often the Lease is renewed.
pub const RENEW: Duration = Duration::from_secs(10);
/// How long a Lease not renewed stays valid.
pub const DURATION_SECS: i32 = 40;

/// The Lease as `holder` holds it now.
fn lease(ns: &str, holder: &str, now: Timestamp) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": net::GATEWAY_LEASE, "namespace": ns},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": DURATION_SECS,
            "renewTime": MicroTime(now),
        },
    })
}

/// Takes (or renews) the Lease for `holder` with field manager `manager`; returns the holder
/// it had before.
pub async fn take(
    client: &Client,
    ns: &str,
    holder: &str,
    manager: &str,
) -> Result<Option<String>, KubeError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let what = format!("Lease {ns}/{}", net::GATEWAY_LEASE);
    let before = leases
        .get_opt(net::GATEWAY_LEASE)
        .await
        .map_err(api(format!("reading {what}")))?
        .as_ref()
        .and_then(control::network::routes::lease_holder);
    leases
        .patch(
            net::GATEWAY_LEASE,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(lease(ns, holder, Timestamp::now())),
        )
        .await
        .map_err(api(format!("taking {what} for {holder}")))?;
    Ok(before)
}

/// Renews the Lease every [`RENEW`] while `holder` holds it; returns when another holder took
/// it (the error says who), or on a failure to renew it for longer than its duration.
pub async fn keep(client: Client, ns: String, holder: String, manager: String) -> KubeError {
    let mut failing_since: Option<std::time::Instant> = None;
    loop {
        tokio::time::sleep(RENEW).await;
        match take_if_ours(&client, &ns, &holder, &manager).await {
            Ok(()) => failing_since = None,
            Err(e @ KubeError::Object { .. }) => return e,
            Err(e) => {
                tracing::warn!(error = %liqo_types::chain(&e), "renewing the gateway Lease");
                let since = *failing_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() > Duration::from_secs(DURATION_SECS.unsigned_abs().into()) {
                    return e;
                }
            }
        }
    }
}

/// The Lease read, renewed by `holder` at `now` (same resourceVersion: the precondition of the
/// replace); an error naming the other holder when another holds it.
pub fn renewed(mut lease: Lease, holder: &str, now: Timestamp) -> Result<Lease, HeldBy> {
    let spec = lease.spec.get_or_insert_with(Default::default);
    if let Some(other) = spec.holder_identity.as_ref().filter(|h| *h != holder) {
        return Err(HeldBy(other.clone()));
    }
    spec.holder_identity = Some(holder.to_owned());
    spec.lease_duration_seconds = Some(DURATION_SECS);
    spec.renew_time = Some(MicroTime(now));
    lease.metadata.managed_fields = None;
    Ok(lease)
}

/// The Lease is held by another gateway operator (its holder identity).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("held by {0}")]
pub struct HeldBy(pub String);

/// The Lease `what` is lost: `by` took it, or it changed since read (a conflict).
fn lost(what: String, by: &str) -> KubeError {
    KubeError::Object {
        what,
        problem: format!("taken by {by}: another gateway operator replaced this one"),
    }
}

/// A failed renewal: a conflict (the Lease changed since read) means the Lease is lost.
pub fn renewal_failed(what: String, e: kube::Error) -> KubeError {
    match e {
        kube::Error::Api(s) if s.code == 409 => lost(what, "a change since it was read (409)"),
        source => KubeError::Api {
            what: format!("renewing {what}"),
            source,
        },
    }
}

async fn take_if_ours(
    client: &Client,
    ns: &str,
    holder: &str,
    manager: &str,
) -> Result<(), KubeError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let what = format!("Lease {ns}/{}", net::GATEWAY_LEASE);
    let Some(read) = leases
        .get_opt(net::GATEWAY_LEASE)
        .await
        .map_err(api(format!("reading {what}")))?
    else {
        // Deleted: taken again (created).
        return take(client, ns, holder, manager).await.map(drop);
    };
    let lease =
        renewed(read, holder, Timestamp::now()).map_err(|other| lost(what.clone(), &other.0))?;
    let pp = PostParams {
        field_manager: Some(manager.to_owned()),
        ..PostParams::default()
    };
    leases
        .replace(net::GATEWAY_LEASE, &pp, &lease)
        .await
        .map_err(|e| renewal_failed(what, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(holder: Option<&str>) -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "liqo-gateway", "namespace": "liqo", "resourceVersion": "42"},
            "spec": {"holderIdentity": holder, "renewTime": "2026-01-01T00:00:00.000000Z"},
        }))
        .unwrap()
    }

    #[test]
    fn a_renewal_keeps_the_resource_version_read_and_never_takes_another_holders_lease() {
        let now: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let l = renewed(read(Some("n0")), "n0", now).unwrap();
        assert_eq!(l.metadata.resource_version.as_deref(), Some("42"));
        let spec = l.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("n0"));
        assert_eq!(spec.renew_time, Some(MicroTime(now)));
        assert_eq!(spec.lease_duration_seconds, Some(DURATION_SECS));
        assert_eq!(
            renewed(read(Some("n1")), "n0", now).unwrap_err(),
            HeldBy("n1".into())
        );
        let free = renewed(read(None), "n0", now).unwrap();
        assert_eq!(free.spec.unwrap().holder_identity.as_deref(), Some("n0"));
    }

    #[test]
    fn a_conflict_on_renewal_means_the_lease_is_lost() {
        let status = |code: u16| {
            kube::Error::Api(Box::new(
                serde_json::from_value(serde_json::json!({"code": code, "message": "m"})).unwrap(),
            ))
        };
        let e = renewal_failed("Lease liqo/liqo-gateway".into(), status(409));
        assert!(matches!(e, KubeError::Object { .. }), "{e:?}");
        assert!(e.to_string().contains("replaced"), "{e}");
        let e = renewal_failed("Lease liqo/liqo-gateway".into(), status(500));
        assert!(matches!(e, KubeError::Api { .. }), "{e:?}");
    }
}
