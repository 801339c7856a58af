//! Addresses a node could have: the one rule shared by the overlay (a node's underlay address)
//! and the gateway (the real address of an endpoint mapping).

use std::net::Ipv4Addr;

/// Why `a` cannot be a node's address, if it cannot: packets must be able to leave for it and
/// come back from it as unicast on the cluster network (240.0.0.0/4 is reserved; the overlay
/// takes its own addresses from it).
pub fn unusable_node_address(a: Ipv4Addr) -> Option<&'static str> {
    if a.is_unspecified() {
        Some("the unspecified address")
    } else if a.is_broadcast() {
        Some("the broadcast address")
    } else if a.is_multicast() {
        Some("a multicast address")
    } else if a.is_loopback() {
        Some("a loopback address")
    } else if a.is_link_local() {
        Some("a link-local address")
    } else if a.octets()[0] >= 240 {
        Some("a reserved address (240.0.0.0/4)")
    } else if a.octets()[0] == 0 {
        Some("an address of 0.0.0.0/8 (this network)")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unicast_routable_addresses_are_usable() {
        for a in ["10.0.0.1", "172.18.1.2", "192.168.1.1"] {
            assert_eq!(unusable_node_address(a.parse().unwrap()), None, "{a}");
        }
        for (a, why) in [
            ("0.0.0.0", "unspecified"),
            ("255.255.255.255", "broadcast"),
            ("224.0.0.1", "multicast"),
            ("127.0.0.1", "loopback"),
            ("169.254.1.1", "link-local"),
            ("240.1.2.3", "reserved"),
            ("0.1.2.3", "0.0.0.0/8"),
        ] {
            let got = unusable_node_address(a.parse().unwrap()).unwrap_or_default();
            assert!(got.contains(why), "{a}: {got}");
        }
    }
}
