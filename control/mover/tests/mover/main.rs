//! liqo-mover end to end: the built binary's `receive` and `send` over loopback, on trees in
//! temporary directories (owners other than the test's own when it runs as root, as in CI).

mod harness;

use std::{fs::File, io::Read, net::TcpListener, os::unix::fs::MetadataExt, path::Path};

use harness::{
    TOKEN, WRONG, assert_same_tree, free_port, is_root, make_source, mover, send, spawn_receiver,
    text,
};
use liqo_mover::wire::{self, Ack, Entry, Reply};

#[test]
fn copies_a_tree_and_verifies_it() {
    let t = tempfile::tempdir().unwrap();
    let (src, dest) = (t.path().join("src"), t.path().join("dest"));
    let (files, dirs, symlinks, bytes) = make_source(&src);
    std::fs::create_dir_all(dest.join("lost+found")).unwrap();
    let (rlog, slog) = (t.path().join("rlog"), t.path().join("slog"));
    File::create(&rlog).unwrap();
    File::create(&slog).unwrap();
    let port = free_port();
    let rx = spawn_receiver(
        t.path(),
        &dest,
        port,
        &["--termination-log", rlog.to_str().unwrap()],
    );
    let sent = send(
        &src,
        port,
        TOKEN,
        &["--termination-log", slog.to_str().unwrap()],
    );
    let (status, rout, rerr) = rx.wait(60);
    let (sout, serr) = (text(&sent.stdout), text(&sent.stderr));
    assert!(sent.status.success(), "sender: {serr}\nreceiver: {rerr}");
    assert!(status.success(), "receiver: {rerr}");

    let lines: Vec<&str> = sout.lines().collect();
    assert_eq!(lines.len(), 2, "{sout}");
    assert_eq!(lines[1], "verified");
    assert_eq!(rout, format!("{}\n", lines[0]), "the two manifest lines");
    let want = format!("files={files} dirs={dirs} symlinks={symlinks} bytes={bytes}");
    let (digest, counts) = lines[0]
        .strip_prefix("manifest sha256=")
        .and_then(|r| r.split_once(' '))
        .unwrap_or_else(|| panic!("{}", lines[0]));
    assert!(digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(counts, want);
    assert_eq!(std::fs::read_to_string(&rlog).unwrap(), rout);
    assert_eq!(std::fs::read_to_string(&slog).unwrap(), sout);

    assert_same_tree(&src, &dest, true);
    let root_mode = |d: &Path| std::fs::metadata(d).unwrap().mode();
    assert_eq!(root_mode(&src), root_mode(&dest));
    assert!(dest.join("lost+found").is_dir());
    if is_root() {
        let m = std::fs::metadata(dest.join("a/owned")).unwrap();
        assert_eq!((m.uid(), m.gid()), (1234, 4321));
        let l = std::fs::symlink_metadata(dest.join("link")).unwrap();
        assert_eq!((l.uid(), l.gid()), (1234, 99));
    }
    for out in [&sout, &serr, &rout, &rerr] {
        assert!(!out.contains(TOKEN), "the token was printed: {out}");
    }
}

#[test]
fn a_wrong_token_is_refused_and_the_receiver_keeps_waiting() {
    let t = tempfile::tempdir().unwrap();
    let (src, dest) = (t.path().join("src"), t.path().join("dest"));
    make_source(&src);
    std::fs::create_dir(&dest).unwrap();
    let port = free_port();
    let mut rx = spawn_receiver(t.path(), &dest, port, &["--no-owner"]);
    let wrong = send(&src, port, WRONG, &[]);
    let werr = text(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(1), "{werr}");
    assert!(werr.contains("refused the token"), "{werr}");
    assert!(
        rx.child.try_wait().unwrap().is_none(),
        "the receiver exited"
    );
    assert_eq!(std::fs::read_dir(&dest).unwrap().count(), 0);

    let right = send(&src, port, TOKEN, &[]);
    let (status, rout, rerr) = rx.wait(60);
    let sout = text(&right.stdout);
    assert!(right.status.success(), "{}\n{rerr}", text(&right.stderr));
    assert!(status.success(), "{rerr}");
    assert!(sout.ends_with("\nverified\n"), "{sout}");
    assert!(sout.starts_with(&rout), "{sout} vs {rout}");
    assert!(
        rerr.contains("refused a connection") && rerr.contains("a wrong token"),
        "{rerr}"
    );
    assert!(rerr.contains("127.0.0.1"), "the peer is named: {rerr}");
    // --no-owner: the receiver's own owner.
    assert_same_tree(&src, &dest, false);
    let me = std::fs::metadata("/proc/self").unwrap().uid();
    if is_root() {
        assert_eq!(std::fs::metadata(dest.join("a/owned")).unwrap().uid(), me);
    }
    for out in [&werr, &sout, &text(&right.stderr), &rout, &rerr] {
        assert!(
            !out.contains(TOKEN) && !out.contains(WRONG),
            "a token was printed: {out}"
        );
    }
}

#[test]
fn a_non_empty_receive_dir_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let dest = t.path().join("dest");
    std::fs::create_dir_all(dest.join("old-dir")).unwrap();
    std::fs::create_dir_all(dest.join("lost+found")).unwrap();
    std::fs::write(dest.join("data.db"), "earlier data").unwrap();
    let (status, _, err) = spawn_receiver(t.path(), &dest, free_port(), &[]).wait(30);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("is not empty"), "{err}");
    assert!(
        err.contains("data.db, old-dir") && !err.contains("lost+found,"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dest.join("data.db")).unwrap(),
        b"earlier data"
    );
}

#[test]
fn the_receiver_gives_up_at_its_timeout() {
    let t = tempfile::tempdir().unwrap();
    let dest = t.path().join("dest");
    std::fs::create_dir(&dest).unwrap();
    let port = free_port();
    let rx = mover(Some(TOKEN))
        .args(["receive", "--dir", dest.to_str().unwrap(), "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--timeout-seconds", "1"])
        .output()
        .unwrap();
    assert_eq!(rx.status.code(), Some(4), "{}", text(&rx.stderr));
    assert!(
        text(&rx.stderr).contains("within 1 s"),
        "{}",
        text(&rx.stderr)
    );
}

#[test]
fn the_token_is_required_and_never_printed() {
    let t = tempfile::tempdir().unwrap();
    let short = "short-secret-value";
    for token in [None, Some(short)] {
        let out = mover(token)
            .args(["send", "--dir", t.path().to_str().unwrap(), "--to", "x:1"])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("LIQO_MOVER_TOKEN") && !err.contains(short),
            "{err}"
        );
    }
    let v = mover(None).arg("--version").output().unwrap();
    assert!(text(&v.stdout).starts_with("liqo-mover "), "{v:?}");
}

#[test]
fn a_socket_in_the_source_is_an_error_naming_it() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("src/d")).unwrap();
    let sock = t.path().join("src/d/app.sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    // Refused before connecting: no receiver needed.
    let out = send(&t.path().join("src"), free_port(), TOKEN, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(sock.to_str().unwrap()) && err.contains("socket"),
        "{err}"
    );
}

#[test]
fn a_different_manifest_exits_3_naming_both_digests() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), "content").unwrap();
    // A receiver that takes everything and answers another digest.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        assert_eq!(wire::read_hello(&mut s).unwrap(), TOKEN.as_bytes());
        wire::write_status(&mut s, true).unwrap();
        loop {
            match wire::read_entry(&mut s).unwrap() {
                Entry::End => break,
                Entry::File { size, .. } => {
                    std::io::copy(&mut (&mut s).take(size), &mut std::io::sink()).unwrap();
                }
                _ => {}
            }
        }
        let summary = liqo_mover::manifest::Summary {
            digest: [0xab; 32],
            files: 1,
            dirs: 0,
            symlinks: 0,
            bytes: 7,
            owners: true,
        };
        wire::write_reply(&mut s, &Reply::Done(summary)).unwrap();
        wire::read_ack(&mut s).unwrap()
    });
    let out = send(&src, port, TOKEN, &[]);
    let sout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert_eq!(fake.join().unwrap(), Ack::Mismatch);
    let lines: Vec<&str> = sout.lines().collect();
    assert_eq!(lines.len(), 2, "{sout}");
    assert!(lines[0].starts_with("manifest sha256=") && !lines[0].contains("abab"));
    assert_eq!(
        lines[1],
        format!(
            "mismatch receiver manifest sha256={} files=1 dirs=0 symlinks=0 bytes=7",
            "ab".repeat(32)
        )
    );
}
