//! A file's text made into what an apply does ([`Desired`]): the configuration, checked against
//! the fields a running gateway cannot change, and the key file read again
//! ([`crate::keys::rotation`]): kept, switched to (live, by the apply), or refused naming
//! `privateKeyFile` or `publicKey` with the running key kept.

use liqo_types::field::bad;

use crate::{
    config::{Config, ConfigError, File},
    keys::{
        PrivateKey, PublicKey,
        rotation::{KeyChange, key_change},
    },
};

/// What one apply brings: a validated configuration and what becomes of the key.
#[derive(Debug)]
pub struct Desired {
    /// The configuration.
    pub cfg: Config,
    /// The key file as read when the text was validated: the running key, or the key to switch
    /// to.
    pub key: KeyChange,
}

/// [`Gateway::prepare`](super::Gateway::prepare) for a gateway running `running` (the
/// configuration) with the key of public key `key`.
pub(super) fn desired(
    text: &str,
    running: &Config,
    key: PublicKey,
) -> Result<Desired, ConfigError> {
    let file = File::parse(text)?;
    let cfg = file.validate(None)?;
    fixed(running, &cfg)?;
    let path = &cfg.private_key_file;
    let change = key_change(path, key, PrivateKey::load(path), cfg.public_key)?;
    let own = change.public(key);
    if let Some(i) = file.peers.iter().position(|p| p.public_key == own) {
        return Err(bad(
            format!("peers[{i}].publicKey"),
            "is this gateway's own public key",
        ));
    }
    Ok(Desired { cfg, key: change })
}

/// Refuses a change of a field that needs a restart (naming it).
pub(super) fn fixed(old: &Config, new: &Config) -> Result<(), ConfigError> {
    let fields = [
        (
            "namespace",
            old.namespace.to_string(),
            new.namespace.to_string(),
        ),
        (
            "listenPort",
            old.listen_port.to_string(),
            new.listen_port.to_string(),
        ),
        (
            "privateKeyFile",
            old.private_key_file.display().to_string(),
            new.private_key_file.display().to_string(),
        ),
        (
            "linkCIDR",
            old.link_cidr.to_string(),
            new.link_cidr.to_string(),
        ),
    ];
    for (field, old, new) in fields {
        if old != new {
            return Err(bad(
                field,
                format!("cannot change from {old} to {new} while running; restart the gateway"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
