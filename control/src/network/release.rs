//! When an operator lets a deleted TunnelEndpoint go without its daemon's word, pure (time is
//! an input): a finalizer waits for the gateway (or a node's agent) to run a file without the
//! peer, but a daemon that cannot be read, or refuses its file, for longer than a grace since
//! the deletion must not hang the deletion forever (the network manager, and the peer's, wait
//! on it): the hold is released anyway and the operator says so in a Warning Event. Likewise
//! the route holds of a node NotReady for longer than the grace are forgotten (its operator
//! will not release them).

use std::time::Duration;

use k8s_openapi::{api::core::v1::Node, jiff::Timestamp};

use super::tunnel::Tep;

/// What to do with an operator's hold on a TunnelEndpoint being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// The daemon dropped the peer: release.
    Now,
    /// Not yet: wait for the daemon.
    Wait,
    /// The daemon did not confirm within the grace: release anyway, saying why.
    Forced(String),
}

/// How long ago `t` was, zero if in the future.
fn since(t: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(t)).unwrap_or_default()
}

/// The hold on `tep` (being deleted) when the daemon has not confirmed: `why` the daemon has not
/// (`None`: it is only slow, e.g. it has not reloaded yet). Released with [`Release::Forced`]
/// once the daemon has been unreadable or refusing for longer than `grace` since the deletion.
pub fn unconfirmed(tep: &Tep, why: Option<&str>, now: Timestamp, grace: Duration) -> Release {
    let (Some(why), Some(deleted)) = (why, tep.deleted_at) else {
        return Release::Wait;
    };
    let waited = since(deleted, now);
    if waited > grace {
        Release::Forced(format!(
            "{}: deleted {}s ago and {why}; released without the daemon's confirmation (grace {}s)",
            tep.key(),
            waited.as_secs(),
            grace.as_secs()
        ))
    } else {
        Release::Wait
    }
}

/// The nodes whose route holds stand: every Node but those whose `Ready` condition has not been
/// `True` for longer than `grace` (a node without conditions stands).
pub fn standing_nodes(nodes: &[Node], now: Timestamp, grace: Duration) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| {
            let ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .find(|c| c.type_ == "Ready");
            match ready {
                Some(c) if c.status != "True" => c
                    .last_transition_time
                    .as_ref()
                    .is_none_or(|t| since(t.0, now) <= grace),
                _ => true,
            }
        })
        .filter_map(|n| n.metadata.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::{
        fixtures::{spec, tep},
        tunnel::read,
    };

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_deleted_tunnelendpoint_is_forced_out_only_after_the_grace_and_only_when_the_daemon_fails()
    {
        let grace = Duration::from_secs(300);
        let mut obj = tep("liqo-tenant-milan", "milan", spec("milan", 71));
        let live = read(&obj);
        let now = at("2026-01-01T00:10:00Z");
        assert_eq!(unconfirmed(&live, Some("down"), now, grace), Release::Wait);
        obj.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at("2026-01-01T00:00:00Z")),
        );
        let t = read(&obj);
        assert!(t.deleting);
        match unconfirmed(&t, Some("the gateway's status: refused"), now, grace) {
            Release::Forced(m) => {
                assert!(m.contains("liqo-tenant-milan/milan"), "{m}");
                assert!(m.contains("600s ago"), "{m}");
                assert!(m.contains("the gateway's status: refused"), "{m}");
            }
            r => panic!("{r:?}"),
        }
        assert_eq!(
            unconfirmed(&t, None, now, grace),
            Release::Wait,
            "only slow"
        );
        let early = at("2026-01-01T00:04:00Z");
        assert_eq!(unconfirmed(&t, Some("down"), early, grace), Release::Wait);
    }

    fn node(name: &str, ready: Option<(&str, &str)>) -> Node {
        let conditions: Vec<serde_json::Value> = ready
            .into_iter()
            .map(
                |(s, t)| serde_json::json!({"type": "Ready", "status": s, "lastTransitionTime": t}),
            )
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn nodes_not_ready_for_longer_than_the_grace_lose_their_standing() {
        let now = at("2026-01-01T01:00:00Z");
        let nodes = [
            node("ready", Some(("True", "2026-01-01T00:00:00Z"))),
            node("long-gone", Some(("Unknown", "2026-01-01T00:00:00Z"))),
            node("long-false", Some(("False", "2026-01-01T00:50:00Z"))),
            node("just-now", Some(("False", "2026-01-01T00:58:00Z"))),
            node("no-conditions", None),
        ];
        let standing = standing_nodes(&nodes, now, Duration::from_secs(300));
        assert_eq!(standing, ["ready", "just-now", "no-conditions"]);
    }
}
