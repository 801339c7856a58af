//! The database-like mode over loopback: an instance with a temporary data directory appends
//! entries (one percent-encoded with spaces) and serves them back in order, as the file on disk
//! has them; bad entries are 400s that append nothing; concurrent appends stay whole lines with
//! distinct counts; a restarted instance on the same directory (given by the variable this
//! time) serves the same log and appends after it.

use std::{net::SocketAddr, path::Path};

use crate::common::{Answer, TempDir, json, request, start_with};

fn append(addr: SocketAddr, encoded_entry: &str) -> Answer {
    request(addr, "POST", &format!("/append?entry={encoded_entry}"))
}

fn on_disk(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("log")).unwrap()
}

/// A 400 naming what is wrong; the log as it was.
fn refused(addr: SocketAddr, target: &str, dir: &Path, expect: &[&str]) {
    let before = on_disk(dir);
    let a = request(addr, "POST", target);
    assert_eq!(
        (a.status, a.content_type.as_str()),
        (400, "application/json"),
        "{target}: {}",
        a.body
    );
    let error = json(&a.body)["error"].as_str().unwrap().to_owned();
    for e in expect {
        assert!(error.contains(e), "{target}: {error:?} lacks {e:?}");
    }
    assert_eq!(on_disk(dir), before, "{target} appended something");
}

#[test]
fn appends_serve_the_log_in_order_and_survive_a_restart() {
    let dir = TempDir::new("data");
    let db = start_with("db-0", "milan", |c| {
        c.arg("--data-dir").arg(dir.path());
    });

    // Nothing yet: an empty log, and no file created by reading it.
    let a = request(db.addr, "GET", "/log");
    assert_eq!(
        (a.status, a.content_type.as_str(), a.body.as_str()),
        (200, "text/plain; charset=utf-8", "")
    );
    assert!(!dir.path().join("log").exists());

    // Three entries; the second percent-encoded with spaces, the third with `+`.
    let a = append(db.addr, "first");
    assert_eq!(
        (a.status, a.content_type.as_str()),
        (200, "application/json"),
        "{}",
        a.body
    );
    let v = json(&a.body);
    assert_eq!(v["appended"], "first pod=db-0 cluster=milan");
    assert_eq!(v["lines"], 1);
    assert_eq!(v["via"]["pod"], "db-0");
    assert_eq!(v["via"]["namespace"], "demo");
    assert_eq!(v["via"]["node"], "milan-worker");
    assert_eq!(v["via"]["cluster"], "milan");
    assert_eq!(v["via"]["client"], a.local.to_string());
    assert_eq!(v["via"]["served"], 2, "/log and /append are counted");
    assert_eq!(on_disk(dir.path()), "first pod=db-0 cluster=milan\n");

    let v = json(&append(db.addr, "second%20entry%20%C3%A0%20la%20carte").body);
    assert_eq!(
        v["appended"],
        "second entry à la carte pod=db-0 cluster=milan"
    );
    assert_eq!(v["lines"], 2);
    let v = json(&append(db.addr, "third+one").body);
    assert_eq!(v["appended"], "third one pod=db-0 cluster=milan");
    assert_eq!(v["lines"], 3);

    let expect = "first pod=db-0 cluster=milan\n\
                  second entry à la carte pod=db-0 cluster=milan\n\
                  third one pod=db-0 cluster=milan\n";
    let a = request(db.addr, "GET", "/log");
    assert_eq!((a.status, a.body.as_str()), (200, expect));
    assert_eq!(on_disk(dir.path()), expect);

    // Bad entries: 400 naming the entry and the rule, nothing appended.
    refused(
        db.addr,
        "/append?entry=one%0Atwo",
        dir.path(),
        &[r#"bad entry "one\ntwo""#, "control character"],
    );
    let long = "y".repeat(201);
    refused(
        db.addr,
        &format!("/append?entry={long}"),
        dir.path(),
        &[&long, "1 to 200 characters, this one has 201"],
    );
    refused(db.addr, "/append?entry=", dir.path(), &["this one has 0"]);
    refused(
        db.addr,
        "/append",
        dir.path(),
        &["needs an entry parameter"],
    );
    refused(
        db.addr,
        "/append?entry=%zz",
        dir.path(),
        &["bad percent escape"],
    );

    // One method each.
    let a = request(db.addr, "GET", "/append?entry=x");
    assert_eq!((a.status, a.allow.as_str()), (405, "post"), "{}", a.body);
    let a = request(db.addr, "POST", "/log");
    assert_eq!((a.status, a.allow.as_str()), (405, "get"), "{}", a.body);
    assert_eq!(on_disk(dir.path()), expect);

    // Concurrent appends: whole lines, each answer its own count.
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let addr = db.addr;
            std::thread::spawn(move || json(&append(addr, &format!("burst%20{i:02}")).body))
        })
        .collect();
    let mut counts: Vec<u64> = threads
        .into_iter()
        .map(|t| t.join().unwrap()["lines"].as_u64().unwrap())
        .collect();
    counts.sort_unstable();
    assert_eq!(counts, (4..=19).collect::<Vec<u64>>());
    let log = on_disk(dir.path());
    let mut burst: Vec<&str> = log.lines().skip(3).collect();
    burst.sort_unstable();
    let whole: Vec<String> = (0..16)
        .map(|i| format!("burst {i:02} pod=db-0 cluster=milan"))
        .collect();
    assert_eq!(burst, whole);
    assert!(log.starts_with(expect), "{log}");

    // Killed and started again on the same directory, by the variable this time, as another pod.
    drop(db);
    let db = start_with("db-1", "milan", |c| {
        c.env("DEMO_DATA_DIR", dir.path());
    });
    let a = request(db.addr, "GET", "/log");
    assert_eq!((a.status, a.body.as_str()), (200, log.as_str()));
    let v = json(&append(db.addr, "after%20restart").body);
    assert_eq!(v["appended"], "after restart pod=db-1 cluster=milan");
    assert_eq!(v["lines"], 20);
    assert_eq!(
        on_disk(dir.path()),
        format!("{log}after restart pod=db-1 cluster=milan\n")
    );
}

#[test]
fn a_data_dir_that_is_not_a_directory_stops_it_at_start() {
    let dir = TempDir::new("not-a-dir");
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_liqo-demo"))
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&file)
        .env_remove("DEMO_DATA_DIR")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "cannot use the data directory {}: not a directory",
            file.display()
        )),
        "{stderr}"
    );
}
