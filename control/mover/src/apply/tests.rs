use std::{
    os::unix::fs::MetadataExt,
    time::{Duration, UNIX_EPOCH},
};

use super::*;
use crate::{paths::PathError, wire::Mtime};

fn attrs(mode: u32, secs: i64) -> Attrs {
    let me = std::fs::metadata("/proc/self").unwrap();
    Attrs {
        mode,
        uid: me.uid(),
        gid: me.gid(),
        mtime: Mtime { secs, nanos: 500 },
    }
}

fn p(s: &str) -> RelPath {
    RelPath::new(s).unwrap()
}

/// A stream of `entries`, each file's content `content` (its size from the entry).
fn stream(entries: &[Entry], content: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    for e in entries {
        wire::write_entry(&mut buf, e).unwrap();
        if let Entry::File { size, .. } = e {
            buf.extend_from_slice(&content[..usize::try_from(*size).unwrap()]);
        }
    }
    buf
}

fn dirs() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    (t, root)
}

#[test]
fn writes_a_tree_with_modes_times_and_links() {
    let (_t, root) = dirs();
    let s = stream(
        &[
            Entry::Root(attrs(0o750, 100)),
            Entry::Dir {
                path: p("a"),
                attrs: attrs(0o500, 200),
            },
            Entry::File {
                path: p("a/f"),
                attrs: attrs(0o4640, 300),
                size: 5,
            },
            Entry::Symlink {
                path: p("a/l"),
                target: b"../../../etc/passwd".to_vec(),
                uid: attrs(0, 0).uid,
                gid: attrs(0, 0).gid,
            },
            Entry::End,
        ],
        b"hello",
    );
    let applied = apply(&mut s.as_slice(), &root, true).unwrap();
    assert_eq!(
        applied,
        Applied {
            entries: 3,
            bytes: 5
        }
    );
    assert_eq!(std::fs::read(root.join("a/f")).unwrap(), b"hello");
    let mode = |q: &str| std::fs::symlink_metadata(root.join(q)).unwrap().mode() & 0o7777;
    assert_eq!((mode(""), mode("a"), mode("a/f")), (0o750, 0o500, 0o4640));
    let mtime = |q: &str| std::fs::metadata(root.join(q)).unwrap().modified().unwrap();
    // The directories' times set after what they hold.
    assert_eq!(mtime("a"), UNIX_EPOCH + Duration::new(200, 500));
    assert_eq!(mtime(""), UNIX_EPOCH + Duration::new(100, 500));
    assert_eq!(mtime("a/f"), UNIX_EPOCH + Duration::new(300, 500));
    assert_eq!(
        std::fs::read_link(root.join("a/l")).unwrap(),
        Path::new("../../../etc/passwd")
    );
    // So that the temporary directory can be removed without root too.
    std::fs::set_permissions(root.join("a"), Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_dot_dot_path_is_refused_and_nothing_is_written_outside() {
    let (t, root) = dirs();
    let mut s = stream(&[Entry::Root(attrs(0o755, 0))], b"");
    let evil = b"../evil";
    s.push(b'F');
    s.extend_from_slice(&u16::try_from(evil.len()).unwrap().to_be_bytes());
    s.extend_from_slice(evil);
    s.extend_from_slice(&[0; 64]);
    let err = apply(&mut s.as_slice(), &root, false).unwrap_err();
    assert!(
        matches!(&err, ApplyError::Wire(WireError::Path(PathError::DotDot(p))) if p == "../evil"),
        "{err:?}"
    );
    assert!(!t.path().join("evil").exists());
}

#[test]
fn never_writes_through_a_received_symlink() {
    let (t, root) = dirs();
    let outside = t.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let a = attrs(0o644, 0);
    let s = stream(
        &[
            Entry::Root(attrs(0o755, 0)),
            Entry::Symlink {
                path: p("a"),
                target: outside.to_str().unwrap().as_bytes().to_vec(),
                uid: a.uid,
                gid: a.gid,
            },
            Entry::File {
                path: p("a/f"),
                attrs: a,
                size: 1,
            },
            Entry::End,
        ],
        b"x",
    );
    let err = apply(&mut s.as_slice(), &root, false).unwrap_err();
    assert!(
        matches!(&err, ApplyError::Parent(q) if q == &p("a/f")),
        "{err:?}"
    );
    assert!(err.to_string().contains("a/f"), "{err}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}

#[test]
fn an_existing_name_is_never_overwritten() {
    let (_t, root) = dirs();
    let f = Entry::File {
        path: p("f"),
        attrs: attrs(0o644, 0),
        size: 1,
    };
    let s = stream(&[Entry::Root(attrs(0o755, 0)), f.clone(), f], b"x");
    let err = apply(&mut s.as_slice(), &root, false).unwrap_err();
    assert!(
        matches!(&err, ApplyError::Create { path, source }
            if path == &root.join("f") && source.kind() == io::ErrorKind::AlreadyExists),
        "{err:?}"
    );
}

#[test]
fn a_stream_must_start_with_the_root_and_not_end_inside_a_file() {
    let (_t, root) = dirs();
    let s = stream(&[Entry::End], b"");
    assert!(matches!(
        apply(&mut s.as_slice(), &root, false),
        Err(ApplyError::FirstNotRoot)
    ));
    let s = stream(
        &[
            Entry::Root(attrs(0o755, 0)),
            Entry::File {
                path: p("f"),
                attrs: attrs(0o644, 0),
                size: 3,
            },
        ],
        b"abc",
    );
    let cut = &s[..s.len() - 2];
    let err = apply(&mut &cut[..], &root, false).unwrap_err();
    assert!(
        matches!(
            err,
            ApplyError::Short {
                size: 3,
                got: 1,
                ..
            }
        ),
        "{err:?}"
    );
}
