//! The Lease `liqo-gateway` in the Liqo namespace: its holder is the node the gateway runs on
//! (the route operators route the remote ranges there). It is an announcement, not an
//! election: one gateway runs (a Deployment of one replica, strategy Recreate), and the
//! operator that starts beside it takes the Lease at once (a move must not wait for the old
//! one to expire). An operator that finds another holder on renewal has been replaced: it
//! stops renewing and reports it.

use std::time::Duration;

use control::consts::net;
use k8s_openapi::{
    api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::MicroTime, jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};

use super::{KubeError, api};

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
        .and_then(crate::route_plan::lease_holder);
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

async fn take_if_ours(
    client: &Client,
    ns: &str,
    holder: &str,
    manager: &str,
) -> Result<(), KubeError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let what = format!("Lease {ns}/{}", net::GATEWAY_LEASE);
    let now = leases
        .get_opt(net::GATEWAY_LEASE)
        .await
        .map_err(api(format!("reading {what}")))?
        .as_ref()
        .and_then(crate::route_plan::lease_holder);
    if let Some(other) = now.filter(|h| h != holder) {
        return Err(KubeError::Object {
            what,
            problem: format!("taken by {other}: another gateway operator replaced this one"),
        });
    }
    take(client, ns, holder, manager).await.map(drop)
}
