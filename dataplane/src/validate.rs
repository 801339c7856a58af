//! Validation shared by the daemons' configuration files: an error that names the bad field by
//! its path, IPv4 CIDRs without host bits, and YAML parse errors mapped to a field.

use ipnet::Ipv4Net;
use serde::de::DeserializeOwned;

/// A refused configuration value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct FieldError {
    /// Path of the bad field (`peers[1].remotePodCIDR`; `<file>` for the file as a whole).
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

/// Parses an IPv4 network written without host bits, naming `field` on error.
pub fn cidr(field: &str, s: &str) -> Result<Ipv4Net, FieldError> {
    let n: Ipv4Net = s
        .trim()
        .parse()
        .map_err(|_| bad(field, format!("{s:?} is not an IPv4 CIDR (a.b.c.d/len)")))?;
    if n != n.trunc() {
        return Err(bad(
            field,
            format!("{n} has host bits set (did you mean {}?)", n.trunc()),
        ));
    }
    Ok(n)
}

/// Parses YAML into `T`; a syntax error, an unknown key or a wrong type is reported on
/// `<file>` with the parser's first line (which gives the position and the key).
pub fn yaml<T: DeserializeOwned>(text: &str) -> Result<T, FieldError> {
    serde_saphyr::from_str(text).map_err(|e| {
        bad(
            "<file>",
            e.to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ")
                .to_owned(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_and_yaml_errors_name_the_field() {
        assert_eq!(cidr("x", "10.1.0.0/16").unwrap().to_string(), "10.1.0.0/16");
        assert_eq!(
            cidr("a.b", "10.1.0.1/16").unwrap_err().to_string(),
            "a.b: 10.1.0.1/16 has host bits set (did you mean 10.1.0.0/16?)"
        );
        assert_eq!(cidr("a.b", "nope").unwrap_err().field, "a.b");
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[expect(dead_code, reason = "only parsed")]
        struct T {
            a: u32,
        }
        let e = yaml::<T>("b: 1\n").unwrap_err();
        assert_eq!(e.field, "<file>");
        assert!(e.problem.contains("unknown field `b`"), "{e}");
    }
}
