//! The receiver's writing of the entries it reads into its (empty) directory: every path
//! validated when decoded ([`crate::wire::read_entry`]), an entry's parent a directory this
//! stream created (or the root), nothing created over anything (`mkdir`, `O_CREAT|O_EXCL` with
//! `O_NOFOLLOW`, `symlink`: each fails on an existing name, a symbolic link included), so no
//! write ever goes through a symbolic link. A file is written, given its owner, then its mode
//! (after the owner: a chown clears set-user-ID), its modification time, and synced; the
//! directories get theirs after everything, deepest first, and are synced; the root last.

use std::{
    collections::HashSet,
    fs::{File, OpenOptions, Permissions},
    io::{self, Read, Write},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use crate::{
    paths::RelPath,
    wire::{self, Attrs, Entry, WireError},
};

/// Why writing the received tree failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Reading or decoding the stream failed.
    #[error("reading the sender's stream")]
    Wire(#[from] WireError),
    /// The stream did not start with the root's entry.
    #[error("the stream did not start with the root directory's entry")]
    FirstNotRoot,
    /// A second root entry.
    #[error("a second root directory entry")]
    SecondRoot,
    /// An entry whose parent is not a directory of this stream.
    #[error("the parent of {0} is not a directory received before it")]
    Parent(RelPath),
    /// Creating a directory, file or link failed (an existing name included).
    #[error("creating {path}")]
    Create {
        /// What.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Writing a file failed.
    #[error("writing {path}")]
    Write {
        /// What.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The stream ended inside a file's content.
    #[error("the stream ended inside {path}: {got} of {size} bytes")]
    Short {
        /// What.
        path: PathBuf,
        /// The announced size.
        size: u64,
        /// What came.
        got: u64,
    },
    /// chown refused for lack of privilege.
    #[error(
        "setting the owner of {path} to {uid}:{gid} is not permitted (not root?); \
         --no-owner keeps the receiver's own"
    )]
    OwnerNotPermitted {
        /// What.
        path: PathBuf,
        /// The owner.
        uid: u32,
        /// The group.
        gid: u32,
    },
    /// chown failed otherwise.
    #[error("setting the owner of {path} to {uid}:{gid}")]
    Owner {
        /// What.
        path: PathBuf,
        /// The owner.
        uid: u32,
        /// The group.
        gid: u32,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Setting the mode or the modification time, or syncing, failed.
    #[error("setting the mode and modification time of {path} and syncing it")]
    Finish {
        /// What.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// What was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Entries (the root not counted).
    pub entries: u64,
    /// File content bytes.
    pub bytes: u64,
}

/// Reads entries from `r` up to the end entry and writes them under `root`, which must be
/// empty (the caller checked); `owners`: chown every entry to the sender's owner.
pub fn apply(r: &mut impl Read, root: &Path, owners: bool) -> Result<Applied, ApplyError> {
    let Entry::Root(root_attrs) = wire::read_entry(r)? else {
        return Err(ApplyError::FirstNotRoot);
    };
    let mut created: HashSet<RelPath> = HashSet::new();
    let mut dirs: Vec<(PathBuf, Attrs)> = Vec::new();
    let mut applied = Applied::default();
    let mut buf = vec![0; 256 * 1024];
    loop {
        let entry = wire::read_entry(r)?;
        let path = match &entry {
            Entry::End => break,
            Entry::Root(_) => return Err(ApplyError::SecondRoot),
            Entry::Dir { path, .. } | Entry::File { path, .. } | Entry::Symlink { path, .. } => {
                path
            }
        };
        if let Some(parent) = path.parent()
            && !created.contains(&parent)
        {
            return Err(ApplyError::Parent(path.clone()));
        }
        let abs = path.under(root);
        let create_err = |source| ApplyError::Create {
            path: abs.clone(),
            source,
        };
        applied.entries += 1;
        match entry {
            Entry::Dir { path, attrs } => {
                std::fs::create_dir(&abs).map_err(create_err)?;
                created.insert(path);
                dirs.push((abs, attrs));
            }
            Entry::Symlink {
                target, uid, gid, ..
            } => {
                let target = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&target);
                std::os::unix::fs::symlink(target, &abs).map_err(create_err)?;
                if owners {
                    std::os::unix::fs::lchown(&abs, Some(uid), Some(gid))
                        .map_err(|e| owner_err(&abs, uid, gid, e))?;
                }
            }
            Entry::File { attrs, size, .. } => {
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY)
                    .open(&abs)
                    .map_err(create_err)?;
                copy_exactly(r, &mut file, size, &abs, &mut buf)?;
                applied.bytes += size;
                finish(&file, &abs, &attrs, owners)?;
            }
            Entry::End | Entry::Root(_) => unreachable!("handled above"),
        }
    }
    for (abs, attrs) in dirs.iter().rev() {
        finish(&open_dir(abs, libc::O_NOFOLLOW)?, abs, attrs, owners)?;
    }
    // The root as given (it may be reached through a symbolic link).
    finish(&open_dir(root, 0)?, root, &root_attrs, owners)?;
    Ok(applied)
}

/// Copies exactly `size` bytes of `r` into `file`.
fn copy_exactly(
    r: &mut impl Read,
    file: &mut File,
    size: u64,
    abs: &Path,
    buf: &mut [u8],
) -> Result<(), ApplyError> {
    let mut got = 0u64;
    while got < size {
        let want = usize::try_from(size - got).map_or(buf.len(), |left| left.min(buf.len()));
        let n = match r.read(&mut buf[..want]) {
            Ok(0) => {
                return Err(ApplyError::Short {
                    path: abs.to_owned(),
                    size,
                    got,
                });
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(WireError::Io(e).into()),
        };
        file.write_all(&buf[..n])
            .map_err(|source| ApplyError::Write {
                path: abs.to_owned(),
                source,
            })?;
        got += n as u64;
    }
    Ok(())
}

/// Opens a directory this stream created (or the root) for its attributes and its sync.
fn open_dir(abs: &Path, flags: i32) -> Result<File, ApplyError> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | flags)
        .open(abs)
        .map_err(|source| ApplyError::Finish {
            path: abs.to_owned(),
            source,
        })
}

/// Owner (with `owners`), then mode, modification time and sync.
fn finish(file: &File, abs: &Path, attrs: &Attrs, owners: bool) -> Result<(), ApplyError> {
    if owners {
        std::os::unix::fs::fchown(file, Some(attrs.uid), Some(attrs.gid))
            .map_err(|e| owner_err(abs, attrs.uid, attrs.gid, e))?;
    }
    file.set_permissions(Permissions::from_mode(attrs.mode))
        .and_then(|()| file.set_modified(attrs.mtime.to_system()))
        .and_then(|()| file.sync_all())
        .map_err(|source| ApplyError::Finish {
            path: abs.to_owned(),
            source,
        })
}

fn owner_err(abs: &Path, uid: u32, gid: u32, e: io::Error) -> ApplyError {
    if e.raw_os_error() == Some(libc::EPERM) {
        ApplyError::OwnerNotPermitted {
            path: abs.to_owned(),
            uid,
            gid,
        }
    } else {
        ApplyError::Owner {
            path: abs.to_owned(),
            uid,
            gid,
            source: e,
        }
    }
}

#[cfg(test)]
mod tests;
