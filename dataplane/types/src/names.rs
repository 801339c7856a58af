//! Validated kernel names: interface names and network namespace names.
//!
//! Both are checked once, at the boundary, so the rest of the crate never handles a raw string
//! that the kernel would reject halfway through a change.

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidName {
    /// The name is empty.
    #[error("{kind} name is empty")]
    Empty {
        /// What kind of name it was.
        kind: &'static str,
    },
    /// The name is longer than the kernel allows.
    #[error("{kind} name {name:?} is longer than {max} bytes")]
    TooLong {
        /// What kind of name it was.
        kind: &'static str,
        /// The refused name.
        name: String,
        /// The longest allowed length.
        max: usize,
    },
    /// The name contains a character the kernel or iproute2 refuses.
    #[error("{kind} name {name:?} contains {bad:?}; allowed: letters, digits, '-', '_', '.'")]
    BadChar {
        /// What kind of name it was.
        kind: &'static str,
        /// The refused name.
        name: String,
        /// The first refused character.
        bad: char,
    },
    /// `.` and `..` are path components, not names.
    #[error("{kind} name {name:?} is reserved")]
    Reserved {
        /// What kind of name it was.
        kind: &'static str,
        /// The refused name.
        name: String,
    },
}

fn check(kind: &'static str, name: &str, max: usize) -> Result<(), InvalidName> {
    if name.is_empty() {
        return Err(InvalidName::Empty { kind });
    }
    if name.len() > max {
        return Err(InvalidName::TooLong {
            kind,
            name: name.into(),
            max,
        });
    }
    if name == "." || name == ".." {
        return Err(InvalidName::Reserved {
            kind,
            name: name.into(),
        });
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_.".contains(*c)))
    {
        return Err(InvalidName::BadChar {
            kind,
            name: name.into(),
            bad,
        });
    }
    Ok(())
}

crate::string_newtype! {
    /// A network interface name: at most 15 bytes (`IFNAMSIZ - 1`), no '/', ':' or spaces.
    pub struct IfName;
    error = InvalidName;
    check = |s| check("interface", s, IfName::MAX_LEN);
}

crate::string_newtype! {
    /// A named network namespace (an entry under `/run/netns`): at most 64 bytes.
    pub struct NetnsName;
    error = InvalidName;
    check = |s| check("netns", s, NetnsName::MAX_LEN);
}

impl IfName {
    /// The longest name accepted, in bytes.
    pub const MAX_LEN: usize = 15;
}

impl NetnsName {
    /// The longest name accepted, in bytes.
    pub const MAX_LEN: usize = 64;
}

impl TryFrom<&str> for IfName {
    type Error = InvalidName;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl TryFrom<&str> for NetnsName {
    type Error = InvalidName;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        for n in ["eth0", "lq-rome-n0", "vxlan.liqo", "a_b", "x"] {
            assert_eq!(n.parse::<IfName>().unwrap().as_str(), n);
        }
        assert_eq!(
            "lq-rome-n0-p1".parse::<NetnsName>().unwrap().to_string(),
            "lq-rome-n0-p1"
        );
    }

    #[test]
    fn refuses_bad_names_naming_them() {
        let e = "0123456789abcdef".parse::<IfName>().unwrap_err();
        assert!(matches!(e, InvalidName::TooLong { max: 15, .. }), "{e}");
        assert!(e.to_string().contains("0123456789abcdef"));
        let e = "eth0:1".parse::<IfName>().unwrap_err();
        assert_eq!(
            e,
            InvalidName::BadChar {
                kind: "interface",
                name: "eth0:1".into(),
                bad: ':'
            }
        );
        assert!(matches!(
            "".parse::<NetnsName>(),
            Err(InvalidName::Empty { .. })
        ));
        assert!(matches!(
            "..".parse::<NetnsName>(),
            Err(InvalidName::Reserved { .. })
        ));
        assert!(matches!(
            "a/b".parse::<NetnsName>(),
            Err(InvalidName::BadChar { bad: '/', .. })
        ));
    }

    #[test]
    fn serde_validates() {
        let ok: IfName = serde_json::from_str("\"wg0\"").unwrap();
        assert_eq!(ok.as_str(), "wg0");
        let bad = serde_json::from_str::<IfName>("\"has space\"").unwrap_err();
        assert!(bad.to_string().contains("has space"), "{bad}");
    }
}
