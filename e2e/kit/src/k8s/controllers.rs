//! Which of the kube-controller-manager's controllers the test clusters run (see
//! `e2e/k8s/README.md`, "What the test clusters leave out").

/// The kube-controller-manager's controllers not started: what neither Liqo nor its tests use
/// (workload kinds other than Deployments, ReplicaSets, DaemonSets (the chart's route
/// agents) and Jobs (`liqoctl move volume`'s copy), volume attachment and expansion (the PV binder and the PV and PVC protections stay:
/// the storage fabric binds claims), autoscaling, dynamic resources, cloud providers). Each one costs informers, lists at start and CPU on a 2-core
/// machine that runs many clusters. `LIQO_K8S_ALL_CONTROLLERS=1` starts all of them.
const CONTROLLERS_OFF: &[&str] = &[
    "cloud-node-lifecycle-controller",
    "cronjob-controller",
    "device-taint-eviction-controller",
    "ephemeral-volume-controller",
    "horizontal-pod-autoscaler-controller",
    "kube-apiserver-serving-clustertrustbundle-publisher-controller",
    "legacy-serviceaccount-token-cleaner-controller",
    "node-route-controller",
    "persistentvolume-attach-detach-controller",
    "persistentvolume-expander-controller",
    "podcertificaterequest-cleaner-controller",
    "podgroup-protection-controller",
    "replicationcontroller-controller",
    "resourceclaim-controller",
    "resourcepoolstatusrequest-controller",
    "service-lb-controller",
    "statefulset-controller",
    "storage-version-migrator-controller",
    "storageversion-garbage-collector-controller",
    "ttl-after-finished-controller",
    "ttl-controller",
    "validatingadmissionpolicy-status-controller",
    "volumeattributesclass-protection-controller",
];

/// The value of `--controllers`: every default one but [`CONTROLLERS_OFF`].
pub(crate) fn flag() -> String {
    if std::env::var_os("LIQO_K8S_ALL_CONTROLLERS").is_some_and(|v| v == "1") {
        return "*".into();
    }
    std::iter::once("*".to_owned())
        .chain(CONTROLLERS_OFF.iter().map(|c| format!("-{c}")))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_controller_but_the_unused_ones() {
        let f = flag();
        assert!(f.starts_with("*,-"), "{f}");
        assert!(f.contains("-statefulset-controller"), "{f}");
        // What Liqo and its tests need stays on.
        let off: Vec<&str> = f.split(',').filter_map(|c| c.strip_prefix('-')).collect();
        for needed in [
            "disruption-controller",
            "namespace-controller",
            "job-controller",
            "garbage-collector-controller",
            "certificatesigningrequest-signing-controller",
            "node-lifecycle-controller",
            "persistentvolume-binder-controller",
            "persistentvolume-protection-controller",
            "persistentvolumeclaim-protection-controller",
        ] {
            assert!(!off.contains(&needed), "{needed} is off: {f}");
        }
    }
}
