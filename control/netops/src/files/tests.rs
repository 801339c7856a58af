use std::os::unix::fs::PermissionsExt;

use super::*;

#[test]
fn files_are_replaced_whole_and_secrets_are_0600() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/gateway.yaml");
    let d = write_config(&path, "peers: []\n").unwrap();
    assert_eq!(d, digest("peers: []\n"));
    assert_eq!(fs::read_to_string(&path).unwrap(), "peers: []\n");
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o600, 0o600);
    // Same text: not rewritten (same inode), same digest.
    let before = fs::metadata(&path).unwrap().modified().unwrap();
    let same = ensure_config(&path, "peers: []\n").unwrap();
    assert_eq!((same.digest.as_str(), same.written), (d.as_str(), false));
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), before);
    let other = ensure_config(&path, "peers: [x]\n").unwrap();
    assert!(other.written);
    assert_ne!(other.digest, d);
    let key = dir.path().join("private.key");
    write_atomic_mode(&key, b"secret\n", 0o600).unwrap();
    assert_eq!(
        fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let names: Vec<String> = fs::read_dir(dir.path().join("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["gateway.yaml"], "no temporary file left");
    let e = write_config(Path::new("/proc/nope/x.yaml"), "x").unwrap_err();
    assert!(e.to_string().contains("/proc/nope/x.yaml"), "{e}");
}

#[test]
fn status_urls_are_http_with_an_address() {
    let u: StatusUrl = "http://127.0.0.1:9107/status".parse().unwrap();
    assert_eq!(u.addr.port(), 9107);
    assert_eq!(u.path, "/status");
    assert_eq!(u.to_string(), "http://127.0.0.1:9107/status");
    let u: StatusUrl = "http://10.0.0.1:80".parse().unwrap();
    assert_eq!(u.path, "/status");
    for bad in [
        "https://127.0.0.1:1/status",
        "http://localhost:1/status",
        "127.0.0.1:1",
    ] {
        let e = bad.parse::<StatusUrl>().unwrap_err().to_string();
        assert!(e.contains(bad), "{e}");
    }
}
