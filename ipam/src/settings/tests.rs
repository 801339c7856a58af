//! The settings: defaults, the file's field errors, flags over the file, runtime changes.

use super::*;

fn yaml(text: &str) -> Settings {
    Settings::from_yaml(text).unwrap()
}

fn nets(v: &[&str]) -> Vec<Ipv4Net> {
    v.iter().map(|s| s.parse().unwrap()).collect()
}

#[test]
fn defaults_are_loopback_and_the_documented_paths() {
    let s = Settings::default();
    assert_eq!(s.listen(), "127.0.0.1:6000".parse().unwrap());
    assert!(s.listen().ip().is_loopback());
    assert_eq!(s.metrics_listen(), "127.0.0.1:9106".parse().unwrap());
    assert_eq!(s.state(), PathBuf::from("/var/lib/liqo-ipam/state.json"));
    assert_eq!(s.security().unwrap(), Security::default());
    let e = s.config().unwrap_err();
    assert_eq!(e.field, "podCidr");
}

#[test]
fn the_file_names_every_bad_field() {
    for (text, field) in [
        ("listen: nowhere", "listen"),
        ("pools: [10.0.0.0/8, 10.1.0.1/16]", "pools[1]"),
        ("reservedSubnets: 10.0.0.0/8", "reservedSubnets"),
        ("tokenFile: [1]", "tokenFile"),
        ("tlsCertFile: /a\ntlsKeyFiles: /b", "tlsKeyFiles"),
    ] {
        let e = Settings::from_yaml(text).unwrap_err();
        assert_eq!(e.field, field, "{text}: {e}");
    }
    let s = yaml("podCidr: 10.200.0.0/16\npools: [10.0.0.0/8, 192.168.1.0/31]");
    assert_eq!(s.config().unwrap_err().field, "pools[1]");
}

#[test]
fn flags_win_over_the_file() {
    let file = yaml(
        "listen: 0.0.0.0:6000\npodCidr: 10.200.0.0/16\ntokenFile: /run/secrets/token\n\
         clientCaFile: /ca.pem",
    );
    let flags = Settings {
        listen: Some("127.0.0.1:7000".parse().unwrap()),
        token_file: Some("/other".into()),
        ..Settings::default()
    };
    let s = flags.over(file);
    assert_eq!(s.listen(), "127.0.0.1:7000".parse().unwrap());
    assert_eq!(s.token_file, Some("/other".into()));
    assert_eq!(s.client_ca_file, Some("/ca.pem".into()));
    assert_eq!(s.pod_cidr, Some("10.200.0.0/16".parse().unwrap()));
}

#[test]
fn pools_are_the_given_or_the_defaults_plus_the_additional() {
    assert_eq!(yaml("").pools().unwrap(), None);
    assert_eq!(
        yaml("additionalPools: [100.64.0.0/10]").pools().unwrap(),
        Some(nets(&[
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "100.64.0.0/10"
        ]))
    );
    assert_eq!(
        yaml("pools: [10.0.0.0/8]\nadditionalPools: [100.64.0.0/10]")
            .pools()
            .unwrap(),
        Some(nets(&["10.0.0.0/8", "100.64.0.0/10"]))
    );
    let (config, o) = yaml("podCidr: 10.200.0.0/16\nreservedSubnets: []")
        .config()
        .unwrap();
    assert_eq!(o.reserved, Some(vec![]));
    assert_eq!(o.pools, None);
    assert_eq!(config.pools, nets(&DEFAULT_POOLS));
}

#[test]
fn a_running_service_takes_pools_and_reserved_subnets_only() {
    let running =
        yaml("podCidr: 10.200.0.0/16\npools: [10.0.0.0/8]\nreservedSubnets: [10.1.0.0/16]");
    // The same settings: nothing to do.
    let c = running.change_from(&running).unwrap();
    assert_eq!((c.pools, c.reserved), (None, None));
    // A changed pool list and reserved list are set.
    let new = yaml(
        "podCidr: 10.200.0.0/16\npools: [10.0.0.0/8]\nadditionalPools: [100.64.0.0/10]\n\
         reservedSubnets: []",
    );
    let c = new.change_from(&running).unwrap();
    assert_eq!(c.pools, Some(nets(&["10.0.0.0/8", "100.64.0.0/10"])));
    assert_eq!(c.reserved, Some(vec![]));
    // A list no longer given keeps what runs.
    let c = yaml("podCidr: 10.200.0.0/16")
        .change_from(&running)
        .unwrap();
    assert_eq!((c.pools, c.reserved), (None, None));
    // Anything else needs a restart, named.
    for (text, field) in [
        ("podCidr: 10.201.0.0/16", "podCidr"),
        (
            "podCidr: 10.200.0.0/16\nserviceCidr: 10.97.0.0/16",
            "serviceCidr",
        ),
        (
            "podCidr: 10.200.0.0/16\nexternalCidr: 10.71.0.0/16",
            "externalCidr",
        ),
        ("podCidr: 10.200.0.0/16\nlisten: 127.0.0.1:6001", "listen"),
        (
            "podCidr: 10.200.0.0/16\nmetricsListen: 127.0.0.1:1",
            "metricsListen",
        ),
        ("podCidr: 10.200.0.0/16\nstate: /tmp/x.json", "state"),
        ("podCidr: 10.200.0.0/16\ntokenFile: /t", "tokenFile"),
        ("podCidr: 10.200.0.0/16\nclientCaFile: /t", "clientCaFile"),
        ("podCidr: 10.200.0.0/16\ntlsSecret: t", "tlsSecret"),
    ] {
        let e = yaml(text).change_from(&running).unwrap_err();
        assert_eq!(e.field, field, "{text}: {e}");
        assert!(e.problem.contains("changes only on a restart"), "{e}");
    }
    // Giving the default explicitly is no change.
    let explicit = yaml(
        "podCidr: 10.200.0.0/16\nlisten: 127.0.0.1:6000\nserviceCidr: 10.96.0.0/12\npools: [10.0.0.0/8]\nreservedSubnets: [10.1.0.0/16]",
    );
    let c = explicit.change_from(&running).unwrap();
    assert_eq!((c.pools, c.reserved), (None, None));
}

#[test]
fn a_refusal_names_the_list_that_changed() {
    let e = crate::Error::InUse {
        what: "reserved subnet",
        net: "10.0.0.0/8".parse().unwrap(),
        holder: "peer milan".into(),
    };
    let pools = Change {
        pools: Some(vec![]),
        reserved: None,
    };
    let reserved = Change {
        pools: None,
        reserved: Some(vec![]),
    };
    let both = Change {
        pools: Some(vec![]),
        reserved: Some(vec![]),
    };
    let given = yaml("pools: [10.0.0.0/8]");
    let extra = yaml("additionalPools: [100.64.0.0/10]");
    assert_eq!(refused_field(&pools, &given, &e), "pools[0]");
    assert_eq!(refused_field(&pools, &extra, &e), "additionalPools");
    assert_eq!(refused_field(&reserved, &given, &e), "reservedSubnets");
    assert_eq!(refused_field(&both, &given, &e), "reservedSubnets");
    let p = crate::Error::PoolOverlap("10.0.0.0/8".parse().unwrap(), "10.0.0.0/9".parse().unwrap());
    assert_eq!(refused_field(&both, &given, &p), "pools[0]");
}

#[test]
fn list_elements_are_named_when_repeated_overlapping_or_whole() {
    let err = |text: &str| {
        let s = yaml(text);
        s.pools().and(s.reserved()).unwrap_err()
    };
    let e = err("reservedSubnets: [10.201.0.0/16, 10.201.0.0/16]");
    assert_eq!(e.field, "reservedSubnets[1]", "{e}");
    assert!(e.problem.contains("repeats reservedSubnets[0]"), "{e}");
    let e = err("pools: [10.0.0.0/8, 10.1.0.0/16]");
    assert_eq!(e.field, "pools[1]", "{e}");
    let e = err("pools: [0.0.0.0/0]");
    assert_eq!(e.field, "pools[0]", "{e}");
    assert!(e.problem.contains("/1 to /30"), "{e}");
    let e = err("additionalPools: [10.64.0.0/10]");
    assert_eq!(e.field, "additionalPools[0]", "{e}");
}

#[test]
fn the_store_is_a_file_by_default_or_a_checked_configmap() {
    let s = Settings::default();
    assert_eq!(
        s.store().unwrap(),
        StoreChoice::File("/var/lib/liqo-ipam/state.json".into())
    );
    let s = yaml("store: configmap");
    let c = s.store().unwrap();
    assert_eq!(c.to_string(), "configmap liqo/liqo-ipam-state");
    assert_eq!(
        (c.kind(), c.location().as_str()),
        ("configmap", "liqo/liqo-ipam-state")
    );
    let s = yaml("store: configmap\nstateConfigmap: ipam.state\nnamespace: net");
    assert_eq!(s.store().unwrap().to_string(), "configmap net/ipam.state");
    assert_eq!(s.unused_store_flags(), Vec::<&str>::new());
    for (text, field, want) in [
        (
            "store: configmap\nstateConfigmap: Bad_Name",
            "stateConfigmap",
            "--state-configmap \"Bad_Name\": not a valid ConfigMap name: contains 'B'",
        ),
        (
            "store: configmap\nnamespace: liqo.system",
            "namespace",
            "--namespace \"liqo.system\": not a valid namespace: contains '.'",
        ),
    ] {
        let e = yaml(text).store().unwrap_err();
        assert_eq!(e.field, field, "{text}");
        assert!(e.problem.starts_with(want), "{text}: {e}");
    }
    assert_eq!(Settings::from_yaml("store: s3").unwrap_err().field, "store");
    // What the chosen store does not use is named (the daemon warns).
    let s = yaml("stateConfigmap: x\nnamespace: tenant");
    assert_eq!(s.unused_store_flags(), ["--state-configmap", "--namespace"]);
    assert_eq!(
        yaml("store: configmap\nstate: /x").unused_store_flags(),
        ["--state"]
    );
    // The TLS Secret's namespace is used with a file store.
    assert_eq!(
        yaml("stateConfigmap: x\nnamespace: tenant\ntlsSecret: t").unused_store_flags(),
        ["--state-configmap"]
    );
    assert_eq!(
        configmap_name("liqo-ipam-state").unwrap(),
        "liqo-ipam-state"
    );
    assert!(configmap_name("x_y").is_err());
    assert!(namespace_name("a.b").is_err());
}

#[test]
fn the_store_changes_only_on_a_restart() {
    let running = yaml("podCidr: 10.200.0.0/16\nstore: configmap");
    for (text, field) in [
        ("podCidr: 10.200.0.0/16", "store"),
        (
            "podCidr: 10.200.0.0/16\nstore: configmap\nstateConfigmap: other",
            "stateConfigmap",
        ),
        (
            "podCidr: 10.200.0.0/16\nstore: configmap\nnamespace: other",
            "namespace",
        ),
    ] {
        let e = yaml(text).change_from(&running).unwrap_err();
        assert_eq!(e.field, field, "{text}: {e}");
        assert!(e.problem.contains("only on a restart"), "{e}");
    }
    let same = yaml("podCidr: 10.200.0.0/16\nstore: configmap\nnamespace: liqo");
    assert!(same.change_from(&running).is_ok());
}

#[test]
fn the_tls_secret_is_in_the_namespace_with_the_names_checked() {
    let s = yaml("tlsSecret: liqo-ipam-tls\ntlsNames: [ipam.example.com, 10.0.0.1]");
    let t = s.security().unwrap().tls_secret.unwrap();
    assert_eq!(t.to_string(), "liqo/liqo-ipam-tls");
    assert_eq!(t.extra_names, ["ipam.example.com", "10.0.0.1"]);
    let t = yaml("tlsSecret: x\nnamespace: tenant")
        .security()
        .unwrap()
        .tls_secret
        .unwrap();
    assert_eq!((t.namespace.as_str(), t.name.as_str()), ("tenant", "x"));
    for (text, field, want) in [
        (
            "tlsSecret: Bad_Name",
            "tlsSecret",
            "--tls-secret \"Bad_Name\": not a valid Secret name",
        ),
        (
            "tlsSecret: x\nnamespace: a.b",
            "namespace",
            "--namespace \"a.b\": not a valid namespace",
        ),
        (
            "tlsSecret: x\ntlsNames: [ok.example, not a name]",
            "tlsNames[1]",
            "--tls-names \"not a name\": neither a DNS name nor an IP address",
        ),
        (
            "tlsNames: [a.example]",
            "tlsNames",
            "needs tlsSecret (--tls-secret)",
        ),
    ] {
        let e = yaml(text).security().unwrap_err();
        assert_eq!(e.field, field, "{text}: {e}");
        assert!(e.problem.starts_with(want), "{text}: {e}");
    }
    // Changing the names needs a restart too.
    let running = yaml("podCidr: 10.200.0.0/16\ntlsSecret: t");
    let e = yaml("podCidr: 10.200.0.0/16\ntlsSecret: t\ntlsNames: [a.example]")
        .change_from(&running)
        .unwrap_err();
    assert_eq!(e.field, "tlsNames");
}
