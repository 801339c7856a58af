//! Kernel parameters under `/proc/sys`. Network parameters are per namespace: call these from
//! [`crate::netns::Netns::run`] to act on a namespace other than the caller's.

use std::{fs, io, path::PathBuf};

/// What went wrong with a sysctl.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key is not a well-formed sysctl name.
    #[error("invalid sysctl key {0:?}")]
    BadKey(String),
    /// Reading or writing failed.
    #[error("{op} sysctl {key}")]
    Io {
        /// "reading" or "writing".
        op: &'static str,
        /// The key.
        key: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

fn path(key: &str) -> Result<PathBuf, Error> {
    let ok = !key.is_empty()
        && key.split('.').all(|part| !part.is_empty())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !ok {
        return Err(Error::BadKey(key.into()));
    }
    Ok(PathBuf::from("/proc/sys").join(key.replace('.', "/")))
}

/// Sets `key` (`net.ipv4.ip_forward`) to `value` in the calling thread's namespace.
pub fn set(key: &str, value: &str) -> Result<(), Error> {
    fs::write(path(key)?, value).map_err(|source| Error::Io {
        op: "writing",
        key: key.into(),
        source,
    })
}

/// Reads `key`, trimmed.
pub fn get(key: &str) -> Result<String, Error> {
    fs::read_to_string(path(key)?)
        .map(|s| s.trim().to_owned())
        .map_err(|source| Error::Io {
            op: "reading",
            key: key.into(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_validated() {
        assert_eq!(
            path("net.ipv4.ip_forward").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/ip_forward")
        );
        assert!(matches!(path("net..x"), Err(Error::BadKey(_))));
        assert!(matches!(path("../../etc/passwd"), Err(Error::BadKey(_))));
        assert!(matches!(path(""), Err(Error::BadKey(_))));
    }
}
