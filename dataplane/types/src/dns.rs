//! A DNS name where an address may be given instead (a gateway endpoint: a cloud load
//! balancer's hostname), checked the same way by every component that takes one.

use crate::id::validate_label;

/// The longest DNS name (RFC 1123 subdomain).
pub const NAME_MAX_LEN: usize = 253;

/// Whether `s` is a DNS name: an RFC 1123 subdomain (lowercase labels of letters, digits and
/// `-`, at most 63 bytes each, 253 in all) with a letter somewhere, so that a mistyped address
/// such as `300.1.1.1` is not taken for a name.
pub fn is_dns_name(s: &str) -> bool {
    s.len() <= NAME_MAX_LEN
        && s.split('.').all(|l| validate_label(l).is_ok())
        && s.bytes().any(|b| b.is_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lowercase_subdomains_with_a_letter() {
        for ok in [
            "gw.example.com",
            "a",
            "lb-1.eu-west-1.elb.amazonaws.com",
            "1a",
        ] {
            assert!(is_dns_name(ok), "{ok}");
        }
        let long_label = "a".repeat(64);
        let too_long = ["a"; 128].join(".");
        for bad in [
            "",
            "300.1.1.1",
            "GW.example.com",
            "gw..example.com",
            "-gw.example.com",
            "gw-.example.com",
            "gw_1.example.com",
            "gw.example.com.",
            long_label.as_str(),
            too_long.as_str(),
        ] {
            assert!(!is_dns_name(bad), "{bad:?}");
        }
        assert!(is_dns_name(&["a"; 127].join(".")), "253 bytes");
    }
}
