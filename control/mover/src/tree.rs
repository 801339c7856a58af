//! The walk of a directory, the same on both sides (the sender's source, the receiver's re-read):
//! depth first, the names of each directory sorted by their bytes, a directory before what it
//! holds, symbolic links never followed. Only directories, regular files and symbolic links are
//! walked; anything else (fifo, socket, device) is an error naming it. A `lost+found` directory
//! right under the root is left out (the file system's, not the volume's data: a fresh ext4
//! volume has one on both sides).

use std::{
    fs::{File, Metadata, OpenOptions},
    io,
    os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use crate::paths::{PathError, RelPath};

/// The directory a file system keeps at its root, never copied.
pub const LOST_FOUND: &str = "lost+found";

/// What the walk could not read or refuses.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// lstat failed.
    #[error("reading the metadata of {path}")]
    Stat {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Listing a directory failed.
    #[error("listing the directory {path}")]
    List {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Opening a file failed.
    #[error("opening {path}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A file type that is not copied.
    #[error("{path} is a {kind}: only directories, regular files and symbolic links can be copied")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// A name that makes no valid relative path.
    #[error("a name in {dir}")]
    Name {
        /// The directory holding it.
        dir: PathBuf,
        /// Why.
        #[source]
        source: PathError,
    },
    /// A file replaced between its lstat and its open.
    #[error("{path} changed while it was read")]
    Changed {
        /// The file.
        path: PathBuf,
    },
}

/// What a walked entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
}

/// One walked entry.
#[derive(Debug)]
pub struct Node {
    /// Its path under the root.
    pub path: RelPath,
    /// The root joined with it.
    pub abs: PathBuf,
    /// What it is.
    pub kind: Kind,
    /// Its lstat.
    pub meta: Metadata,
}

/// The walk: an iterator of [`Node`]s; it ends after its first error.
pub struct Walk {
    root: PathBuf,
    stack: Vec<Step>,
}

/// What the walk does next.
enum Step {
    /// List a directory (`None`: the root) and visit what it holds.
    List(Option<RelPath>),
    /// Visit an entry.
    Visit(RelPath),
}

impl Walk {
    /// Walks what `root` holds (not `root` itself).
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
            stack: vec![Step::List(None)],
        }
    }

    /// The names in `dir`, sorted by their bytes, pushed to be visited in that order.
    fn list(&mut self, dir: Option<&RelPath>) -> Result<(), TreeError> {
        let abs = dir.map_or_else(|| self.root.clone(), |d| d.under(&self.root));
        let list_err = |source| TreeError::List {
            path: abs.clone(),
            source,
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&abs).map_err(list_err)? {
            let name = entry.map_err(list_err)?.file_name();
            if dir.is_none()
                && name == LOST_FOUND
                && std::fs::symlink_metadata(abs.join(&name)).is_ok_and(|m| m.is_dir())
            {
                tracing::debug!(dir = %abs.display(), "leaving out lost+found (the file system's)");
                continue;
            }
            names.push(
                RelPath::child(dir, &name).map_err(|source| TreeError::Name {
                    dir: abs.clone(),
                    source,
                })?,
            );
        }
        names.sort_unstable_by(|a, b| b.cmp(a));
        self.stack.extend(names.into_iter().map(Step::Visit));
        Ok(())
    }

    fn visit(&mut self, path: RelPath) -> Result<Node, TreeError> {
        let abs = path.under(&self.root);
        let meta = std::fs::symlink_metadata(&abs).map_err(|source| TreeError::Stat {
            path: abs.clone(),
            source,
        })?;
        let kind = kind_of(&abs, &meta)?;
        if kind == Kind::Dir {
            self.stack.push(Step::List(Some(path.clone())));
        }
        Ok(Node {
            path,
            abs,
            kind,
            meta,
        })
    }
}

impl Iterator for Walk {
    type Item = Result<Node, TreeError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let r = match self.stack.pop()? {
                Step::List(dir) => match self.list(dir.as_ref()) {
                    Ok(()) => continue,
                    Err(e) => Err(e),
                },
                Step::Visit(path) => self.visit(path),
            };
            if r.is_err() {
                self.stack.clear();
            }
            return Some(r);
        }
    }
}

/// What an lstat says a file is; an error for the types that are not copied.
pub fn kind_of(path: &Path, meta: &Metadata) -> Result<Kind, TreeError> {
    let t = meta.file_type();
    let unsupported = |kind| TreeError::Unsupported {
        path: path.to_owned(),
        kind,
    };
    if t.is_dir() {
        Ok(Kind::Dir)
    } else if t.is_file() {
        Ok(Kind::File)
    } else if t.is_symlink() {
        Ok(Kind::Symlink)
    } else if t.is_fifo() {
        Err(unsupported("fifo"))
    } else if t.is_socket() {
        Err(unsupported("socket"))
    } else if t.is_block_device() {
        Err(unsupported("block device"))
    } else if t.is_char_device() {
        Err(unsupported("character device"))
    } else {
        Err(unsupported("file of an unknown type"))
    }
}

/// Opens a walked regular file for reading without following a symbolic link, and checks it
/// is still the file the walk saw (a regular file, the same inode).
pub fn open_walked(node: &Node) -> Result<(File, Metadata), TreeError> {
    let open_err = |source| TreeError::Open {
        path: node.abs.clone(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(&node.abs)
        .map_err(open_err)?;
    let meta = file.metadata().map_err(open_err)?;
    if !meta.is_file() || meta.ino() != node.meta.ino() || meta.dev() != node.meta.dev() {
        return Err(TreeError::Changed {
            path: node.abs.clone(),
        });
    }
    Ok((file, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(root: &Path) -> Vec<(String, Kind)> {
        Walk::new(root)
            .map(|n| n.map(|n| (n.path.to_string(), n.kind)))
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn depth_first_sorted_directories_first_lost_found_left_out() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        for d in ["b/c", "a", "lost+found", "b/lost+found"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        for f in ["b/c/z", "b/a", "a-b", "b/c/y"] {
            std::fs::write(r.join(f), f).unwrap();
        }
        std::os::unix::fs::symlink("/nowhere", r.join("b/l")).unwrap();
        std::os::unix::fs::symlink("b", r.join("sl")).unwrap();
        assert_eq!(
            walk(r),
            [
                ("a", Kind::Dir),
                ("a-b", Kind::File),
                ("b", Kind::Dir),
                ("b/a", Kind::File),
                ("b/c", Kind::Dir),
                ("b/c/y", Kind::File),
                ("b/c/z", Kind::File),
                ("b/l", Kind::Symlink),
                ("b/lost+found", Kind::Dir),
                // Never followed: no sl/...
                ("sl", Kind::Symlink),
            ]
            .map(|(p, k)| (p.to_owned(), k))
        );
    }

    #[test]
    fn a_socket_is_an_error_naming_it_and_ends_the_walk() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        let sock = t.path().join("d/s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::fs::write(t.path().join("e"), "").unwrap();
        let all: Vec<_> = Walk::new(t.path()).collect();
        assert_eq!(all.len(), 2, "{all:?}");
        let err = all[1].as_ref().unwrap_err().to_string();
        assert!(
            err.contains(&sock.display().to_string()) && err.contains("socket"),
            "{err}"
        );
    }
}
