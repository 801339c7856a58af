use std::time::{Duration, UNIX_EPOCH};

use super::{session::MAX_MESSAGE, *};
use crate::manifest::Summary;

fn attrs() -> Attrs {
    Attrs {
        mode: 0o4755,
        uid: 1234,
        gid: 5678,
        mtime: Mtime {
            secs: -5,
            nanos: 999_999_999,
        },
    }
}

fn round_trip(e: &Entry) -> Entry {
    let mut buf = Vec::new();
    write_entry(&mut buf, e).unwrap();
    let mut r = buf.as_slice();
    let back = read_entry(&mut r).unwrap();
    assert!(r.is_empty(), "{e:?}: {} bytes left", r.len());
    back
}

#[test]
fn entries_round_trip() {
    let p = RelPath::new("a/b c").unwrap();
    for e in [
        Entry::Root(attrs()),
        Entry::Dir {
            path: p.clone(),
            attrs: attrs(),
        },
        Entry::File {
            path: p.clone(),
            attrs: attrs(),
            size: u64::MAX,
        },
        Entry::Symlink {
            path: p,
            target: b"../../etc/passwd".to_vec(),
            uid: 1,
            gid: u32::MAX,
        },
        Entry::End,
    ] {
        assert_eq!(round_trip(&e), e);
    }
}

#[test]
fn the_file_header_is_big_endian() {
    let mut buf = Vec::new();
    let e = Entry::File {
        path: RelPath::new("f").unwrap(),
        attrs: attrs(),
        size: 0x0102,
    };
    write_entry(&mut buf, &e).unwrap();
    assert_eq!(&buf[..4], b"F\x00\x01f");
    assert_eq!(&buf[4..8], &0o4755u32.to_be_bytes());
    assert_eq!(&buf[buf.len() - 8..], &[0, 0, 0, 0, 0, 0, 1, 2]);
}

#[test]
fn a_dot_dot_path_is_refused_when_decoded() {
    for bad in [&b"../x"[..], b"a/../../b", b"/etc/x", b"a//b"] {
        let mut buf = vec![TAG_FILE];
        buf.extend_from_slice(&u16::try_from(bad.len()).unwrap().to_be_bytes());
        buf.extend_from_slice(bad);
        let err = read_entry(&mut buf.as_slice()).unwrap_err();
        assert!(matches!(err, WireError::Path(_)), "{err:?}");
        let chain = std::error::Error::source(&err).unwrap().to_string();
        assert!(chain.contains(std::str::from_utf8(bad).unwrap()), "{chain}");
    }
    // An empty path: its length is refused.
    let err = read_entry(&mut [TAG_DIR, 0, 0].as_slice()).unwrap_err();
    assert!(
        matches!(err, WireError::BadLength { len: 0, .. }),
        "{err:?}"
    );
}

#[test]
fn refuses_bad_fields() {
    let mut buf = Vec::new();
    write_entry(&mut buf, &Entry::Root(attrs())).unwrap();
    buf[1..5].copy_from_slice(&0o10000u32.to_be_bytes());
    assert!(matches!(
        read_entry(&mut buf.as_slice()),
        Err(WireError::BadValue { what: "mode", .. })
    ));
    assert!(matches!(
        read_entry(&mut [b'?'].as_slice()),
        Err(WireError::UnknownTag { tag: b'?', .. })
    ));
    // A stream that ends inside a frame.
    assert!(matches!(
        read_entry(&mut [TAG_DIR, 0, 5, b'a'].as_slice()),
        Err(WireError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof
    ));
}

#[test]
fn hello_round_trips_and_checks_the_magic() {
    let token = [7u8; 40];
    let mut buf = Vec::new();
    write_hello(&mut buf, &token).unwrap();
    assert_eq!(&buf[..8], b"LIQOMOV1");
    assert_eq!(&buf[8..10], &[0, 40]);
    assert_eq!(read_hello(&mut buf.as_slice()).unwrap(), token);
    buf[0] = b'X';
    assert!(matches!(
        read_hello(&mut buf.as_slice()),
        Err(WireError::BadMagic)
    ));
    assert!(write_hello(&mut Vec::new(), &[1; MAX_TOKEN + 1]).is_err());
}

#[test]
fn replies_and_acks_round_trip() {
    let s = Summary {
        digest: [9; 32],
        files: 3,
        dirs: 2,
        symlinks: 1,
        bytes: 5 << 20,
        owners: false,
    };
    for reply in [Reply::Done(s), Reply::Failed("é".repeat(3000))] {
        let mut buf = Vec::new();
        write_reply(&mut buf, &reply).unwrap();
        let back = read_reply(&mut buf.as_slice()).unwrap();
        match (&reply, &back) {
            (Reply::Failed(a), Reply::Failed(b)) => {
                assert!(a.starts_with(b.as_str()) && b.len() <= MAX_MESSAGE)
            }
            _ => assert_eq!(back, reply),
        }
    }
    for ack in [Ack::Verified, Ack::Mismatch] {
        let mut buf = Vec::new();
        write_ack(&mut buf, ack).unwrap();
        assert_eq!(read_ack(&mut buf.as_slice()).unwrap(), ack);
    }
    let mut buf = Vec::new();
    write_status(&mut buf, false).unwrap();
    write_status(&mut buf, true).unwrap();
    let mut r = buf.as_slice();
    assert!(!read_status(&mut r).unwrap());
    assert!(read_status(&mut r).unwrap());
}

#[test]
fn mtime_round_trips_before_and_after_the_epoch() {
    for t in [
        UNIX_EPOCH + Duration::new(1_700_000_000, 123),
        UNIX_EPOCH - Duration::new(5, 1),
        UNIX_EPOCH - Duration::from_secs(5),
        UNIX_EPOCH,
    ] {
        let m = Mtime::from_system(t);
        assert!(m.nanos < 1_000_000_000);
        assert_eq!(m.to_system(), t);
    }
    assert_eq!(
        Mtime::from_system(UNIX_EPOCH - Duration::new(5, 1)),
        Mtime {
            secs: -6,
            nanos: 999_999_999
        }
    );
}
