//! Our identity at a peer (§1.1, §1.2 d): the key and CSR we make (CN = our cluster ID,
//! O = `liqo.io`), the identity Secret holding them and, once signed, the certificate and the
//! peer's API server; and the identity manager ([`Peers`]): a kube client for each peer, built
//! from that Secret and cached until the Secret changes ([`peer_client`]).

mod peer_client;
mod secret;

pub use peer_client::{
    PEER_CONNECT_TIMEOUT, PEER_READ_TIMEOUT, PEER_WATCH_READ_TIMEOUT, PeerClient, Peers,
    peer_configs,
};
pub use secret::{
    IdentityError, NewIdentity, data, find, kubeconfig, new_identity, prove, selector, state,
};
