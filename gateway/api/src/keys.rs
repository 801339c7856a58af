//! The gateway's private key and its file: a WireGuard key (generation, base64) and the key file
//! (mode 0600, refused when others may read it).

use std::{
    fmt,
    fs::{self, OpenOptions},
    io::{self, Write},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::Path,
};

use base64::{Engine, engine::general_purpose::STANDARD};
use x25519_dalek::{PublicKey as XPublic, StaticSecret};

pub use liqo_types::{InvalidKey, PublicKey};

/// A private key (never printed).
#[derive(Clone)]
pub struct PrivateKey(StaticSecret);

/// Fills `buf` from the kernel's random source (`getrandom(2)`).
pub fn random(buf: &mut [u8]) -> io::Result<()> {
    getrandom::fill(buf).map_err(io::Error::other)
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrivateKey(public {})", self.public())
    }
}

impl PrivateKey {
    /// A new random key.
    pub fn generate() -> io::Result<PrivateKey> {
        let mut bytes = [0u8; 32];
        random(&mut bytes)?;
        Ok(PrivateKey(StaticSecret::from(bytes)))
    }

    /// Parses base64 (as `wg genkey` prints it).
    pub fn parse(s: &str) -> Result<PrivateKey, InvalidKey> {
        let pk: PublicKey = s.parse().map_err(|_| InvalidKey("<private key>".into()))?;
        Ok(PrivateKey(StaticSecret::from(pk.0)))
    }

    /// The matching public key.
    pub fn public(&self) -> PublicKey {
        PublicKey(XPublic::from(&self.0).to_bytes())
    }

    /// As x25519-dalek's type (the one boringtun takes).
    pub fn secret(&self) -> StaticSecret {
        self.0.clone()
    }

    /// Base64, as `wg` expects it.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0.to_bytes())
    }

    /// Loads the key at `path`. Refuses a key file that others can read; a missing file is an
    /// error (see [`PrivateKey::load_or_create`]).
    pub fn load(path: &Path) -> Result<PrivateKey, KeyFileError> {
        let text = fs::read_to_string(path).map_err(io_error("reading", path))?;
        let mode = fs::metadata(path)
            .map_err(io_error("checking", path))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(KeyFileError::Permissions {
                path: path.display().to_string(),
                mode: mode & 0o777,
            });
        }
        PrivateKey::parse(&text).map_err(|_| KeyFileError::Invalid(path.display().to_string()))
    }

    /// Loads the key at `path`, creating it (mode 0600, never readable by others) if missing.
    /// Refuses a key file that others can read.
    pub fn load_or_create(path: &Path) -> Result<PrivateKey, KeyFileError> {
        let err = |op| io_error(op, path);
        match PrivateKey::load(path) {
            Err(e) if e.is_missing() => {
                let key = PrivateKey::generate().map_err(err("generating a key for"))?;
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    fs::create_dir_all(dir).map_err(err("creating the directory of"))?;
                }
                // Written aside and renamed into place: a crash never leaves an empty key file.
                let tmp = path.with_extension("tmp");
                match fs::remove_file(&tmp) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(err("removing a stale temporary file beside")(e)),
                }
                let mut f = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&tmp)
                    .map_err(err("creating"))?;
                f.write_all(format!("{}\n", key.to_base64()).as_bytes())
                    .map_err(err("writing"))?;
                f.sync_all().map_err(err("syncing"))?;
                fs::rename(&tmp, path).map_err(err("installing"))?;
                Ok(key)
            }
            loaded => loaded,
        }
    }
}

/// A [`KeyFileError::Io`] of `op` on `path`.
fn io_error<'a>(op: &'static str, path: &'a Path) -> impl Fn(io::Error) -> KeyFileError + 'a {
    move |source| KeyFileError::Io {
        op,
        path: path.display().to_string(),
        source,
    }
}

/// Problems with the private key file.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// I/O failed.
    #[error("{op} private key file {path}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Others may read it.
    #[error(
        "private key file {path} has mode {mode:o}; it must not be readable by group or others (chmod 600)"
    )]
    Permissions {
        /// The file.
        path: String,
        /// Its mode.
        mode: u32,
    },
    /// Not a key.
    #[error("private key file {0} does not hold a base64 WireGuard key")]
    Invalid(String),
}

impl KeyFileError {
    /// Whether the file does not exist.
    pub fn is_missing(&self) -> bool {
        matches!(self, KeyFileError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_file_is_created_private_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/key");
        let k = PrivateKey::load_or_create(&path).unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let again = PrivateKey::load_or_create(&path).unwrap();
        assert_eq!(k.public(), again.public());
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            PrivateKey::load_or_create(&path),
            Err(KeyFileError::Permissions { mode: 0o644, .. })
        ));
    }

    #[test]
    fn load_never_creates_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let e = PrivateKey::load(&path).unwrap_err();
        assert!(e.is_missing(), "{e:?}");
        assert!(!path.exists());
        fs::write(&path, "not a key\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let e = PrivateKey::load(&path).unwrap_err();
        assert!(
            matches!(e, KeyFileError::Invalid(_)) && !e.is_missing(),
            "{e:?}"
        );
        assert!(
            !format!("{e} {e:?}").contains("not a key"),
            "the file's text is never shown: {e}"
        );
    }

    #[test]
    fn public_keys_parse_and_print() {
        let k = PrivateKey::generate().unwrap();
        let p = k.public();
        assert_eq!(p.to_string().parse::<PublicKey>().unwrap(), p);
        assert_eq!(p.to_string().len(), 44);
        assert!("short".parse::<PublicKey>().is_err());
        assert!("AAAA".parse::<PublicKey>().is_err());
    }
}
