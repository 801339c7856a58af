//! The gateway operator's Lease (`liqo-gateway` in the Liqo namespace) as the ForeignCluster
//! controller sees it: read beside a `Connected` TunnelEndpoint (NETWORKING is `Established`
//! only while it is fresh, [`control::peering::fc::network`]), and watched so that a renewal after
//! an expiry is noticed at once (its expiry is the controller's requeue).

use futures::{Stream, StreamExt};
use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, watcher},
};

use crate::{context::Context, kit::now};
use control::peering::fc::{GatewayLease, LeaseTimes};

pub mod observations;

use observations::lock;
pub use observations::{Observations, SharedObservations};

/// The gateway operator's Lease in the Liqo namespace (read only beside a Connected
/// TunnelEndpoint: it says whether that Connected is current). A read error is part of the
/// answer (NETWORKING says it), not a failure of the reconcile.
pub async fn read(ctx: &Context) -> GatewayLease {
    use control::consts::net::GATEWAY_LEASE;
    let ns = &ctx.settings.namespace;
    match Api::<Lease>::namespaced(ctx.client.clone(), ns)
        .get_opt(GATEWAY_LEASE)
        .await
    {
        Ok(lease) => {
            let observed = lock(&ctx.gateway_lease).see(lease.as_ref(), now().0);
            of(ns, lease.as_ref(), observed.unwrap_or(now().0))
        }
        Err(e) => GatewayLease {
            name: format!("{ns}/{GATEWAY_LEASE}"),
            held: Err(match &e {
                // The apiserver's own words (the Debug of its Status would be noise here).
                kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
                other => liqo_types::chain(other),
            }),
        },
    }
}

/// The gateway Lease `liqo-gateway` in `ns` as read (`None`: there is none), last seen
/// renewed at `observed` (our clock).
pub fn of(ns: &str, lease: Option<&Lease>, observed: Timestamp) -> GatewayLease {
    let held = lease.map(|l| {
        let spec = l.spec.clone().unwrap_or_default();
        LeaseTimes {
            renewed: spec.renew_time.map(|t| t.0),
            duration_secs: spec.lease_duration_seconds,
            observed,
        }
    });
    GatewayLease {
        name: format!("{ns}/{}", control::consts::net::GATEWAY_LEASE),
        held: Ok(held),
    }
}

/// Events of the gateway operator's Lease that may make a stale `Connected` current again:
/// one `()` when it appears, goes, changes holder, or is renewed after it had expired (a
/// renewal of a fresh Lease, every few seconds, changes nothing NETWORKING says; its expiry
/// is the ForeignCluster controller's requeue). Each event is recorded in `seen`.
pub fn returns(
    client: &Client,
    ns: &str,
    seen: SharedObservations,
) -> impl Stream<Item = ()> + Send + 'static {
    use control::consts::net::GATEWAY_LEASE;
    let api: Api<Lease> = Api::namespaced(client.clone(), ns);
    let config = watcher::Config::default().fields(&format!("metadata.name={GATEWAY_LEASE}"));
    let ns = ns.to_owned();
    watcher(api, config)
        .default_backoff()
        // The watch judges each change with its own observations: a read by a ForeignCluster
        // reconcile may have recorded the new spec in the shared ones already.
        .scan(
            (None, Observations::default()),
            move |(last, own): &mut (Option<Option<Lease>>, Observations), event| {
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
                    let at = now().0;
                    let observed = own.observed();
                    own.see(cur.as_ref(), at);
                    lock(&seen).see(cur.as_ref(), at);
                    let before = last.replace(cur.clone());
                    returned(&ns, before.as_ref(), cur.as_ref(), observed, at)
                });
                futures::future::ready(Some(fire))
            },
        )
        .filter_map(|fire| futures::future::ready((fire == Some(true)).then_some(())))
}

/// Whether a Lease event (`before` → `now_seen`, `None`: absent; `before` `None`: the first
/// seen) may change NETWORKING: the first, an appearance or a removal, a new holder, or any
/// change of a Lease that had expired at `now` (judged as [`control::peering::fc::lease_freshness`]
/// does, `observed`: our time when `before` was last seen renewed).
pub fn returned(
    ns: &str,
    before: Option<&Option<Lease>>,
    now_seen: Option<&Lease>,
    observed: Option<Timestamp>,
    now: Timestamp,
) -> bool {
    let Some(before) = before else {
        return true;
    };
    let holder = |l: &Lease| l.spec.as_ref().and_then(|s| s.holder_identity.clone());
    match (before.as_ref(), now_seen) {
        (None, None) => false,
        (None, Some(_)) | (Some(_), None) => true,
        (Some(b), Some(n)) => {
            let was = of(ns, Some(b), observed.unwrap_or(now));
            let expired = control::peering::fc::lease_freshness(&was, now).is_err();
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
        let t = |s: &str| -> Timestamp { s.parse().unwrap() };
        let now = t("2026-01-01T00:01:00Z");
        let fresh = lease("n0", "2026-01-01T00:00:50.000000Z");
        let renewed = lease("n0", "2026-01-01T00:01:00.000000Z");
        let stale = lease("n0", "2026-01-01T00:00:10.000000Z");
        let moved = lease("n1", "2026-01-01T00:01:00.000000Z");
        // `before` last seen renewed 10 s ago (fresh) or 50 s ago (expired: valid 40 s).
        let (recent, old) = (
            Some(t("2026-01-01T00:00:50Z")),
            Some(t("2026-01-01T00:00:10Z")),
        );
        let r = |b: Option<Option<Lease>>, n: Option<&Lease>, seen: Option<Timestamp>| {
            returned("liqo", b.as_ref(), n, seen, now)
        };
        // The renewal of a fresh Lease: nothing.
        assert!(!r(Some(Some(fresh.clone())), Some(&renewed), recent));
        // The renewal of an expired one: its Connected is current again.
        assert!(r(Some(Some(stale.clone())), Some(&renewed), old));
        // Expiry is judged by when WE saw it renewed, not by its renewTime: a renewTime far
        // in the past (the holder's clock behind ours) seen renewing 10 s ago is fresh...
        assert!(!r(Some(Some(stale.clone())), Some(&renewed), recent));
        // ... and one stamped "now" but not seen to change for 50 s has expired.
        assert!(r(Some(Some(fresh.clone())), Some(&renewed), old));
        // A new holder, an appearance, a removal, the first seen.
        assert!(r(Some(Some(fresh.clone())), Some(&moved), recent));
        assert!(r(Some(None), Some(&renewed), None));
        assert!(r(Some(Some(fresh)), None, recent));
        assert!(r(None, Some(&stale), None));
        assert!(!r(Some(None), None, None));
        // The same expired Lease seen again (a relist): nothing.
        assert!(!r(Some(Some(stale.clone())), Some(&stale), old));
    }

    #[test]
    fn a_lease_is_observed_renewed_when_its_spec_changes_on_our_clock() {
        let t = |s: &str| -> Timestamp { s.parse().unwrap() };
        let mut seen = Observations::default();
        // First sight: its renewTime if earlier than now (the Lease of a dead operator stays
        // stale across our restarts)...
        let a = lease("n0", "2020-01-01T00:00:00.000000Z");
        assert_eq!(
            seen.see(Some(&a), t("2026-01-01T00:00:00Z")),
            Some(t("2020-01-01T00:00:00Z"))
        );
        // Seen again unchanged: still that.
        assert_eq!(
            seen.see(Some(&a), t("2026-01-01T00:00:30Z")),
            Some(t("2020-01-01T00:00:00Z"))
        );
        // ... and now if its renewTime is ahead of our clock.
        let mut ahead = Observations::default();
        let future = lease("n0", "2030-01-01T00:00:00.000000Z");
        assert_eq!(
            ahead.see(Some(&future), t("2026-01-01T00:00:00Z")),
            Some(t("2026-01-01T00:00:00Z"))
        );
        // Renewed (even to a renewTime in the future by skew): now.
        let b = lease("n0", "2030-01-01T00:00:00.000000Z");
        assert_eq!(
            seen.see(Some(&b), t("2026-01-01T00:00:35Z")),
            Some(t("2026-01-01T00:00:35Z"))
        );
        assert_eq!(seen.observed(), Some(t("2026-01-01T00:00:35Z")));
        // Gone, then back: first sight again (renewTime ahead of us: now).
        assert_eq!(seen.see(None, t("2026-01-01T00:00:40Z")), None);
        assert_eq!(
            seen.see(Some(&b), t("2026-01-01T00:00:45Z")),
            Some(t("2026-01-01T00:00:45Z"))
        );
    }
}
