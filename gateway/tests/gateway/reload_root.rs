//! The gateway's reload on the real kernel (needs root): `/status` says what runs, what was
//! refused, what failed to apply and whether the file can be read, and clears each once it no
//! longer holds. Every wait is on the status naming the text written (its digest).

use crate::common;

use common::{Site, Spaces, prefix};
use liqo_daemon::digest;

fn ip(site: &Site, args: &[&str]) -> String {
    let out = site.host.command("ip").args(args).output().unwrap();
    assert!(out.status.success(), "ip {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn status_shows_refusals_read_errors_and_kernel_failures_until_they_clear() {
    let p = prefix("s");
    let mut spaces = Spaces::new();
    let wan = common::wan(&mut spaces, &p).await;
    let mut a = Site::new(&mut spaces, &p, "a", &wan, "198.18.0.1/24").await;
    // b and c only lend their keys: a's kernel state is what is checked.
    let b = Site::new(&mut spaces, &p, "b", &wan, "198.18.0.2/24").await;
    let c = Site::new(&mut spaces, &p, "c", &wan, "").await;
    let b_entry = b.as_peer(Some("198.18.0.2:51840"), "10.71.0.0/16", "10.72.0.0/16");
    let c_entry = c.as_peer(None, "10.81.0.0/16", "10.82.0.0/16");
    let running = a.configure(&b_entry, "");
    a.start();
    let s = a.wait_status("started", |s| s.reload.applied.is_some());
    let applied = s.reload.applied.clone().unwrap();
    assert_eq!(applied.digest, digest(&running));
    assert_eq!(applied.count, 1);
    assert_eq!(s.reload.source, a.config_path().display().to_string());
    assert_eq!(s.reload.problem(), None);

    // A value that does not validate: refused with its field, the running text kept.
    let bad = a.configure(&b_entry.replace("10.71.0.0/16", "10.71.0.1/16"), "");
    let s = a.wait_status("refused", |s| {
        s.reload
            .refused
            .as_ref()
            .is_some_and(|r| r.digest == digest(&bad))
    });
    let r = s.reload.refused.as_ref().unwrap();
    assert_eq!(r.field, "peers[0].remotePodCIDR", "{r:?}");
    assert!(r.problem.contains("host bits"), "{r:?}");
    assert_eq!(s.reload.applied.as_ref().unwrap().digest, digest(&running));
    assert_eq!(s.peers.len(), 1);

    // A field the running gateway cannot change: refused by its apply, the same way.
    let port = a.configure(&b_entry, "listenPort: 51841\n");
    let s = a.wait_status("refused by apply", |s| {
        s.reload
            .refused
            .as_ref()
            .is_some_and(|r| r.digest == digest(&port))
    });
    assert_eq!(s.reload.refused.as_ref().unwrap().field, "listenPort");
    assert_eq!(s.listen_port, 51840);

    // Back to the running text: nothing refused any more (defect 2: it stayed).
    assert_eq!(a.configure(&b_entry, ""), running);
    let s = a.wait_status("refusal cleared", |s| s.reload.refused.is_none());
    assert_eq!(s.reload.problem(), None);
    assert_eq!(
        s.reload.applied.unwrap().count,
        1,
        "the running text is not applied again"
    );

    // Unreadable: removed, then a directory in its place; each shown until it is back.
    std::fs::remove_file(a.config_path()).unwrap();
    let s = a.wait_status("missing file", |s| s.reload.read_error.is_some());
    let e = s.reload.read_error.unwrap();
    assert!(
        e.contains("No such file") && e.contains("config.yaml"),
        "{e}"
    );
    std::fs::create_dir(a.config_path()).unwrap();
    a.wait_status("a directory", |s| {
        s.reload
            .read_error
            .as_ref()
            .is_some_and(|e| e.contains("Is a directory"))
    });
    std::fs::remove_dir(a.config_path()).unwrap();
    a.configure(&b_entry, "");
    let s = a.wait_status("readable again", |s| s.reload.read_error.is_none());
    assert_eq!(s.reload.problem(), None);
    assert_eq!(s.reload.applied.unwrap().digest, digest(&running));

    // A change the kernel refuses: with the host end of the gateway's veth down, its routes are
    // gone and a route via the gateway namespace is refused ("Nexthop has invalid gateway").
    ip(&a, &["link", "set", "liqo.host", "down"]);
    let both = a.configure(&format!("{b_entry}{c_entry}"), "");
    let s = a.wait_status("apply retried", |s| {
        s.reload
            .apply_error
            .as_ref()
            .is_some_and(|f| f.digest == digest(&both) && f.attempts >= 2)
    });
    let f = s.reload.apply_error.as_ref().unwrap();
    assert!(f.error.contains("add route"), "{f:?}");
    eprintln!("the kernel failure as /status shows it: {f:?}");
    assert_eq!(s.reload.refused, None);
    assert_eq!(
        s.reload.applied.as_ref().unwrap().digest,
        digest(&running),
        "rolled back: the running text is still what runs"
    );
    assert_eq!(s.peers.len(), 1, "the peer table was not switched");
    let problem = s.reload.problem().unwrap();
    assert!(problem.contains("retrying"), "{problem}");
    let metrics = a
        .host
        .run(|| liqo_daemon::localhttp::get("127.0.0.1:9107".parse().unwrap(), "/metrics"))
        .unwrap()
        .unwrap();
    assert!(
        metrics.contains("liqo_gateway_config_apply_failed 1"),
        "{metrics}"
    );

    // The link comes back: the next tick applies it and the failure clears.
    ip(&a, &["link", "set", "liqo.host", "up"]);
    let s = a.wait_status("applied after the failure", |s| {
        s.reload
            .applied
            .as_ref()
            .is_some_and(|x| x.digest == digest(&both))
    });
    assert_eq!(s.reload.apply_error, None);
    assert_eq!(s.reload.problem(), None);
    assert_eq!(s.reload.applied.unwrap().count, 2);
    assert_eq!(s.peers.len(), 2);
    let routes = ip(&a, &["route", "show", "table", "18951"]);
    assert!(
        routes.contains("10.71.0.0/16") && routes.contains("10.81.0.0/16"),
        "{routes}"
    );

    a.stop();
    drop((b, c));
}

/// The reviewer's scenario: a change fails and so does its rollback (the host end of the veth is
/// down, so every route through it is gone and neither config's routes can be added). Writing
/// back the exact running text must not just clear the error: the kernel is half of the failed
/// change. It is applied again, its failure shown until the kernel takes it, and `/status` is
/// clean only once the running config's routes are back.
#[tokio::test]
async fn the_running_text_written_back_after_a_failed_rollback_is_applied_again() {
    let p = prefix("r");
    let mut spaces = Spaces::new();
    let wan = common::wan(&mut spaces, &p).await;
    let mut a = Site::new(&mut spaces, &p, "a", &wan, "198.18.0.1/24").await;
    let b = Site::new(&mut spaces, &p, "b", &wan, "198.18.0.2/24").await;
    let c = Site::new(&mut spaces, &p, "c", &wan, "").await;
    let b_entry = b.as_peer(Some("198.18.0.2:51840"), "10.71.0.0/16", "10.72.0.0/16");
    let c_entry = c.as_peer(None, "10.81.0.0/16", "10.82.0.0/16");
    let running = a.configure(&b_entry, "");
    a.start();
    a.wait_status("started", |s| s.reload.applied.is_some());
    let table = || ip(&a, &["route", "show", "table", "18951"]);
    assert!(table().contains("10.71.0.0/16"), "{}", table());

    ip(&a, &["link", "set", "liqo.host", "down"]);
    let both = a.configure(&format!("{b_entry}{c_entry}"), "");
    let s = a.wait_status("the change and its rollback failed", |s| {
        s.reload
            .apply_error
            .as_ref()
            .is_some_and(|f| f.digest == digest(&both))
    });
    let f = s.reload.apply_error.unwrap();
    assert!(
        f.error.contains("add route") && f.error.contains("rolling back failed too"),
        "the failed rollback is shown, not only logged: {f:?}"
    );
    assert!(!table().contains("10.71.0.0/16"), "{}", table());

    // Back to the exact running text: applied again, and it fails the same way while the link
    // is down; shown (defect: cleared with nothing applied, the kernel left broken).
    assert_eq!(a.configure(&b_entry, ""), running);
    let s = a.wait_status("the running text applied again and failing", |s| {
        s.reload
            .apply_error
            .as_ref()
            .is_some_and(|f| f.digest == digest(&running) && f.attempts >= 2)
    });
    assert_eq!(s.reload.refused, None);
    assert!(s.reload.problem().unwrap().contains("retrying"));
    assert_eq!(s.reload.applied.unwrap().digest, digest(&running));

    // The link comes back: the next tick converges the kernel to the running config, and only
    // then is the status clean.
    ip(&a, &["link", "set", "liqo.host", "up"]);
    let s = a.wait_status("repaired", |s| s.reload.problem().is_none());
    let routes = table();
    assert!(
        routes.contains("10.71.0.0/16") && !routes.contains("10.81.0.0/16"),
        "clean status, so the running config's routes: {routes}"
    );
    let applied = s.reload.applied.unwrap();
    assert_eq!((applied.digest, applied.count), (digest(&running), 1));
    assert_eq!(s.peers.len(), 1);

    a.stop();
    drop((b, c));
}
