//! Whether the API server behind a signed identity is the peer's, from what reading our tenant
//! namespace there (through the identity) showed: its `discovery.liqo.io/host-cluster-id`
//! must be the peer's ID. Another ID refuses the identity; a namespace that does not say (a
//! provider that does not annotate it, such as upstream Liqo, or whose basic role does not let
//! us read it) is accepted unchecked, saying so; a failed read is asked again, and never
//! withdraws a peering that was checked before.

use std::time::Duration;

use crate::{
    api::ClusterId,
    conditions::{Authentication, Condition, NewCondition},
    identity::check,
};

/// What reading the tenant namespace showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Its host-cluster-id annotation.
    Host(String),
    /// Read, without the annotation.
    Unannotated,
    /// The identity may not read it (403): a provider whose basic role predates the check.
    Forbidden,
    /// It could not be read (why).
    Failed(String),
}

/// The check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// `AuthenticationStatus`.
    pub condition: NewCondition,
    /// Whether the identity may be used (its tenant namespace known).
    pub usable: bool,
    /// Whether to record the check on the identity Secret (it is not made again).
    pub record: bool,
    /// Check again after this long.
    pub recheck: Option<Duration>,
}

/// What the check of the API server `server` (tenant namespace `namespace`) for `peer` decides
/// from `seen`; `checked_before`: the status already held this namespace (a checked peering);
/// `retry`: how soon a failed read is made again, `resync` for the unchecked ones.
pub fn decide(
    server: &str,
    namespace: &str,
    peer: &ClusterId,
    seen: &Seen,
    checked_before: bool,
    (retry, resync): (Duration, Duration),
) -> Checked {
    let accepted = |message: Option<String>, record, recheck| Checked {
        condition: match message {
            Some(m) => Condition::Authentication(Authentication::Accepted).with_message(m),
            None => Condition::Authentication(Authentication::Accepted).into(),
        },
        usable: true,
        record,
        recheck,
    };
    match seen {
        Seen::Host(host) => match check::api_server(server, namespace, peer, host) {
            Ok(()) => accepted(None, true, None),
            Err(wrong) => Checked {
                condition: Condition::Authentication(Authentication::WrongCluster).with_message(
                    format!(
                        "{wrong}: our identity is not used. If the provider gave a wrong API \
                         server address, fix it there, then remove the identity it issued to us \
                         (its Secret liqo-remote-certificate in {namespace}) and ours here to ask \
                         again"
                    ),
                ),
                usable: false,
                record: false,
                recheck: Some(resync),
            },
        },
        Seen::Unannotated | Seen::Forbidden => {
            let why = if *seen == Seen::Forbidden {
                format!("our identity may not read its tenant namespace {namespace}")
            } else {
                format!("its tenant namespace {namespace} does not say which cluster it is")
            };
            accepted(
                Some(format!(
                    "The remote cluster accepted our identity; its API server at {server} is not \
                     checked to be cluster {peer}: {why} (a provider without the check, e.g. \
                     upstream Liqo)"
                )),
                false,
                Some(resync),
            )
        }
        Seen::Failed(why) if checked_before => accepted(
            Some(format!(
                "The remote cluster accepted our identity (its API server at {server} cannot \
                 be read now: {why})"
            )),
            false,
            Some(retry),
        ),
        Seen::Failed(why) => Checked {
            condition: Condition::Authentication(Authentication::Pending).with_message(format!(
                "our identity is signed; checking that the API server at {server} is cluster \
                 {peer}: {why}"
            )),
            usable: false,
            record: false,
            recheck: Some(retry),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROME: &str = "3f1e7f52-6b8a-4d4c-9a0f-1c2d3e4f5a6b";
    const MILAN: &str = "b07938e3-d241-460c-a77b-e286c0f733c7";
    const T: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(30));

    fn d(seen: Seen, before: bool) -> Checked {
        decide(
            "https://m:6443",
            "liqo-tenant-rome-1",
            &MILAN.parse().unwrap(),
            &seen,
            before,
            T,
        )
    }

    #[test]
    fn the_peers_id_is_accepted_and_recorded_another_refused() {
        let ok = d(Seen::Host(MILAN.into()), false);
        assert!(ok.usable && ok.record && ok.recheck.is_none());
        assert_eq!(
            ok.condition.condition,
            Condition::Authentication(Authentication::Accepted)
        );
        for before in [false, true] {
            let wrong = d(Seen::Host(ROME.into()), before);
            assert!(
                !wrong.usable && !wrong.record,
                "another cluster, checked before or not"
            );
            assert_eq!(
                wrong.condition.condition,
                Condition::Authentication(Authentication::WrongCluster)
            );
            assert!(
                wrong
                    .condition
                    .message
                    .contains(&format!("answers for cluster {ROME}, not {MILAN}"))
                    && wrong.condition.message.contains("liqo-remote-certificate"),
                "{}",
                wrong.condition.message
            );
        }
    }

    #[test]
    fn a_provider_that_does_not_say_is_accepted_unchecked_and_saying_so() {
        for seen in [Seen::Unannotated, Seen::Forbidden] {
            let c = d(seen.clone(), false);
            assert!(c.usable && !c.record, "{seen:?}");
            assert_eq!(c.recheck, Some(T.1));
            assert!(
                c.condition.message.contains("is not checked"),
                "{}",
                c.condition.message
            );
        }
    }

    #[test]
    fn a_failed_read_waits_but_keeps_a_checked_peering() {
        let new = d(Seen::Failed("timeout".into()), false);
        assert!(!new.usable);
        assert_eq!(
            new.condition.condition,
            Condition::Authentication(Authentication::Pending)
        );
        assert_eq!(new.recheck, Some(T.0));
        let kept = d(Seen::Failed("timeout".into()), true);
        assert!(kept.usable && !kept.record);
        assert_eq!(
            kept.condition.condition,
            Condition::Authentication(Authentication::Accepted)
        );
        assert!(kept.condition.message.contains("timeout"));
    }
}
