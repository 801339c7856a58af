//! The pure half of the ConfigMap store: which names are valid, the ConfigMap that holds a
//! state (and the state a ConfigMap holds), and what a failed request means for the write.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

use super::error::{ConfigMapError, InvalidContent};
use crate::state::State;

/// The data key that holds the state: the JSON the file store writes.
pub const DATA_KEY: &str = "state.json";
/// The label every ConfigMap this store writes carries, with [`MANAGED_BY`].
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "liqo-ipam";
/// The annotation that gives the format version of the state (`State::version`).
pub const VERSION_ANNOTATION: &str = "ipam.liqo.io/state-version";
/// The most a ConfigMap holds (the API server refuses more).
pub const MAX_DATA: usize = 1024 * 1024;

/// The ConfigMap the state lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Why `s` is not made of RFC 1123 labels (one label, or several joined by dots when `dots`)
/// of at most `max` characters in all.
fn lowercase_rfc1123(s: &str, max: usize, dots: bool) -> Result<(), String> {
    if s.is_empty() {
        return Err("is empty".into());
    }
    if s.len() > max {
        return Err(format!("is {} characters long (at most {max})", s.len()));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    for part in if dots {
        s.split('.').collect::<Vec<_>>()
    } else {
        vec![s]
    } {
        if let Some(c) = part.chars().find(|&c| !allowed(c)) {
            let also = if dots { ", '-' and '.'" } else { " and '-'" };
            return Err(format!("contains {c:?} (only a-z, 0-9{also} are allowed)"));
        }
        if part.is_empty() || part.starts_with('-') || part.ends_with('-') {
            return Err(if dots {
                "each part between dots must start and end with a-z or 0-9".into()
            } else {
                "must start and end with a-z or 0-9".into()
            });
        }
    }
    Ok(())
}

/// Why `name` is not an RFC 1123 subdomain (the names of most objects, checked as the API server
/// does).
pub fn check_subdomain(name: &str) -> Result<(), String> {
    lowercase_rfc1123(name, 253, true)
}

/// Checks a ConfigMap name (an RFC 1123 subdomain, as the API server does).
pub fn check_name(name: &str) -> Result<(), String> {
    check_subdomain(name).map_err(|p| format!("not a valid ConfigMap name: {p}"))
}

/// Checks a namespace name (an RFC 1123 label, as the API server does).
pub fn check_namespace(namespace: &str) -> Result<(), String> {
    lowercase_rfc1123(namespace, 63, false).map_err(|p| format!("not a valid namespace: {p}"))
}

/// What the store remembers of the ConfigMap as it last read or wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    /// Never empty: the precondition of the next replace.
    pub(crate) resource_version: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

impl Seen {
    /// What to remember of `cm`; an object without a resourceVersion cannot be written with a
    /// precondition, so it is refused.
    pub(crate) fn of(target: &Target, cm: &ConfigMap) -> Result<Seen, ConfigMapError> {
        let m = &cm.metadata;
        let resource_version = m
            .resource_version
            .clone()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ConfigMapError::NoResourceVersion {
                configmap: target.to_string(),
            })?;
        Ok(Seen {
            resource_version,
            labels: m.labels.clone().unwrap_or_default(),
            annotations: m.annotations.clone().unwrap_or_default(),
        })
    }
}

/// The state as the ConfigMap holds it (the file store's JSON), refused when larger than a
/// ConfigMap holds.
pub(crate) fn encode_state(state: &State) -> Result<String, ConfigMapError> {
    let json = serde_json::to_string(state).map_err(ConfigMapError::Encode)?;
    if json.len() > MAX_DATA {
        return Err(ConfigMapError::TooLarge {
            len: json.len(),
            max: MAX_DATA,
        });
    }
    Ok(json)
}

/// The ConfigMap holding `json` (a state of format `version`): to create when nothing was
/// seen, else to replace what was seen, with its resourceVersion as the precondition; the
/// labels and annotations seen are kept, ours set.
pub(crate) fn object(
    target: &Target,
    json: String,
    version: u32,
    seen: Option<&Seen>,
) -> ConfigMap {
    let mut labels = seen.map(|s| s.labels.clone()).unwrap_or_default();
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    let mut annotations = seen.map(|s| s.annotations.clone()).unwrap_or_default();
    annotations.insert(VERSION_ANNOTATION.into(), version.to_string());
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(target.name.clone()),
            namespace: Some(target.namespace.clone()),
            resource_version: seen.map(|s| s.resource_version.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(DATA_KEY.to_owned(), json)])),
        ..ConfigMap::default()
    }
}

/// The text under [`DATA_KEY`], if any.
pub(crate) fn data(cm: &ConfigMap) -> Option<&str> {
    cm.data.as_ref()?.get(DATA_KEY).map(String::as_str)
}

/// The state `cm` holds; an error names the ConfigMap.
pub(crate) fn decode(target: &Target, cm: &ConfigMap) -> Result<State, ConfigMapError> {
    let invalid = |source| ConfigMapError::Invalid {
        configmap: target.to_string(),
        source,
    };
    let text = data(cm).ok_or_else(|| invalid(InvalidContent::Missing(DATA_KEY)))?;
    serde_json::from_str(text).map_err(|e| {
        invalid(InvalidContent::Json {
            key: DATA_KEY,
            source: e,
        })
    })
}

/// What a failed get, create or replace means for the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// 409: another writer changed it (replace), or made it (create). Nothing was written.
    Conflict,
    /// 404 on a replace: someone deleted it. Nothing was written.
    Gone,
    /// The API server refused the request (forbidden, invalid, throttled, ...), or it was never
    /// sent. Nothing was written.
    Refused,
    /// No answer, or one that does not say: the write may or may not have happened.
    Unknown,
}

/// Classifies a failed request (`creating`: a create, else a replace or a get).
pub(crate) fn classify(e: &kube::Error, creating: bool) -> Failure {
    match e {
        kube::Error::Api(s) if s.code == 409 => Failure::Conflict,
        kube::Error::Api(s) if s.code == 404 && !creating => Failure::Gone,
        // 500 and 504 may come after the write was applied (etcd timeouts).
        kube::Error::Api(s) if s.code >= 500 => Failure::Unknown,
        kube::Error::Api(_) | kube::Error::BuildRequest(_) => Failure::Refused,
        _ => Failure::Unknown,
    }
}

#[cfg(test)]
mod tests;
