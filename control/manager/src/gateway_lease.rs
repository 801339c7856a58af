//! The gateway operator's Lease (`liqo-gateway` in the Liqo namespace) as the ForeignCluster
//! controller sees it: read beside a `Connected` TunnelEndpoint (NETWORKING is `Established`
//! only while it is fresh, [`crate::decide::fc::network`]), and watched so that a renewal after
//! an expiry is noticed at once (its expiry is the controller's requeue).

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, watcher},
};

use crate::{
    context::{Context, now},
    decide::fc::{GatewayLease, LeaseTimes},
    error::{Error, kube as kerr},
};

/// The gateway operator's Lease in the Liqo namespace (read only beside a Connected
/// TunnelEndpoint: it says whether that Connected is current).
pub async fn read(ctx: &Context) -> Result<GatewayLease, Error> {
    use control::consts::net::GATEWAY_LEASE;
    let ns = &ctx.settings.namespace;
    let name = format!("{ns}/{GATEWAY_LEASE}");
    let lease = Api::<Lease>::namespaced(ctx.client.clone(), ns)
        .get_opt(GATEWAY_LEASE)
        .await
        .map_err(kerr(format!("get Lease {name}")))?;
    Ok(of(ns, lease.as_ref()))
}

/// The gateway Lease `liqo-gateway` in `ns` as read (`None`: there is none).
pub fn of(ns: &str, lease: Option<&Lease>) -> GatewayLease {
    let held = lease.map(|l| {
        let spec = l.spec.clone().unwrap_or_default();
        LeaseTimes {
            renewed: spec.renew_time.map(|t| t.0),
            duration_secs: spec.lease_duration_seconds,
        }
    });
    GatewayLease {
        name: format!("{ns}/{}", control::consts::net::GATEWAY_LEASE),
        held,
    }
}

/// Events of the gateway operator's Lease that may make a stale `Connected` current again:
/// one `()` when it appears, goes, changes holder, or is renewed after it had expired (a
/// renewal of a fresh Lease, every few seconds, changes nothing NETWORKING says; its expiry
/// is the ForeignCluster controller's requeue).
pub fn returns(client: &Client, ns: &str) -> impl Stream<Item = ()> + Send + 'static {
    use control::consts::net::GATEWAY_LEASE;
    let api: Api<Lease> = Api::namespaced(client.clone(), ns);
    let config = watcher::Config::default().fields(&format!("metadata.name={GATEWAY_LEASE}"));
    let ns = ns.to_owned();
    watcher(api, config)
        .default_backoff()
        .scan(None, move |last: &mut Option<Option<Lease>>, event| {
            let current = match event {
                Ok(watcher::Event::Apply(l) | watcher::Event::InitApply(l)) => Some(Some(l)),
                Ok(watcher::Event::Delete(_)) => Some(None),
                Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
                Err(e) => {
                    tracing::debug!(error = %e, "watching the gateway Lease");
                    None
                }
            };
            let fire = current.map(|cur| {
                let before = last.replace(cur.clone());
                returned(&ns, before.as_ref(), cur.as_ref(), now().0)
            });
            futures::future::ready(Some(fire))
        })
        .filter_map(|fire| futures::future::ready((fire == Some(true)).then_some(())))
}

/// Whether a Lease event (`before` → `now_seen`, `None`: absent; `before` `None`: the first
/// seen) may change NETWORKING: the first, an appearance or a removal, a new holder, or any
/// change of a Lease that had expired (judged as [`crate::decide::fc::lease_freshness`] does).
pub fn returned(
    ns: &str,
    before: Option<&Option<Lease>>,
    now_seen: Option<&Lease>,
    now: k8s_openapi::jiff::Timestamp,
) -> bool {
    let Some(before) = before else {
        return true;
    };
    let holder = |l: &Lease| l.spec.as_ref().and_then(|s| s.holder_identity.clone());
    match (before.as_ref(), now_seen) {
        (None, None) => false,
        (None, Some(_)) | (Some(_), None) => true,
        (Some(b), Some(n)) => {
            let expired = crate::decide::fc::lease_freshness(&of(ns, Some(b)), now).is_err();
            holder(b) != holder(n) || (expired && b.spec != n.spec)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: &str) -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "liqo-gateway", "namespace": "liqo"},
            "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": 40},
        }))
        .unwrap()
    }

    #[test]
    fn only_lease_events_that_may_change_networking_wake_the_foreign_clusters() {
        let now: k8s_openapi::jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let fresh = lease("n0", "2026-01-01T00:00:50.000000Z");
        let renewed = lease("n0", "2026-01-01T00:01:00.000000Z");
        let stale = lease("n0", "2026-01-01T00:00:10.000000Z");
        let moved = lease("n1", "2026-01-01T00:01:00.000000Z");
        let r = |b: Option<Option<Lease>>, n: Option<&Lease>| returned("liqo", b.as_ref(), n, now);
        // The renewal of a fresh Lease: nothing.
        assert!(!r(Some(Some(fresh.clone())), Some(&renewed)));
        // The renewal of an expired one: its Connected is current again.
        assert!(r(Some(Some(stale.clone())), Some(&renewed)));
        // A new holder, an appearance, a removal, the first seen.
        assert!(r(Some(Some(fresh.clone())), Some(&moved)));
        assert!(r(Some(None), Some(&renewed)));
        assert!(r(Some(Some(fresh)), None));
        assert!(r(None, Some(&stale)));
        assert!(!r(Some(None), None));
        // The same expired Lease seen again (a relist): nothing.
        assert!(!r(Some(Some(stale.clone())), Some(&stale)));
    }
}
