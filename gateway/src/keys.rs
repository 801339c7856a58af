//! WireGuard keys: validated newtypes, generation, and the private key file (mode 0600), all
//! defined in `liqo_gateway_api::keys` and re-exported here; their boringtun form ([`x25519`]);
//! which key a running gateway switches to when the file changes ([`rotation`]).

pub mod rotation;

use boringtun::x25519::PublicKey as XPublic;
pub use liqo_gateway_api::keys::{InvalidKey, KeyFileError, PrivateKey, PublicKey, random};

/// As boringtun's type.
pub fn x25519(key: &PublicKey) -> XPublic {
    XPublic::from(*key.as_bytes())
}
