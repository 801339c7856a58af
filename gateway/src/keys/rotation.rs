//! Which key a running gateway uses after an apply: a pure decision (no I/O) on the key file as
//! read at apply time, the running key, and the public key the configuration says the file holds
//! (`publicKey`).
//!
//! The file's key runs when it can be read and, if `publicKey` is set, matches it; otherwise the
//! configuration is refused (naming `privateKeyFile` or `publicKey`) and the running key stays.
//! A key different from the running one is switched to live (`wg::Device::set_key`).

use std::path::Path;

use liqo_types::field::bad;

use super::{KeyFileError, PrivateKey, PublicKey};
use crate::config::ConfigError;

/// What an apply does with the key.
#[derive(Debug)]
pub enum KeyChange {
    /// The file holds the running key.
    Keep,
    /// The file holds another key: the gateway switches to it.
    Switch(PrivateKey),
}

impl KeyChange {
    /// The public key that runs after the apply (`running` if kept).
    pub fn public(&self, running: PublicKey) -> PublicKey {
        match self {
            KeyChange::Keep => running,
            KeyChange::Switch(k) => k.public(),
        }
    }
}

/// The decision on `file` (the key file at `path`, as read now) for a gateway running the key
/// of public key `running`, with `expected` the configuration's `publicKey`.
pub fn key_change(
    path: &Path,
    running: PublicKey,
    file: Result<PrivateKey, KeyFileError>,
    expected: Option<PublicKey>,
) -> Result<KeyChange, ConfigError> {
    let key = file.map_err(|e| {
        bad(
            "privateKeyFile",
            format!(
                "{}; the running key (public key {running}) is kept",
                liqo_types::chain(&e)
            ),
        )
    })?;
    expected_key(path, &key, expected)?;
    Ok(if key.public() == running {
        KeyChange::Keep
    } else {
        KeyChange::Switch(key)
    })
}

/// Refuses `key` (read from `path`) if the configuration's `publicKey` (`expected`) is set and
/// is not its public key.
pub fn expected_key(
    path: &Path,
    key: &PrivateKey,
    expected: Option<PublicKey>,
) -> Result<(), ConfigError> {
    match expected {
        Some(want) if want != key.public() => Err(bad(
            "publicKey",
            format!(
                "privateKeyFile {} holds the key of public key {}, publicKey is {want}",
                path.display(),
                key.public()
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    fn path() -> &'static Path {
        Path::new("/var/lib/liqo-gateway/private.key")
    }

    fn keys() -> (PrivateKey, PrivateKey) {
        (
            PrivateKey::generate().unwrap(),
            PrivateKey::generate().unwrap(),
        )
    }

    #[test]
    fn the_running_key_in_the_file_is_kept() {
        let (a, _) = keys();
        for expected in [None, Some(a.public())] {
            let d = key_change(path(), a.public(), Ok(a.clone()), expected).unwrap();
            assert!(matches!(d, KeyChange::Keep), "{d:?}");
            assert_eq!(d.public(a.public()), a.public());
        }
    }

    #[test]
    fn another_key_in_the_file_is_switched_to_with_or_without_public_key() {
        let (a, b) = keys();
        for expected in [None, Some(b.public())] {
            let d = key_change(path(), a.public(), Ok(b.clone()), expected).unwrap();
            match &d {
                KeyChange::Switch(k) => assert_eq!(k.public(), b.public()),
                KeyChange::Keep => panic!("kept {a:?} with {b:?} in the file"),
            }
            assert_eq!(d.public(a.public()), b.public());
        }
    }

    #[test]
    fn a_file_that_does_not_hold_public_key_is_refused_naming_both_keys() {
        let (a, b) = keys();
        // The new key is announced before its file is written: the file still holds the old one.
        let e = key_change(path(), a.public(), Ok(a.clone()), Some(b.public())).unwrap_err();
        assert_eq!(e.field, "publicKey");
        assert_eq!(
            e.problem,
            format!(
                "privateKeyFile {} holds the key of public key {}, publicKey is {}",
                path().display(),
                a.public(),
                b.public()
            )
        );
        // A third key in the file, neither running nor announced: refused too.
        let c = PrivateKey::generate().unwrap();
        let e = key_change(path(), a.public(), Ok(c.clone()), Some(b.public())).unwrap_err();
        assert_eq!(e.field, "publicKey");
        assert!(e.problem.contains(&c.public().to_string()), "{e}");
        for k in [&a, &b, &c] {
            assert!(
                !e.to_string().contains(&k.to_base64()),
                "a private key shown: {e}"
            );
        }
        // The same check at start.
        assert!(expected_key(path(), &a, Some(a.public())).is_ok());
        assert!(expected_key(path(), &a, None).is_ok());
        assert_eq!(
            expected_key(path(), &a, Some(b.public()))
                .unwrap_err()
                .field,
            "publicKey"
        );
    }

    #[test]
    fn an_unreadable_missing_or_invalid_file_is_refused_naming_private_key_file() {
        let (a, _) = keys();
        let cases = || {
            [
                (
                    KeyFileError::Io {
                        op: "reading",
                        path: path().display().to_string(),
                        source: io::Error::from(io::ErrorKind::NotFound),
                    },
                    "reading private key file",
                ),
                (
                    KeyFileError::Permissions {
                        path: path().display().to_string(),
                        mode: 0o644,
                    },
                    "chmod 600",
                ),
                (
                    KeyFileError::Invalid(path().display().to_string()),
                    "does not hold a base64 WireGuard key",
                ),
            ]
        };
        // Whether or not publicKey is set (even to the running key), the running key stays.
        for expected in [None, Some(a.public())] {
            for (file, says) in cases() {
                let e = key_change(path(), a.public(), Err(file), expected).unwrap_err();
                assert_eq!(e.field, "privateKeyFile", "{e}");
                assert!(e.problem.contains(says), "{e}");
                assert!(e.problem.contains(&path().display().to_string()), "{e}");
                assert!(
                    e.problem.ends_with(&format!(
                        "the running key (public key {}) is kept",
                        a.public()
                    )),
                    "{e}"
                );
            }
        }
    }
}
