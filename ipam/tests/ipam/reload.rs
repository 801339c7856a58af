//! `liqo-ipam serve --config`: the file is watched; pools, additional pools and reserved subnets
//! change while running, a change the IPAM refuses or one to a field that needs a restart is
//! refused naming the field (in `/status`) with the running state kept, and putting the good
//! text back clears the refusal.

use crate::common;

use std::path::Path;

use common::{Server, free_port, status, wait_for};

/// Replaces `path` atomically (as a ConfigMap update does).
fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Waits until `/status` shows the reload state `pred` accepts, and returns it.
fn reload_until(
    s: &Server,
    what: &str,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    wait_for(what, || {
        let r = status(s.metrics)["reload"].clone();
        pred(&r).then_some(r)
    })
}

fn list(s: &Server) -> serde_json::Value {
    serde_json::from_str(&s.ok(&["list", "-o", "json"])).unwrap()
}

#[test]
fn pools_and_reserved_subnets_follow_the_file_and_other_changes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let config = dir.path().join("ipam.yaml");
    let port = free_port();
    let base = format!("listen: 127.0.0.1:{port}\npodCidr: 10.200.0.0/16\n");
    let first = format!("{base}pools: [10.0.0.0/8]\nreservedSubnets: [10.201.0.0/16]\n");
    write(&config, &first);
    let s = Server::start_with(
        &state,
        &["--config", config.to_str().unwrap()],
        &format!("http://127.0.0.1:{port}"),
        &[],
    );
    let r = status(s.metrics)["reload"].clone();
    assert_eq!(r["applied"]["count"], 1, "{r}");
    s.ok(&[
        "remap",
        "--peer",
        "milan",
        "--pod-cidr",
        "10.200.0.0/16",
        "--external-cidr",
        "10.70.0.0/16",
    ]);
    let before = list(&s);
    let milan_pods = before["peers"][0]["podView"].as_str().unwrap().to_owned();
    assert_eq!(before["pools"], serde_json::json!(["10.0.0.0/8"]));

    // Pools and reserved subnets change while running.
    let second = format!(
        "{base}pools: [10.0.0.0/8]\nadditionalPools: [100.64.0.0/10]\nreservedSubnets: [10.202.0.0/16]\n"
    );
    write(&config, &second);
    reload_until(&s, "the second text applied", |r| {
        r["applied"]["count"] == 2
    });
    let now = list(&s);
    assert_eq!(
        now["pools"],
        serde_json::json!(["10.0.0.0/8", "100.64.0.0/10"])
    );
    assert_eq!(now["reserved"], serde_json::json!(["10.202.0.0/16"]));
    assert_eq!(now["peers"], before["peers"], "peers keep their ranges");
    let applied = list(&s);

    // Reserving milan's range is refused naming the field and the peer; nothing changes.
    write(
        &config,
        &format!(
            "{base}pools: [10.0.0.0/8]\nadditionalPools: [100.64.0.0/10]\nreservedSubnets: [{milan_pods}]\n"
        ),
    );
    let r = reload_until(&s, "the refusal", |r| !r["refused"].is_null());
    assert_eq!(r["refused"]["field"], "reservedSubnets[0]", "{r}");
    assert!(
        r["refused"]["problem"].as_str().unwrap().contains("milan"),
        "{r}"
    );
    assert_eq!(list(&s), applied);

    // The file sets the pools and reserved subnets: the API refuses to change them (the next
    // file change would replace what it did), naming the file; nothing changes.
    for args in [
        &["reserved", "add", "10.203.0.0/16"][..],
        &["reserved", "remove", "10.202.0.0/16"],
        &["pool", "add", "192.168.0.0/16"],
        &["pool", "remove", "100.64.0.0/10"],
    ] {
        let out = s.cli(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(
            err.contains("cidr: the ") && err.contains(config.to_str().unwrap()),
            "{args:?}: {err}"
        );
    }
    assert_eq!(list(&s), applied);

    // A field that needs a restart is refused naming it; nothing changes.
    let moved = free_port();
    write(
        &config,
        &second.replace(&format!(":{port}"), &format!(":{moved}")),
    );
    let r = reload_until(&s, "the listen refusal", |r| {
        r["refused"]["field"] == "listen"
    });
    assert!(
        r["refused"]["problem"]
            .as_str()
            .unwrap()
            .contains("restart"),
        "{r}"
    );
    write(&config, &format!("{second}serviceCidr: 10.97.0.0/16\n"));
    reload_until(&s, "the serviceCidr refusal", |r| {
        r["refused"]["field"] == "serviceCidr"
    });
    assert_eq!(list(&s), applied);
    assert!(
        s.ok(&["list"]).contains("100.64.0.0/10"),
        "still serving on the old address"
    );

    // The good text back: the refusal clears.
    write(&config, &second);
    let r = reload_until(&s, "the refusal cleared", |r| r["refused"].is_null());
    assert_eq!(r["applied"]["count"], 2, "{r}");
    assert_eq!(list(&s), applied);
    let metrics = common::http_get(s.metrics);
    assert!(metrics.contains("liqo_ipam_config_refused 0"), "{metrics}");
    let (code, _) = s.terminate();
    assert_eq!(code.code(), Some(0));
}
