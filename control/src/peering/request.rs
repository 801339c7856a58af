//! The ResourceRequest controller's decisions on a provider (§1.2 step 6, §1.4, §1.7 steps 3
//! and 6), for a copy of a consumer's request: the incoming ForeignCluster, the request's
//! phase, and the ResourceOffer made, refreshed or withdrawn.

use std::collections::BTreeMap;

use crate::{
    api::{
        ClusterId,
        discovery::PeeringEnabled,
        sharing::{StorageType, VirtualKubeletStatus},
    },
    offer::{self, Percent},
    quantity::InvalidQuantity,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Why a replicated copy (request or offer) is not trusted: the peer that wrote it is the one
/// whose tenant namespace holds it, and it may not speak for another cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Untrusted {
    /// The namespace is not one of our tenant namespaces (no
    /// `discovery.liqo.io/tenant-namespace=true` or no `discovery.liqo.io/cluster-id`).
    NotTenantNamespace,
    /// The copy's `liqo.io/originID` label is missing or names another cluster than the
    /// tenant namespace's.
    Origin {
        /// The tenant namespace's cluster ID.
        tenant: String,
        /// The `liqo.io/originID` label, if any.
        origin: Option<String>,
    },
    /// The spec names another cluster than the tenant namespace's.
    Claimed {
        /// The tenant namespace's cluster ID.
        tenant: String,
        /// The cluster ID the spec names.
        claimed: String,
    },
}

/// Whether a replicated copy may be acted upon: its namespace is a tenant namespace (labels
/// `namespace_labels`, `None` when the namespace is gone), and that namespace's
/// `discovery.liqo.io/cluster-id`, the copy's `liqo.io/originID` and the cluster ID its spec
/// names (`claimed`) are one and the same.
pub fn origin(
    namespace_labels: Option<&BTreeMap<String, String>>,
    origin_label: Option<&str>,
    claimed: &ClusterId,
) -> Result<(), Untrusted> {
    use crate::consts::{labels, values};
    let labels = namespace_labels.ok_or(Untrusted::NotTenantNamespace)?;
    if labels.get(labels::TENANT_NAMESPACE).map(String::as_str) != Some(values::TRUE) {
        return Err(Untrusted::NotTenantNamespace);
    }
    let tenant = labels
        .get(labels::CLUSTER_ID)
        .filter(|t| !t.is_empty())
        .ok_or(Untrusted::NotTenantNamespace)?;
    if origin_label != Some(tenant.as_str()) {
        return Err(Untrusted::Origin {
            tenant: tenant.clone(),
            origin: origin_label.map(str::to_string),
        });
    }
    if claimed.as_str() != tenant {
        return Err(Untrusted::Claimed {
            tenant: tenant.clone(),
            claimed: claimed.to_string(),
        });
    }
    Ok(())
}

/// What the provider does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestPhase {
    /// Offer resources.
    Allow,
    /// Incoming peering refused: no offer.
    Deny,
    /// The request is deleted or withdrawn: withdraw the offer.
    Deleting,
}

/// The phase: `Deleting` when the request goes away; else `Allow` when incoming peering is
/// `Yes` (or `Auto` with `--enable-incoming-peering`), `Deny` otherwise.
pub fn phase(
    deleting_or_withdrawn: bool,
    incoming: PeeringEnabled,
    enable_incoming: bool,
) -> RequestPhase {
    if deleting_or_withdrawn {
        return RequestPhase::Deleting;
    }
    match incoming {
        PeeringEnabled::Yes => RequestPhase::Allow,
        PeeringEnabled::No => RequestPhase::Deny,
        PeeringEnabled::Auto if enable_incoming => RequestPhase::Allow,
        PeeringEnabled::Auto => RequestPhase::Deny,
    }
}

/// Our ResourceOffer for the consumer, as published.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PublishedOffer {
    /// `spec.resourceQuota.hard`.
    pub quota: BTreeMap<String, Quantity>,
    /// `spec.storageClasses`.
    pub storage_classes: Vec<StorageType>,
    /// `spec.labels` (our `--cluster-labels` when published).
    pub labels: BTreeMap<String, String>,
    /// `spec.withdrawalTimestamp` is set.
    pub withdrawing: bool,
    /// `status.virtualKubeletStatus` (from the consumer).
    pub virtual_kubelet: VirtualKubeletStatus,
}

/// What the controller observes for one request copy.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// The request's phase.
    pub phase: RequestPhase,
    /// Our offer, if any.
    pub offer: Option<PublishedOffer>,
    /// The offer computed now from our nodes and pods.
    pub computed: BTreeMap<String, Quantity>,
    /// Our storage classes now ([`storage_classes`]).
    pub storage_classes: Vec<StorageType>,
    /// Our `--cluster-labels` now (the offer's `spec.labels`).
    pub labels: BTreeMap<String, String>,
    /// Upstream's update threshold.
    pub threshold: Percent,
    /// `status.offerWithdrawalTimestamp` is set on the request.
    pub offer_withdrawn: bool,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create or update the offer with this quota (no withdrawal timestamp).
    ApplyOffer(BTreeMap<String, Quantity>),
    /// Stamp `spec.withdrawalTimestamp` on the offer (its virtual kubelet must stop first).
    WithdrawOffer,
    /// Delete the offer.
    DeleteOffer,
    /// Write the request's status: `offerState` Created (true) or None, and whether
    /// `offerWithdrawalTimestamp` is set (kept when already set).
    RequestStatus {
        /// `offerState=Created`.
        created: bool,
        /// `offerWithdrawalTimestamp` set.
        withdrawn: bool,
    },
}

/// The storage classes an offer lists: every local class (name, whether it is annotated as
/// the default) but the virtual class `liqo` (a consumer's claim is never provisioned through
/// a second hop), by name; the default is the configured class when given and present, else
/// the annotated one(s).
pub fn storage_classes(classes: &[(String, bool)], configured: Option<&str>) -> Vec<StorageType> {
    let virtual_class = crate::consts::storage::CLASS;
    let configured =
        configured.filter(|c| *c != virtual_class && classes.iter().any(|(n, _)| n == c));
    let mut out: Vec<StorageType> = classes
        .iter()
        .filter(|(name, _)| name != virtual_class)
        .map(|(name, annotated)| StorageType {
            storage_class_name: name.clone(),
            default: match configured {
                Some(c) => c == name,
                None => *annotated,
            },
        })
        .collect();
    out.sort_by(|a, b| a.storage_class_name.cmp(&b.storage_class_name));
    out
}

/// The decisions for one request.
pub fn decide(o: &Observed) -> Result<Vec<Action>, InvalidQuantity> {
    let mut actions = Vec::new();
    match o.phase {
        RequestPhase::Allow => {
            let quota = match &o.offer {
                Some(old) if !offer::changed_beyond(&old.quota, &o.computed, o.threshold)? => {
                    old.quota.clone()
                }
                _ => o.computed.clone(),
            };
            let unchanged = o.offer.as_ref().is_some_and(|old| {
                old.quota == quota
                    && old.storage_classes == o.storage_classes
                    && old.labels == o.labels
                    && !old.withdrawing
            });
            if !unchanged {
                actions.push(Action::ApplyOffer(quota));
            }
            actions.push(Action::RequestStatus {
                created: true,
                withdrawn: false,
            });
        }
        RequestPhase::Deny | RequestPhase::Deleting => {
            let withdrawn = o.phase == RequestPhase::Deleting;
            match &o.offer {
                None => actions.push(Action::RequestStatus {
                    created: false,
                    withdrawn: withdrawn || o.offer_withdrawn,
                }),
                Some(offer) if offer.virtual_kubelet == VirtualKubeletStatus::None => {
                    actions.push(Action::DeleteOffer);
                    actions.push(Action::RequestStatus {
                        created: false,
                        withdrawn: withdrawn || o.offer_withdrawn,
                    });
                }
                Some(offer) => {
                    if !offer.withdrawing {
                        actions.push(Action::WithdrawOffer);
                    }
                }
            }
        }
    }
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    fn observed(phase: RequestPhase, offer: Option<PublishedOffer>) -> Observed {
        Observed {
            phase,
            offer,
            computed: q(&[("cpu", "1200m"), ("memory", "600M")]),
            storage_classes: Vec::new(),
            labels: BTreeMap::new(),
            threshold: offer::DEFAULT_UPDATE_THRESHOLD,
            offer_withdrawn: false,
        }
    }

    fn ns(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The peer whose tenant namespace holds a copy is the only cluster it may speak for.
    #[test]
    fn origin_table() {
        use crate::consts::{labels, values};
        let milan = "5c6a3e4f-1111-4c2d-9a9b-000000000001"
            .parse::<ClusterId>()
            .unwrap();
        let third = "5c6a3e4f-3333-4c2d-9a9b-000000000003"
            .parse::<ClusterId>()
            .unwrap();
        let tenant = ns(&[
            (labels::TENANT_NAMESPACE, values::TRUE),
            (labels::CLUSTER_ID, milan.as_str()),
        ]);
        let m = Some(milan.as_str());
        assert_eq!(origin(Some(&tenant), m, &milan), Ok(()));
        // The spec names a third cluster: refused.
        assert_eq!(
            origin(Some(&tenant), m, &third),
            Err(Untrusted::Claimed {
                tenant: milan.to_string(),
                claimed: third.to_string()
            })
        );
        // originID names a third cluster, or is missing: refused, even if the spec agrees.
        assert!(matches!(
            origin(Some(&tenant), Some(third.as_str()), &third),
            Err(Untrusted::Origin { .. })
        ));
        assert_eq!(
            origin(Some(&tenant), None, &milan),
            Err(Untrusted::Origin {
                tenant: milan.to_string(),
                origin: None
            })
        );
        // Not a tenant namespace: no tenant label, tenant label false, no cluster ID, gone.
        let plain = ns(&[(labels::CLUSTER_ID, milan.as_str())]);
        assert_eq!(
            origin(Some(&plain), m, &milan),
            Err(Untrusted::NotTenantNamespace)
        );
        let off = ns(&[
            (labels::TENANT_NAMESPACE, values::FALSE),
            (labels::CLUSTER_ID, milan.as_str()),
        ]);
        assert_eq!(
            origin(Some(&off), m, &milan),
            Err(Untrusted::NotTenantNamespace)
        );
        let no_id = ns(&[(labels::TENANT_NAMESPACE, values::TRUE)]);
        assert_eq!(
            origin(Some(&no_id), m, &milan),
            Err(Untrusted::NotTenantNamespace)
        );
        assert_eq!(origin(None, m, &milan), Err(Untrusted::NotTenantNamespace));
    }

    #[test]
    fn phase_table() {
        use PeeringEnabled::*;
        assert_eq!(phase(false, Yes, false), RequestPhase::Allow);
        assert_eq!(phase(false, Auto, true), RequestPhase::Allow);
        assert_eq!(phase(false, Auto, false), RequestPhase::Deny);
        assert_eq!(phase(false, No, true), RequestPhase::Deny);
        assert_eq!(phase(true, Yes, true), RequestPhase::Deleting);
    }

    #[test]
    fn allow_creates_then_refreshes_beyond_the_threshold_only() {
        let a = decide(&observed(RequestPhase::Allow, None)).unwrap();
        assert_eq!(
            a[0],
            Action::ApplyOffer(q(&[("cpu", "1200m"), ("memory", "600M")]))
        );
        assert_eq!(
            a[1],
            Action::RequestStatus {
                created: true,
                withdrawn: false
            }
        );
        // 4 % move: kept.
        let near = PublishedOffer {
            quota: q(&[("cpu", "1250m"), ("memory", "600M")]),
            ..Default::default()
        };
        let a = decide(&observed(RequestPhase::Allow, Some(near))).unwrap();
        assert_eq!(
            a,
            vec![Action::RequestStatus {
                created: true,
                withdrawn: false
            }]
        );
        // 50 % move: refreshed.
        let far = PublishedOffer {
            quota: q(&[("cpu", "800m"), ("memory", "600M")]),
            ..Default::default()
        };
        let a = decide(&observed(RequestPhase::Allow, Some(far))).unwrap();
        assert_eq!(
            a[0],
            Action::ApplyOffer(q(&[("cpu", "1200m"), ("memory", "600M")]))
        );
    }

    #[test]
    fn allow_again_clears_a_withdrawal() {
        let offer = PublishedOffer {
            quota: q(&[("cpu", "1200m"), ("memory", "600M")]),
            withdrawing: true,
            virtual_kubelet: VirtualKubeletStatus::Created,
            ..Default::default()
        };
        let a = decide(&observed(RequestPhase::Allow, Some(offer.clone()))).unwrap();
        assert_eq!(a[0], Action::ApplyOffer(offer.quota));
    }

    /// `--cluster-labels` are the offer's `spec.labels`: a change re-applies the offer even
    /// when the quota stays within the threshold; equal labels change nothing.
    #[test]
    fn cluster_labels_changes_reapply_the_offer() {
        let quota = q(&[("cpu", "1200m"), ("memory", "600M")]);
        let published = PublishedOffer {
            quota: quota.clone(),
            labels: ns(&[("topology.liqo.io/region", "center")]),
            ..Default::default()
        };
        let mut o = observed(RequestPhase::Allow, Some(published.clone()));
        o.labels = ns(&[("topology.liqo.io/region", "south")]);
        let a = decide(&o).unwrap();
        assert_eq!(a[0], Action::ApplyOffer(quota.clone()));
        o.labels = published.labels.clone();
        let a = decide(&o).unwrap();
        assert!(
            !a.iter().any(|x| matches!(x, Action::ApplyOffer(_))),
            "{a:?}"
        );
        o.labels = BTreeMap::new();
        let a = decide(&o).unwrap();
        assert_eq!(a[0], Action::ApplyOffer(quota));
    }

    /// §1.7 steps 3 and 6 from the provider's request controller.
    #[test]
    fn withdrawal_order() {
        let running = PublishedOffer {
            quota: q(&[("cpu", "1200m")]),
            withdrawing: false,
            virtual_kubelet: VirtualKubeletStatus::Created,
            ..Default::default()
        };
        // 3. the VK runs: stamp the offer's withdrawal, nothing else yet.
        let a = decide(&observed(RequestPhase::Deleting, Some(running.clone()))).unwrap();
        assert_eq!(a, vec![Action::WithdrawOffer]);
        let stamped = PublishedOffer {
            withdrawing: true,
            ..running.clone()
        };
        assert!(
            decide(&observed(RequestPhase::Deleting, Some(stamped.clone())))
                .unwrap()
                .is_empty()
        );
        // 6. the consumer stopped its VK: delete the offer, stamp offerWithdrawalTimestamp.
        let stopped = PublishedOffer {
            virtual_kubelet: VirtualKubeletStatus::None,
            ..stamped
        };
        let a = decide(&observed(RequestPhase::Deleting, Some(stopped))).unwrap();
        assert_eq!(
            a,
            vec![
                Action::DeleteOffer,
                Action::RequestStatus {
                    created: false,
                    withdrawn: true
                }
            ]
        );
        let a = decide(&observed(RequestPhase::Deleting, None)).unwrap();
        assert_eq!(
            a,
            vec![Action::RequestStatus {
                created: false,
                withdrawn: true
            }]
        );
    }

    #[test]
    fn storage_classes_and_their_default() {
        let classes = [
            ("standard".to_string(), true),
            ("fast".to_string(), false),
            ("liqo".to_string(), false),
        ];
        let st = |n: &str, d: bool| StorageType {
            storage_class_name: n.into(),
            default: d,
        };
        // The virtual class is never offered.
        assert_eq!(
            storage_classes(&classes, None),
            vec![st("fast", false), st("standard", true)]
        );
        assert_eq!(
            storage_classes(&classes, Some("liqo")),
            vec![st("fast", false), st("standard", true)]
        );
        assert_eq!(
            storage_classes(&classes, Some("fast")),
            vec![st("fast", true), st("standard", false)]
        );
        // A configured class that does not exist: the annotation decides.
        assert_eq!(
            storage_classes(&classes, Some("gone")),
            vec![st("fast", false), st("standard", true)]
        );
        // A new class republishes an offer whose quota did not move.
        let published = PublishedOffer {
            quota: q(&[("cpu", "1200m"), ("memory", "600M")]),
            ..Default::default()
        };
        let mut o = observed(RequestPhase::Allow, Some(published.clone()));
        o.storage_classes = storage_classes(&classes, None);
        let a = decide(&o).unwrap();
        assert_eq!(a[0], Action::ApplyOffer(published.quota));
    }

    #[test]
    fn deny_offers_nothing() {
        let a = decide(&observed(RequestPhase::Deny, None)).unwrap();
        assert_eq!(
            a,
            vec![Action::RequestStatus {
                created: false,
                withdrawn: false
            }]
        );
    }
}
