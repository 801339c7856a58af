//! The ResourceOffer controller's decisions on a consumer (§1.2 step 8, §1.7 step 5), for a
//! copy of a provider's offer: accept it, run its virtual kubelet while it stands, stop it
//! once the offer is withdrawn.

use crate::api::sharing::{OfferPhase, VirtualKubeletStatus};

/// An offer copy is trusted like a request copy: its tenant namespace's cluster ID, its
/// `liqo.io/originID` and its `spec.clusterId` agree.
pub use super::request::{Untrusted, origin};

/// What the controller observes for one offer copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// `status.phase`.
    pub phase: OfferPhase,
    /// `status.virtualKubeletStatus`.
    pub virtual_kubelet: VirtualKubeletStatus,
    /// Carries `liqo.io/virtualkubelet`.
    pub has_finalizer: bool,
    /// Withdrawn (`spec.withdrawalTimestamp`) or being deleted.
    pub withdrawn: bool,
}

/// One thing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Add `liqo.io/virtualkubelet`.
    AddFinalizer,
    /// Start the virtual kubelet (idempotent).
    Start,
    /// Stop the virtual kubelet (idempotent).
    Stop,
    /// Remove `liqo.io/virtualkubelet`.
    RemoveFinalizer,
    /// Write the status.
    Status(OfferPhase, VirtualKubeletStatus),
}

/// The decisions for one offer: accept a pending offer (auto-accept), keep its virtual
/// kubelet started and recorded as `Created`; once withdrawn, stop it, drop the finalizer and
/// record `None`.
pub fn decide(o: &Observed) -> Vec<Action> {
    let mut actions = Vec::new();
    if o.withdrawn {
        if o.has_finalizer || o.virtual_kubelet != VirtualKubeletStatus::None {
            actions.push(Action::Stop);
        }
        if o.has_finalizer {
            actions.push(Action::RemoveFinalizer);
        }
        if o.virtual_kubelet != VirtualKubeletStatus::None {
            actions.push(Action::Status(o.phase, VirtualKubeletStatus::None));
        }
        return actions;
    }
    let phase = match o.phase {
        OfferPhase::Pending => OfferPhase::Accepted,
        other => other,
    };
    if phase != OfferPhase::Accepted {
        return actions;
    }
    if !o.has_finalizer {
        actions.push(Action::AddFinalizer);
    }
    actions.push(Action::Start);
    if o.phase != phase || o.virtual_kubelet != VirtualKubeletStatus::Created {
        actions.push(Action::Status(phase, VirtualKubeletStatus::Created));
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use OfferPhase as P;
    use VirtualKubeletStatus as V;

    fn o(phase: P, vk: V, has_finalizer: bool, withdrawn: bool) -> Observed {
        Observed {
            phase,
            virtual_kubelet: vk,
            has_finalizer,
            withdrawn,
        }
    }

    /// A provider may only offer as itself, from its own tenant namespace.
    #[test]
    fn an_offer_naming_another_provider_is_untrusted() {
        use crate::{
            api::ClusterId,
            consts::{labels, values},
        };
        use std::collections::BTreeMap;
        let rome: ClusterId = "7a1b2c3d-0000-4e5f-8a9b-00000000000a".parse().unwrap();
        let other: ClusterId = "7a1b2c3d-0000-4e5f-8a9b-00000000000b".parse().unwrap();
        let tenant: BTreeMap<String, String> = [
            (labels::TENANT_NAMESPACE, values::TRUE),
            (labels::CLUSTER_ID, rome.as_str()),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(origin(Some(&tenant), Some(rome.as_str()), &rome), Ok(()));
        assert!(matches!(
            origin(Some(&tenant), Some(rome.as_str()), &other),
            Err(Untrusted::Claimed { .. })
        ));
        assert!(matches!(
            origin(Some(&tenant), Some(other.as_str()), &other),
            Err(Untrusted::Origin { .. })
        ));
        assert_eq!(
            origin(None, Some(rome.as_str()), &rome),
            Err(Untrusted::NotTenantNamespace)
        );
    }

    #[test]
    fn a_pending_offer_is_accepted_and_its_kubelet_started() {
        assert_eq!(
            decide(&o(P::Pending, V::None, false, false)),
            vec![
                Action::AddFinalizer,
                Action::Start,
                Action::Status(P::Accepted, V::Created)
            ]
        );
        // Steady state: start stays (idempotent), nothing written.
        assert_eq!(
            decide(&o(P::Accepted, V::Created, true, false)),
            vec![Action::Start]
        );
    }

    #[test]
    fn a_refused_or_manual_offer_starts_nothing() {
        assert!(decide(&o(P::Refused, V::None, false, false)).is_empty());
        assert!(decide(&o(P::ManualActionRequired, V::None, false, false)).is_empty());
    }

    #[test]
    fn withdrawal_stops_then_releases() {
        assert_eq!(
            decide(&o(P::Accepted, V::Created, true, true)),
            vec![
                Action::Stop,
                Action::RemoveFinalizer,
                Action::Status(P::Accepted, V::None)
            ]
        );
        assert!(decide(&o(P::Accepted, V::None, false, true)).is_empty());
    }
}
