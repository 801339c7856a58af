//! Validated identifiers: a cluster's ID and its human-readable name.
//!
//! Both are RFC 1123 labels (lowercase alphanumerics and `-`, at most 63 characters, starting
//! and ending with an alphanumeric), so they can be used verbatim inside Kubernetes names
//! (virtual node `liqo-<name>`, tenant namespaces, labels, nftables element comments). Upstream Liqo v0.5 generates the
//! cluster ID as a UUIDv4, which is such a label. The CRD schemas carry the same rule
//! ([`LABEL_PATTERN`]), so the apiserver refuses what these types would refuse.

/// The longest RFC 1123 label.
pub const LABEL_MAX_LEN: usize = 63;

/// The schema pattern equivalent to [`validate_label`].
pub const LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// Why a string is not a valid identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidId {
    /// The string is empty.
    #[error("is empty")]
    Empty,
    /// The string is longer than [`LABEL_MAX_LEN`].
    #[error("is {0} characters long (at most {LABEL_MAX_LEN})")]
    TooLong(usize),
    /// A character other than `a-z`, `0-9` or `-`.
    #[error("contains {0:?} (only a-z, 0-9 and '-' are allowed)")]
    InvalidChar(char),
    /// Starts or ends with `-`.
    #[error("starts or ends with '-'")]
    EdgeDash,
}

/// Checks that `s` is an RFC 1123 label.
pub fn validate_label(s: &str) -> Result<(), InvalidId> {
    if s.is_empty() {
        return Err(InvalidId::Empty);
    }
    if s.len() > LABEL_MAX_LEN {
        return Err(InvalidId::TooLong(s.len()));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(InvalidId::InvalidChar(c));
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Err(InvalidId::EdgeDash);
    }
    Ok(())
}

crate::string_newtype! {
    /// A cluster's unique identifier (upstream: a UUIDv4 chosen at install time).
    pub struct ClusterId;
    error = InvalidId;
    check = validate_label;
}

crate::string_newtype! {
    /// A cluster's human-readable name (shown in GUIs, used in virtual node names).
    pub struct ClusterName;
    error = InvalidId;
    check = validate_label;
}

/// The JSON schema of a label newtype: a string with [`LABEL_PATTERN`].
#[cfg(feature = "schemars")]
fn label_schema() -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": LABEL_MAX_LEN,
        "pattern": LABEL_PATTERN,
    })
}

#[cfg(feature = "schemars")]
impl schemars::JsonSchema for ClusterId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ClusterId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        label_schema()
    }
}

#[cfg(feature = "schemars")]
impl schemars::JsonSchema for ClusterName {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ClusterName".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        label_schema()
    }
}

impl ClusterId {
    /// The first dash-separated token (the 8 hex digits of a UUID), which upstream v0.5 uses
    /// as a short suffix, e.g. in per-cluster iptables chain names.
    pub fn short(&self) -> &str {
        self.0.split('-').next().unwrap_or(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_uuid_and_names() {
        let id: ClusterId = "b07938e3-d241-460c-a77b-e286c0f733c7".parse().unwrap();
        assert_eq!(id.as_str(), "b07938e3-d241-460c-a77b-e286c0f733c7");
        assert_eq!(id.short(), "b07938e3");
        assert_eq!(id.to_string(), "b07938e3-d241-460c-a77b-e286c0f733c7");
        let name: ClusterName = "lively-voice".parse().unwrap();
        assert_eq!(name.as_ref(), "lively-voice");
        assert!("a".parse::<ClusterName>().is_ok());
        assert!("x".repeat(LABEL_MAX_LEN).parse::<ClusterId>().is_ok());
    }

    #[test]
    fn short_without_dash_is_whole_id() {
        let id: ClusterId = "milan".parse().unwrap();
        assert_eq!(id.short(), "milan");
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!("".parse::<ClusterId>(), Err(InvalidId::Empty));
        assert_eq!(
            "x".repeat(LABEL_MAX_LEN + 1).parse::<ClusterId>(),
            Err(InvalidId::TooLong(LABEL_MAX_LEN + 1))
        );
        assert_eq!(
            "Milan".parse::<ClusterName>(),
            Err(InvalidId::InvalidChar('M'))
        );
        assert_eq!(
            "a.b".parse::<ClusterName>(),
            Err(InvalidId::InvalidChar('.'))
        );
        assert_eq!("a_b".parse::<ClusterId>(), Err(InvalidId::InvalidChar('_')));
        assert_eq!("-ab".parse::<ClusterId>(), Err(InvalidId::EdgeDash));
        assert_eq!("ab-".parse::<ClusterId>(), Err(InvalidId::EdgeDash));
    }

    #[test]
    fn serde_validates() {
        let id: ClusterId = serde_json::from_str("\"rome\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"rome\"");
        let err = serde_json::from_str::<ClusterId>("\"Rome\"").unwrap_err();
        assert!(err.to_string().contains("'R'"), "{err}");
    }

    #[cfg(feature = "schemars")]
    #[test]
    fn schema_carries_the_rule() {
        let schema = serde_json::to_value(schemars::schema_for!(ClusterId)).unwrap();
        assert_eq!(schema["pattern"], LABEL_PATTERN);
        assert_eq!(schema["maxLength"], LABEL_MAX_LEN);
    }
}
