//! Bad values are refused by `helm template` (a non-zero exit, nothing rendered), with an error
//! naming the bad value's key: the schema's (a JSON pointer) or the templates' (a dotted path).

use crate::helm;

/// `helm template` of the defaults case with `sets` (`--set` each) fails, its stderr holding
/// every one of `said`.
fn refused(sets: &[&str], said: &[&str]) {
    let mut extra = Vec::new();
    for s in sets {
        extra.extend(["--set", s]);
    }
    let run = helm::template(&helm::case("defaults"), &extra);
    assert!(!run.ok, "{} was accepted", run.line);
    assert!(
        !run.stdout.contains("kind: Deployment"),
        "{} rendered objects",
        run.line
    );
    for s in said {
        assert!(
            run.stderr.contains(s),
            "{}: the error does not say {s:?}:\n{}",
            run.line,
            run.stderr
        );
    }
}

#[test]
fn a_bad_cidr_is_refused_naming_its_key() {
    refused(
        &["networkManager.config.podCIDR=10.0.0.0/33"],
        &["/networkManager/config/podCIDR", "10.0.0.0/33"],
    );
    refused(
        &["networkManager.config.reservedSubnets={10.1.0.0/16,300.0.0.0/8}"],
        &["/networkManager/config/reservedSubnets/1", "300.0.0.0/8"],
    );
    refused(
        &["networkManager.config.podCIDR=10.244.0.1/16"],
        &[
            "networkManager.config.podCIDR 10.244.0.1/16 has host bits set (the network is 10.244.0.0/16)",
        ],
    );
}

#[test]
fn a_reserved_subnet_overlapping_the_pod_cidr_is_refused_naming_both() {
    refused(
        &["networkManager.config.reservedSubnets={192.168.1.0/24,10.244.8.0/24}"],
        &[
            "networkManager.config.reservedSubnets[1] 10.244.8.0/24 overlaps networkManager.config.podCIDR 10.244.0.0/16",
        ],
    );
}

#[test]
fn two_overlapping_reserved_subnets_are_refused_naming_both() {
    refused(
        &["networkManager.config.reservedSubnets={192.168.0.0/24,192.168.0.0/16}"],
        &[
            "networkManager.config.reservedSubnets[1] 192.168.0.0/16 overlaps networkManager.config.reservedSubnets[0] 192.168.0.0/24",
        ],
    );
}

#[test]
fn other_overlaps_are_refused_naming_both() {
    refused(
        &["networkManager.config.serviceCIDR=10.240.0.0/12"],
        &[
            "networkManager.config.serviceCIDR 10.240.0.0/12 overlaps networkManager.config.podCIDR 10.244.0.0/16",
        ],
    );
    refused(
        &[
            "networkManager.config.serviceCIDR=10.96.0.0/12",
            "ipam.externalCIDR=10.100.0.0/16",
        ],
        &[
            "ipam.externalCIDR 10.100.0.0/16 overlaps networkManager.config.serviceCIDR 10.96.0.0/12",
        ],
    );
    refused(
        &["networkManager.config.additionalPools={100.64.0.0/10,172.31.0.0/16}"],
        &[
            "networkManager.config.additionalPools[1] 172.31.0.0/16 overlaps the default pool 172.16.0.0/12",
        ],
    );
}

#[test]
fn an_unknown_key_is_refused_naming_it_and_where() {
    refused(
        &["bogus=1"],
        &["at ''", "additional properties 'bogus' not allowed"],
    );
    refused(
        &["gateway.config.listenPort=5871"],
        &[
            "at '/gateway/config'",
            "additional properties 'listenPort' not allowed",
        ],
    );
    refused(
        &["auth.ingress.enabled=true"],
        &[
            "at '/auth/ingress'",
            "additional properties 'enabled' not allowed",
        ],
    );
}

#[test]
fn a_missing_cluster_name_or_pod_cidr_is_refused_naming_its_key() {
    refused(
        &["discovery.config.clusterName="],
        &["discovery.config.clusterName is required"],
    );
    refused(
        &["discovery.config.clusterName=Rome"],
        &["/discovery/config/clusterName", "'Rome'"],
    );
    refused(
        &["networkManager.config.podCIDR="],
        &["networkManager.config.podCIDR is required"],
    );
}

#[test]
fn out_of_range_numbers_and_unknown_choices_are_refused_naming_their_key() {
    let cases: &[(&str, &str)] = &[
        ("networkConfig.mtu=1279", "/networkConfig/mtu"),
        ("networkConfig.mtu=9001", "/networkConfig/mtu"),
        (
            "gateway.config.listeningPort=0",
            "/gateway/config/listeningPort",
        ),
        ("gateway.config.keepalive=3601", "/gateway/config/keepalive"),
        (
            "controllerManager.workerThreads=0",
            "/controllerManager/workerThreads",
        ),
        (
            "controllerManager.pod.resources.requests.cpu=lots",
            "/controllerManager/pod/resources/requests/cpu",
        ),
        (
            "route.pod.operatorResources.limits.gpu=1",
            "/route/pod/operatorResources/limits",
        ),
        (
            "virtualKubelet.workerThreads=65",
            "/virtualKubelet/workerThreads",
        ),
        (
            "controllerManager.config.resourceSharingPercentage=0",
            "/controllerManager/config/resourceSharingPercentage",
        ),
        (
            "controllerManager.config.resourceSharingPercentage=101",
            "/controllerManager/config/resourceSharingPercentage",
        ),
        (
            "controllerManager.replicas=6",
            "/controllerManager/replicas",
        ),
        ("gateway.replicas=3", "/gateway/replicas"),
        ("auth.service.type=ExternalName", "/auth/service/type"),
        ("gateway.service.type=ClusterIP", "/gateway/service/type"),
        ("pullPolicy=Sometimes", "/pullPolicy"),
        ("virtualKubelet.mode=thread", "/virtualKubelet/mode"),
        ("ipam.store=etcd", "/ipam/store"),
        ("webhook.failurePolicy=Maybe", "/webhook/failurePolicy"),
        (
            "gateway.config.endpointOverride.address=gw.example.com",
            "/gateway/config/endpointOverride/address",
        ),
    ];
    for (set, key) in cases {
        refused(&[set], &[key]);
    }
}

#[test]
fn upstream_keys_not_honoured_yet_are_refused_unless_left_as_they_are() {
    refused(&["apiServer.trustedCA=true"], &["/apiServer/trustedCA"]);
    refused(
        &["controllerManager.config.enableResourceEnforcement=true"],
        &["/controllerManager/config/enableResourceEnforcement"],
    );
    refused(
        &["auth.config.enableAuthentication=false"],
        &["/auth/config/enableAuthentication"],
    );
    refused(
        &["virtualKubelet.extra.labels.a=b"],
        &["/virtualKubelet/extra/labels"],
    );
}

#[test]
fn inconsistent_values_are_refused_naming_their_keys() {
    refused(
        &["virtualKubelet.mode=in-process"],
        &["virtualKubelet.apiServerSupport needs virtualKubelet.mode=process"],
    );
    refused(
        &[
            "virtualKubelet.mode=in-process",
            "virtualKubelet.apiServerSupport=false",
            "virtualKubelet.workerThreads=2",
        ],
        &["virtualKubelet.workerThreads needs virtualKubelet.mode=process"],
    );
    refused(
        &["auth.ingress.enable=true"],
        &["auth.ingress.host is required with auth.ingress.enable"],
    );
    refused(
        &["gateway.config.endpointOverride.port=32000"],
        &["gateway.config.endpointOverride.port needs gateway.config.endpointOverride.address"],
    );
}
