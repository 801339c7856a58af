//! A file's text against the key file on disk (a temporary directory, no root): kept, switched
//! to, or refused with the field named.

use std::{fs, os::unix::fs::PermissionsExt, path::Path};

use super::*;

/// A key file at `path` holding `key`, mode 0600 (written aside and renamed, as an operator
/// does).
fn write_key(path: &Path, key: &PrivateKey) {
    let tmp = path.with_extension("new");
    fs::write(&tmp, format!("{}\n", key.to_base64())).unwrap();
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600)).unwrap();
    fs::rename(&tmp, path).unwrap();
}

fn text(path: &Path, public_key: Option<PublicKey>, peer: PublicKey) -> String {
    let announced = public_key.map_or(String::new(), |k| format!("publicKey: {k}\n"));
    format!(
        "privateKeyFile: {}\n{announced}localPodCIDR: 10.200.0.0/16\npeers:\n  - id: milan\n    publicKey: {peer}\n    remotePodCIDR: 10.71.0.0/16\n    localPodCIDRAtPeer: 10.50.0.0/16\n",
        path.display()
    )
}

#[test]
fn the_key_file_is_read_at_every_apply_and_checked_against_public_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("private.key");
    let (a, b) = (
        PrivateKey::generate().unwrap(),
        PrivateKey::generate().unwrap(),
    );
    let theirs = PrivateKey::generate().unwrap().public();
    write_key(&path, &a);
    let running = File::parse(&text(&path, None, theirs))
        .unwrap()
        .validate(None)
        .unwrap();

    // The running key in the file, announced or not: kept.
    for announced in [None, Some(a.public())] {
        let d = desired(&text(&path, announced, theirs), &running, a.public()).unwrap();
        assert!(matches!(d.key, KeyChange::Keep), "{d:?}");
        assert_eq!(d.cfg.public_key, announced);
    }

    // The new key announced before its file is written: refused, naming both public keys.
    let announce_b = text(&path, Some(b.public()), theirs);
    let e = desired(&announce_b, &running, a.public()).unwrap_err();
    assert_eq!(e.field, "publicKey");
    assert_eq!(
        e.problem,
        format!(
            "privateKeyFile {} holds the key of public key {}, publicKey is {}",
            path.display(),
            a.public(),
            b.public()
        )
    );

    // Written: the same text now switches to it.
    write_key(&path, &b);
    let d = desired(&announce_b, &running, a.public()).unwrap();
    match &d.key {
        KeyChange::Switch(k) => assert_eq!(k.public(), b.public()),
        KeyChange::Keep => panic!("kept the old key"),
    }
    // Without publicKey the file's key is taken as it is.
    let d = desired(&text(&path, None, theirs), &running, a.public()).unwrap();
    assert!(matches!(&d.key, KeyChange::Switch(k) if k.public() == b.public()));

    // A peer with the key that will run is refused (the new one, not the running one).
    let e = desired(&text(&path, None, b.public()), &running, a.public()).unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.problem.as_str()),
        ("peers[0].publicKey", "is this gateway's own public key")
    );
    assert!(desired(&text(&path, None, a.public()), &running, a.public()).is_ok());

    // A file others can read, an invalid one, a missing one: refused naming privateKeyFile.
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let e = desired(&text(&path, None, theirs), &running, a.public()).unwrap_err();
    assert_eq!(e.field, "privateKeyFile", "{e}");
    assert!(e.problem.contains("chmod 600"), "{e}");
    fs::write(&path, "garbage\n").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    let e = desired(&text(&path, None, theirs), &running, a.public()).unwrap_err();
    assert_eq!(e.field, "privateKeyFile", "{e}");
    assert!(!e.problem.contains("garbage"), "{e}");
    fs::remove_file(&path).unwrap();
    let e = desired(&announce_b, &running, a.public()).unwrap_err();
    assert_eq!(e.field, "privateKeyFile", "{e}");
    assert!(e.problem.contains("No such file"), "{e}");
    assert!(!path.exists(), "only the start creates a missing key file");

    // Another file: refused as a field that cannot change, before it is read.
    let other = dir.path().join("other.key");
    let e = desired(&text(&other, None, theirs), &running, a.public()).unwrap_err();
    assert_eq!(e.field, "privateKeyFile");
    assert!(e.problem.contains("while running"), "{e}");
}
