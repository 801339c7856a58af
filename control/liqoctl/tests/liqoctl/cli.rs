//! The built binary without a cluster: flags refused before any connection (exit 2, the bad
//! value named, a token never echoed), `version --client`, `completion`, and the kubectl
//! plugin name.

use std::process::{Command, Output};

const ID: &str = "b07938e3-d241-460c-a77b-e286c0f733c7";

fn token() -> String {
    "0123456789abcdef".repeat(8)
}

fn liqoctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_liqoctl"))
        // A kubeconfig that does not exist: a command that got past parsing would fail on it.
        .args(["--kubeconfig", "/nonexistent/kubeconfig"])
        .args(args)
        .output()
        .unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn bad_flags_exit_2_naming_the_value() {
    let t = token();
    let cases: [(&[&str], &str); 5] = [
        (
            &[
                "milan",
                "--auth-url",
                "ftp://a.b",
                "--cluster-id",
                ID,
                "--auth-token",
                &t,
            ],
            "ftp://a.b",
        ),
        (
            &[
                "milan",
                "--auth-url",
                "https://a.b",
                "--cluster-id",
                "x_y",
                "--auth-token",
                &t,
            ],
            "x_y",
        ),
        (
            &[
                "Milan!",
                "--auth-url",
                "https://a.b",
                "--cluster-id",
                ID,
                "--auth-token",
                &t,
            ],
            "Milan!",
        ),
        (
            &[
                "milan",
                "--auth-url",
                "https://a.b",
                "--cluster-id",
                ID,
                "--auth-token",
                &t,
                "--timeout",
                "0s",
            ],
            "0s",
        ),
        (
            &["milan", "--auth-url", "https://a.b", "--cluster-id", ID],
            "--auth-token",
        ),
    ];
    for (args, named) in cases {
        let o = liqoctl(&[&["peer", "out-of-band"][..], args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
        assert!(err(&o).contains(named), "{args:?}: {}", err(&o));
        assert!(out(&o).is_empty());
    }
}

#[test]
fn a_bad_token_is_not_echoed() {
    let bad = format!("{}XYZ", &token()[..100]);
    let o = liqoctl(&[
        "peer",
        "oob",
        "milan",
        "--auth-url",
        "https://a.b",
        "--cluster-id",
        ID,
        "--auth-token",
        &bad,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("--auth-token"), "{}", err(&o));
    assert!(!err(&o).contains(&bad[..100]), "token echoed: {}", err(&o));
}

#[test]
fn a_missing_kubeconfig_is_an_error_naming_it() {
    let o = liqoctl(&["status"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("/nonexistent/kubeconfig"), "{}", err(&o));
}

#[test]
fn version_and_completion_need_no_cluster() {
    let o = liqoctl(&["version", "--client"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        out(&o),
        format!("Client version: {}\n", env!("CARGO_PKG_VERSION"))
    );
    for shell in ["bash", "zsh", "fish"] {
        let o = liqoctl(&["completion", shell]);
        assert!(o.status.success(), "{shell}: {}", err(&o));
        assert!(out(&o).contains("peer-command"), "{shell}");
    }
}

#[test]
fn as_a_kubectl_plugin() {
    let dir = std::env::temp_dir().join(format!("liqoctl-plugin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plugin = dir.join("kubectl-liqo");
    let _ = std::fs::remove_file(&plugin); // absent on a first run: nothing to remove
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_liqoctl"), &plugin).unwrap();
    let o = Command::new(&plugin).arg("--help").output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("kubectl liqo"), "{}", out(&o));
}

/// `offload namespace -o yaml|json` prints the object and contacts no cluster (the
/// kubeconfig does not exist); the seed's command line runs unmodified.
#[test]
fn offload_output_needs_no_cluster() {
    let seed = [
        "offload",
        "namespace",
        "liqo-demo",
        "--namespace-mapping-strategy",
        "EnforceSameName",
        "--pod-offloading-strategy",
        "LocalAndRemote",
        "--selector",
        "topology.liqo.io/region=south",
    ];
    let o = liqoctl(&[&seed[..], &["-o", "yaml"]].concat());
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        out(&o),
        "apiVersion: offloading.liqo.io/v1alpha1
kind: NamespaceOffloading
metadata:
  name: offloading
  namespace: liqo-demo
spec:
  namespaceMappingStrategy: EnforceSameName
  podOffloadingStrategy: LocalAndRemote
  clusterSelector:
    nodeSelectorTerms:
    - matchExpressions:
      - key: topology.liqo.io/region
        operator: In
        values:
        - south
"
    );
    let o = liqoctl(&["offload", "ns", "foo", "--output", "json"]);
    assert!(o.status.success(), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "apiVersion": "offloading.liqo.io/v1alpha1",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading", "namespace": "foo"},
            "spec": {
                "namespaceMappingStrategy": "DefaultName",
                "podOffloadingStrategy": "LocalAndRemote",
                "clusterSelector": {"nodeSelectorTerms": []},
            },
        })
    );
    // Without -o the command gets to the (missing) kubeconfig: exit 1 naming it.
    let o = liqoctl(&seed);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("/nonexistent/kubeconfig"), "{}", err(&o));
    let o = liqoctl(&["unoffload", "namespace", "liqo-demo"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("/nonexistent/kubeconfig"), "{}", err(&o));
}

#[test]
fn offload_bad_flags_exit_2_naming_the_value() {
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["--namespace-mapping-strategy", "Same"],
            &["'Same'", "DefaultName, EnforceSameName"],
        ),
        (
            &["--pod-offloading-strategy", "Both"],
            &["'Both'", "LocalAndRemote, Local, Remote"],
        ),
        (
            &["-l", "a=b", "-l", "x in (1,2),!y=z"],
            &["\"!y=z\"", "mixes", "--selector"],
        ),
        (&["-o", "xml"], &["'xml'", "yaml, json"]),
        (&["--timeout", "soon"], &["soon", "--timeout"]),
    ];
    for (flags, named) in cases {
        let o = liqoctl(&[&["offload", "namespace", "foo"][..], flags, &["-o", "yaml"]].concat());
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {}", err(&o));
        for n in named {
            assert!(err(&o).contains(n), "{flags:?}: {n:?} not in {}", err(&o));
        }
        assert!(out(&o).is_empty());
    }
    let o = liqoctl(&["unoffload", "namespace", "Not_A_Namespace"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("Not_A_Namespace"), "{}", err(&o));
}
