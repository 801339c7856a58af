//! [`FieldError`]: a refused value named by the path of its field (`peers[1].remotePodCIDR`),
//! and decoding of YAML and JSON documents whose every error names its field.
//!
//! Documents are decoded into typed structs whose fields are the validated types of this crate,
//! so a bad CIDR, key or ID is refused while decoding, with the path
//! [`serde_path_to_error`] tracks; checks across fields follow in each daemon's `validate`.

use std::{fmt::Display, str::FromStr};

use serde::de::DeserializeOwned;

/// A refused value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct FieldError {
    /// Path of the bad field (`peers[1].remotePodCIDR`; `<file>` for the document as a whole).
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

/// A [`FieldError`].
pub fn bad(field: impl Into<String>, problem: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        problem: problem.into(),
    }
}

/// Parses `text` as a `T`, naming `field` on error.
pub fn parse<T>(field: &str, text: &str) -> Result<T, FieldError>
where
    T: FromStr,
    T::Err: Display,
{
    text.parse().map_err(|e: T::Err| bad(field, e.to_string()))
}

/// Decodes a YAML document into `T`. A syntax error is reported on `<file>` with the parser's
/// position; a wrong type, a bad value, a missing or an unknown field on the field's path.
pub fn yaml<T: DeserializeOwned>(text: &str) -> Result<T, FieldError> {
    let value: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| {
        bad(
            "<file>",
            e.to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ")
                .to_owned(),
        )
    })?;
    json(value)
}

/// Decodes a JSON value into `T`, naming the field of every error (an empty document is an
/// empty object).
pub fn json<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, FieldError> {
    let value = match value {
        serde_json::Value::Null => serde_json::Value::Object(Default::default()),
        v => v,
    };
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde names a missing field in the message, one level below the path (an unknown
        // field is on the path already).
        let named = inner
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next());
        let field = match (path.as_str(), named) {
            (".", Some(name)) => name.to_owned(),
            (p, Some(name)) => format!("{p}.{name}"),
            (".", None) => "<file>".to_owned(),
            (p, None) => p.to_owned(),
        };
        bad(field, inner)
    })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;
    use crate::Cidr;

    #[derive(Debug, Deserialize, Default)]
    #[serde(rename_all = "camelCase", deny_unknown_fields, default)]
    struct Doc {
        port: u16,
        peers: Vec<Peer>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Peer {
        #[serde(rename = "podCIDR")]
        pod_cidr: Cidr,
        name: String,
    }

    fn err(text: &str) -> FieldError {
        yaml::<Doc>(text).unwrap_err()
    }

    #[test]
    fn every_error_names_its_field() {
        let ok: Doc = yaml("port: 1\npeers: [{podCIDR: 10.0.0.0/8, name: a}]\n").unwrap();
        assert_eq!((ok.port, ok.peers[0].name.as_str()), (1, "a"));
        assert_eq!(ok.peers[0].pod_cidr.to_string(), "10.0.0.0/8");
        assert!(yaml::<Doc>("").is_ok());
        let e = err("peers: [{podCIDR: 10.0.0.1/8, name: a}]\n");
        assert_eq!(e.field, "peers[0].podCIDR");
        assert!(e.problem.contains("host bits"), "{e}");
        assert_eq!(
            err("peers: [{podCIDR: 10.0.0.0/8}]\n").field,
            "peers[0].name"
        );
        assert_eq!(err("bogus: 1\n").field, "bogus");
        assert_eq!(
            err("peers: [{podCIDR: 10.0.0.0/8, name: a, x: 1}]\n").field,
            "peers[0].x"
        );
        assert_eq!(err("port: 70000\n").field, "port");
        assert_eq!(err("port: [1]\n").field, "port");
        assert_eq!(err("peers: 3\n").field, "peers");
        assert_eq!(err("port: 1\n  bad indent: [\n").field, "<file>");
        assert_eq!(parse::<Cidr>("f", "x").unwrap_err().field, "f");
    }
}
