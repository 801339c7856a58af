//! Relative paths inside the copied directory: [`RelPath`] is the only form a path takes on the
//! wire and in the manifest, validated when built (never absolute, never empty, no `.` or `..`
//! component, no empty component, no NUL byte, at most [`MAX_PATH`] bytes). Paths are bytes
//! (Linux file names need not be UTF-8); [`escape`] renders them for logs and the manifest.

use std::{
    ffi::OsStr,
    fmt,
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
};

/// The longest relative path accepted (Linux's `PATH_MAX`).
pub const MAX_PATH: usize = 4096;

/// Why a relative path was refused; the path is named escaped.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    /// No bytes at all.
    #[error("an empty path")]
    Empty,
    /// Longer than [`MAX_PATH`].
    #[error("a path of {len} bytes (at most {MAX_PATH})")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// Starts with `/`.
    #[error("the absolute path {0}")]
    Absolute(String),
    /// A `..` component.
    #[error("the path {0} has a `..` component")]
    DotDot(String),
    /// A `.` or empty component (`a/./b`, `a//b`, `a/`).
    #[error("the path {0} has a `.` or empty component")]
    NotNormal(String),
    /// A NUL byte.
    #[error("the path {0} has a NUL byte")]
    Nul(String),
}

/// A validated path relative to the copied directory, `/`-separated.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath(Vec<u8>);

impl RelPath {
    /// Validates `bytes` as a relative path.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, PathError> {
        let bytes = bytes.into();
        if bytes.is_empty() {
            return Err(PathError::Empty);
        }
        if bytes.len() > MAX_PATH {
            return Err(PathError::TooLong { len: bytes.len() });
        }
        if bytes[0] == b'/' {
            return Err(PathError::Absolute(escape(&bytes)));
        }
        if bytes.contains(&0) {
            return Err(PathError::Nul(escape(&bytes)));
        }
        for component in bytes.split(|&b| b == b'/') {
            match component {
                b".." => return Err(PathError::DotDot(escape(&bytes))),
                b"" | b"." => return Err(PathError::NotNormal(escape(&bytes))),
                _ => {}
            }
        }
        Ok(Self(bytes))
    }

    /// This path with one more component, `name` (a file name read from a directory).
    pub fn child(parent: Option<&Self>, name: &OsStr) -> Result<Self, PathError> {
        let mut bytes = parent.map(|p| p.0.clone()).unwrap_or_default();
        if !bytes.is_empty() {
            bytes.push(b'/');
        }
        bytes.extend_from_slice(name.as_bytes());
        Self::new(bytes)
    }

    /// Its bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// As a [`Path`] (relative).
    pub fn as_path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.0))
    }

    /// `root` joined with this path.
    pub fn under(&self, root: &Path) -> PathBuf {
        root.join(self.as_path())
    }

    /// The directory holding it; `None` for a top-level entry (held by the root).
    pub fn parent(&self) -> Option<Self> {
        let cut = self.0.iter().rposition(|&b| b == b'/')?;
        Some(Self(self.0[..cut].to_vec()))
    }

    /// Whether it has a single component.
    pub fn is_top_level(&self) -> bool {
        !self.0.contains(&b'/')
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape(&self.0))
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RelPath({self})")
    }
}

/// `bytes` with every byte that is not printable ASCII, the space and `\` as `\xNN`: one word,
/// the same on every machine (the manifest's path column, log fields).
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_graphic() && b != b'\\' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_normal_relative_paths() {
        for ok in ["a", "a/b", "a/b.c/..d", ".hidden", "a/...", "x y/é"] {
            let p = RelPath::new(ok).unwrap();
            assert_eq!(p.as_bytes(), ok.as_bytes());
        }
    }

    #[test]
    fn refuses_escapes_and_odd_forms() {
        assert_eq!(RelPath::new(""), Err(PathError::Empty));
        assert_eq!(
            RelPath::new("/etc/passwd"),
            Err(PathError::Absolute("/etc/passwd".into()))
        );
        for bad in ["..", "../x", "a/..", "a/../../b"] {
            assert_eq!(
                RelPath::new(bad),
                Err(PathError::DotDot(bad.into())),
                "{bad}"
            );
        }
        for bad in [".", "./a", "a/./b", "a//b", "a/"] {
            assert_eq!(
                RelPath::new(bad),
                Err(PathError::NotNormal(bad.into())),
                "{bad}"
            );
        }
        assert_eq!(
            RelPath::new(b"a\0b".to_vec()),
            Err(PathError::Nul("a\\x00b".into()))
        );
        assert_eq!(
            RelPath::new(vec![b'a'; MAX_PATH + 1]),
            Err(PathError::TooLong { len: MAX_PATH + 1 })
        );
        assert!(RelPath::new(vec![b'a'; MAX_PATH]).is_ok());
    }

    #[test]
    fn error_names_the_path() {
        let e = RelPath::new("a/../b").unwrap_err().to_string();
        assert!(e.contains("a/../b"), "{e}");
    }

    #[test]
    fn parent_and_child() {
        let a = RelPath::child(None, OsStr::new("a")).unwrap();
        let ab = RelPath::child(Some(&a), OsStr::new("b")).unwrap();
        assert_eq!(ab.as_bytes(), b"a/b");
        assert_eq!(ab.parent(), Some(a.clone()));
        assert_eq!(a.parent(), None);
        assert!(a.is_top_level() && !ab.is_top_level());
        assert!(RelPath::child(Some(&a), OsStr::new("..")).is_err());
        assert_eq!(ab.under(Path::new("/r")), PathBuf::from("/r/a/b"));
    }

    #[test]
    fn escape_is_one_word() {
        assert_eq!(escape(b"a b\\c\n\xff"), "a\\x20b\\x5cc\\x0a\\xff");
        assert_eq!(escape("é".as_bytes()), "\\xc3\\xa9");
    }
}
