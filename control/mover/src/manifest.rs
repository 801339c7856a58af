//! The manifest: one line per entry, the root (`.`) first and then sorted by the path's bytes,
//!
//! ```text
//! <d|f|l> <path> <mode octal> <uid> <gid> <size> <sha256 hex of the content, or of the link target>
//! ```
//!
//! (a directory's size is 0 and its hash `-`; a symbolic link's mode is always `777`; the path
//! as [`crate::paths::escape`] writes it; uid and gid `-` when owners are not kept), and its
//! digest: the sha256 of the lines, each ending in `\n`. Modification times are not in it.
//! [`scan`] makes it by reading a tree from disk (the receiver, after everything is synced).

use std::{
    fs::Metadata,
    io::{self, Read},
    os::unix::{ffi::OsStrExt, fs::MetadataExt},
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};

use crate::{
    paths::RelPath,
    tree::{self, Kind, TreeError, Walk},
};

/// What reading a tree for its manifest failed on.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The walk failed.
    #[error("walking the tree")]
    Walk(#[from] TreeError),
    /// Reading a file or a link failed.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// One entry of the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    kind: Kind,
    /// `None`: the root.
    path: Option<RelPath>,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    hash: Option<[u8; 32]>,
}

impl Record {
    /// The root directory.
    pub fn root(meta: &Metadata) -> Self {
        Self::attrs(Kind::Dir, None, meta, 0, None)
    }

    /// A directory.
    pub fn dir(path: RelPath, meta: &Metadata) -> Self {
        Self::attrs(Kind::Dir, Some(path), meta, 0, None)
    }

    /// A regular file of `size` bytes whose content's sha256 is `hash`.
    pub fn file(path: RelPath, meta: &Metadata, size: u64, hash: [u8; 32]) -> Self {
        Self::attrs(Kind::File, Some(path), meta, size, Some(hash))
    }

    /// A symbolic link to `target`.
    pub fn symlink(path: RelPath, meta: &Metadata, target: &[u8]) -> Self {
        Self {
            kind: Kind::Symlink,
            path: Some(path),
            mode: 0o777,
            uid: meta.uid(),
            gid: meta.gid(),
            size: target.len() as u64,
            hash: Some(Sha256::digest(target).into()),
        }
    }

    fn attrs(
        kind: Kind,
        path: Option<RelPath>,
        meta: &Metadata,
        size: u64,
        hash: Option<[u8; 32]>,
    ) -> Self {
        Self {
            kind,
            path,
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
            size,
            hash,
        }
    }

    fn line(&self, owners: bool) -> String {
        let kind = match self.kind {
            Kind::Dir => 'd',
            Kind::File => 'f',
            Kind::Symlink => 'l',
        };
        let path = self
            .path
            .as_ref()
            .map_or_else(|| ".".into(), |p| p.to_string());
        let (uid, gid) = if owners {
            (self.uid.to_string(), self.gid.to_string())
        } else {
            ("-".into(), "-".into())
        };
        let hash = self.hash.map_or_else(|| "-".into(), hex::encode);
        format!(
            "{kind} {path} {:o} {uid} {gid} {} {hash}",
            self.mode, self.size
        )
    }
}

/// A tree's manifest being made.
#[derive(Clone, Debug, Default)]
pub struct Manifest {
    records: Vec<Record>,
}

/// A manifest's digest and counts: what the two sides compare and print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The sha256 of the lines.
    pub digest: [u8; 32],
    /// Regular files.
    pub files: u64,
    /// Directories under the root (the root not counted).
    pub dirs: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// The regular files' bytes.
    pub bytes: u64,
    /// Whether uid and gid are in the lines.
    pub owners: bool,
}

impl Summary {
    /// `manifest sha256=<64 hex> files=<n> dirs=<n> symlinks=<n> bytes=<n>`.
    pub fn line(&self) -> String {
        format!(
            "manifest sha256={} files={} dirs={} symlinks={} bytes={}",
            hex::encode(self.digest),
            self.files,
            self.dirs,
            self.symlinks,
            self.bytes
        )
    }

    /// Whether `other` describes the same tree.
    pub fn same(&self, other: &Self) -> bool {
        let counts = |s: &Self| (s.digest, s.files, s.dirs, s.symlinks, s.bytes);
        counts(self) == counts(other)
    }
}

impl Manifest {
    /// Adds an entry.
    pub fn push(&mut self, record: Record) {
        self.records.push(record);
    }

    /// The lines, sorted (`owners`: with uid and gid).
    pub fn lines(&self, owners: bool) -> Vec<String> {
        let mut sorted: Vec<&Record> = self.records.iter().collect();
        sorted.sort_by(|a, b| a.path.cmp(&b.path));
        sorted.iter().map(|r| r.line(owners)).collect()
    }

    /// The digest and the counts.
    pub fn summary(&self, owners: bool) -> Summary {
        let mut h = Sha256::new();
        for line in self.lines(owners) {
            h.update(line.as_bytes());
            h.update(b"\n");
        }
        let count = |k| self.records.iter().filter(|r| r.kind == k).count() as u64;
        Summary {
            digest: h.finalize().into(),
            files: count(Kind::File),
            dirs: self
                .records
                .iter()
                .filter(|r| r.kind == Kind::Dir && r.path.is_some())
                .count() as u64,
            symlinks: count(Kind::Symlink),
            bytes: self
                .records
                .iter()
                .filter(|r| r.kind == Kind::File)
                .map(|r| r.size)
                .sum(),
            owners,
        }
    }
}

/// The manifest of the tree at `root`, read from disk (every file's content hashed).
pub fn scan(root: &Path) -> Result<Manifest, ManifestError> {
    let read_err = |path: &Path| {
        let path = path.to_owned();
        move |source| ManifestError::Read { path, source }
    };
    let mut m = Manifest::default();
    m.push(Record::root(
        &std::fs::metadata(root).map_err(read_err(root))?,
    ));
    for node in Walk::new(root) {
        let node = node?;
        let record = match node.kind {
            Kind::Dir => Record::dir(node.path, &node.meta),
            Kind::Symlink => {
                let target = std::fs::read_link(&node.abs).map_err(read_err(&node.abs))?;
                Record::symlink(node.path, &node.meta, target.as_os_str().as_bytes())
            }
            Kind::File => {
                let (mut file, meta) = tree::open_walked(&node)?;
                let (size, hash) = hash_all(&mut file).map_err(read_err(&node.abs))?;
                Record::file(node.path, &meta, size, hash)
            }
        };
        m.push(record);
    }
    Ok(m)
}

/// The length and sha256 of everything `r` gives.
fn hash_all(r: &mut impl Read) -> io::Result<(u64, [u8; 32])> {
    let mut h = Sha256::new();
    let mut buf = vec![0; 256 * 1024];
    let mut size = 0;
    loop {
        match r.read(&mut buf) {
            Ok(0) => return Ok((size, h.finalize().into())),
            Ok(n) => {
                h.update(&buf[..n]);
                size += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn lines_sorted_root_first_with_hashes() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir(r.join("d")).unwrap();
        std::fs::write(r.join("d/f x"), "abc").unwrap();
        std::fs::set_permissions(r.join("d/f x"), std::fs::Permissions::from_mode(0o640)).unwrap();
        std::fs::write(r.join("-a"), "").unwrap();
        std::os::unix::fs::symlink("d/f x", r.join("l")).unwrap();
        let m = scan(r).unwrap();
        let meta = std::fs::metadata(r).unwrap();
        let (uid, gid) = (meta.uid(), meta.gid());
        let empty = hex::encode(Sha256::digest(b""));
        let abc = hex::encode(Sha256::digest(b"abc"));
        let target = hex::encode(Sha256::digest(b"d/f x"));
        let lines = m.lines(true);
        assert_eq!(
            lines,
            [
                format!("d . {:o} {uid} {gid} 0 -", meta.mode() & 0o7777),
                format!(
                    "f -a {:o} {uid} {gid} 0 {empty}",
                    std::fs::metadata(r.join("-a")).unwrap().mode() & 0o7777
                ),
                format!(
                    "d d {:o} {uid} {gid} 0 -",
                    std::fs::metadata(r.join("d")).unwrap().mode() & 0o7777
                ),
                format!("f d/f\\x20x 640 {uid} {gid} 3 {abc}"),
                format!("l l 777 {uid} {gid} 5 {target}"),
            ]
        );
        assert!(m.lines(false)[3].starts_with("f d/f\\x20x 640 - - 3 "));
        let s = m.summary(true);
        assert_eq!((s.files, s.dirs, s.symlinks, s.bytes), (2, 1, 1, 3));
        let mut h = Sha256::new();
        for l in &lines {
            h.update(format!("{l}\n"));
        }
        assert_eq!(s.digest, <[u8; 32]>::from(h.finalize()));
        assert_ne!(s.digest, m.summary(false).digest);
        assert!(s.line().starts_with(&format!(
            "manifest sha256={} files=2 dirs=1 symlinks=1 bytes=3",
            hex::encode(s.digest)
        )));
        // One byte of content changed: another digest.
        std::fs::write(r.join("d/f x"), "abd").unwrap();
        assert!(!scan(r).unwrap().summary(true).same(&s));
    }
}
