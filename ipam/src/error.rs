//! The IPAM's errors. Each names the value that was refused.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::ClusterId;

/// Why the IPAM refused a request. A refused request changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not an IPv4 CIDR without host bits.
    #[error(transparent)]
    Cidr(#[from] liqo_types::InvalidCidr),
    /// Not an IPv4 address.
    #[error("{0:?} is not an IPv4 address")]
    NotAnIp(String),
    /// Not a valid cluster ID.
    #[error("invalid cluster ID {id:?}: {source}")]
    BadClusterId {
        /// As given.
        id: String,
        /// Why.
        #[source]
        source: liqo_types::InvalidId,
    },
    /// No pool has a free block of this length.
    #[error("pools exhausted: no free /{len} left for {what}")]
    PoolExhausted {
        /// The prefix length asked for.
        len: u8,
        /// What it was for.
        what: String,
    },
    /// The peer is not known.
    #[error("unknown peer {0}")]
    UnknownPeer(ClusterId),
    /// The peer exists with other CIDRs.
    #[error(
        "peer {peer} already announced pod CIDR {pod} and external CIDR {external}; release it before announcing {new_pod} and {new_external}"
    )]
    PeerConflict {
        /// The peer.
        peer: ClusterId,
        /// Its recorded pod CIDR.
        pod: Ipv4Net,
        /// Its recorded external CIDR.
        external: Ipv4Net,
        /// The new pod CIDR.
        new_pod: Ipv4Net,
        /// The new external CIDR.
        new_external: Ipv4Net,
    },
    /// A peer's pod and external CIDRs overlap each other.
    #[error("peer {peer}: pod CIDR {pod} overlaps external CIDR {external}")]
    PeerSelfOverlap {
        /// The peer.
        peer: ClusterId,
        /// Pod CIDR.
        pod: Ipv4Net,
        /// External CIDR.
        external: Ipv4Net,
    },
    /// The IP is in none of the ranges the translation knows.
    #[error("{ip} is outside {ranges}")]
    IpOutside {
        /// The IP.
        ip: Ipv4Addr,
        /// The ranges it was checked against.
        ranges: String,
    },
    /// The peer has not told us how it sees our ranges yet.
    #[error("peer {0} has not announced its view of our CIDRs yet")]
    NoPeerView(ClusterId),
    /// A view announced by a peer does not have the length of our range.
    #[error("peer {peer}: view {view} of our {what} {ours} must have the same prefix length")]
    ViewLength {
        /// The peer.
        peer: ClusterId,
        /// The view.
        view: Ipv4Net,
        /// "pod CIDR" or "external CIDR".
        what: &'static str,
        /// Our range.
        ours: Ipv4Net,
    },
    /// A reserved subnet or pool change collides with something allocated.
    #[error("{what} {net} overlaps {holder}")]
    InUse {
        /// "reserved subnet", "pool removal", ...
        what: &'static str,
        /// The subnet.
        net: Ipv4Net,
        /// Who holds the overlapping range (names the peer).
        holder: String,
    },
    /// Two pools overlap.
    #[error("pool {0} overlaps pool {1}")]
    PoolOverlap(Ipv4Net, Ipv4Net),
    /// Not in the list.
    #[error("{what} {net} is not configured")]
    NotConfigured {
        /// "reserved subnet" or "pool".
        what: &'static str,
        /// The subnet.
        net: Ipv4Net,
    },
    /// Local CIDRs overlap each other.
    #[error("local {a_what} {a} overlaps local {b_what} {b}")]
    LocalOverlap {
        /// First range kind.
        a_what: &'static str,
        /// First range.
        a: Ipv4Net,
        /// Second range kind.
        b_what: &'static str,
        /// Second range.
        b: Ipv4Net,
    },
    /// Changing a local CIDR while peers hold allocations.
    #[error(
        "refusing to change the local {what} from {old} to {new} while {peers} peer(s) hold allocations; release them first"
    )]
    LocalChange {
        /// "pod CIDR" or "service CIDR".
        what: &'static str,
        /// Current.
        old: Ipv4Net,
        /// Requested.
        new: Ipv4Net,
        /// Number of peers.
        peers: usize,
    },
    /// Not a holder name.
    #[error(
        "holder {0:?}: at most 63 characters among lowercase letters, digits, '-', '.' and '/'"
    )]
    BadHolder(String),
    /// The stored state contradicts itself (corrupt or edited by hand).
    #[error("inconsistent stored state: {0}")]
    Corrupt(String),
}
