//! Validated names: interface names and network namespace names.
//!
//! Both are checked once, at the boundary, so the rest of the crate never handles a raw string
//! that the kernel would reject halfway through a change.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

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

macro_rules! name_type {
    ($(#[$doc:meta])* $ty:ident, $kind:literal, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $ty(String);

        impl $ty {
            /// The longest name accepted, in bytes.
            pub const MAX_LEN: usize = $max;

            /// The name as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $ty {
            type Err = InvalidName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                check($kind, s, $max)?;
                Ok(Self(s.to_owned()))
            }
        }

        impl TryFrom<String> for $ty {
            type Error = InvalidName;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                check($kind, &s, $max)?;
                Ok(Self(s))
            }
        }

        impl TryFrom<&str> for $ty {
            type Error = InvalidName;
            fn try_from(s: &str) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl From<$ty> for String {
            fn from(n: $ty) -> String {
                n.0
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(
    /// A network interface name: at most 15 bytes (`IFNAMSIZ - 1`), no '/', ':' or spaces.
    IfName,
    "interface",
    15
);

name_type!(
    /// A named network namespace (an entry under `/run/netns`): at most 64 bytes.
    NetnsName,
    "netns",
    64
);

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
