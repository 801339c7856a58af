//! Where `liqo-ipam serve` keeps its state: `--store file` (`--state <path>`, the default) or
//! `--store configmap` (`--state-configmap <name>` in `--namespace <ns>`), checked before
//! anything is read; a change of either needs a restart.

use std::path::{Path, PathBuf};

use liqo_types::field::{FieldError, bad};
use serde::Deserialize;

use crate::store::configmap::{
    DEFAULT_NAME, DEFAULT_NAMESPACE, Target, check_name, check_namespace,
};

/// The kinds of store (`--store`, `store:` in the file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// A crash-safe JSON file (`--state`).
    #[default]
    File,
    /// A ConfigMap in the API server (`--state-configmap`, `--namespace`).
    #[value(name = "configmap")]
    #[serde(rename = "configmap")]
    ConfigMap,
}

/// Where the state is kept, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// This file.
    File(PathBuf),
    /// This ConfigMap.
    ConfigMap(Target),
}

impl std::fmt::Display for StoreChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreChoice::File(p) => write!(f, "file {}", p.display()),
            StoreChoice::ConfigMap(t) => write!(f, "configmap {t}"),
        }
    }
}

impl StoreChoice {
    /// `file` or `configmap`.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreChoice::File(_) => "file",
            StoreChoice::ConfigMap(_) => "configmap",
        }
    }

    /// The file's path, or the ConfigMap as `namespace/name`.
    pub fn location(&self) -> String {
        match self {
            StoreChoice::File(p) => p.display().to_string(),
            StoreChoice::ConfigMap(t) => t.to_string(),
        }
    }
}

/// `--state-configmap`'s value parser: a valid ConfigMap name.
pub fn configmap_name(s: &str) -> Result<String, String> {
    check_name(s).map(|()| s.to_owned())
}

/// `--namespace`'s value parser: a valid namespace.
pub fn namespace_name(s: &str) -> Result<String, String> {
    check_namespace(s).map(|()| s.to_owned())
}

/// The store's settings as given (`Settings`' fields, before defaults).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Given<'a> {
    /// `--store`.
    pub(super) kind: Option<StoreKind>,
    /// `--state`.
    pub(super) state: Option<&'a Path>,
    /// `--state-configmap`.
    pub(super) configmap: Option<&'a str>,
    /// `--namespace`.
    pub(super) namespace: Option<&'a str>,
}

impl Given<'_> {
    fn kind_name(&self) -> &'static str {
        match self.kind.unwrap_or_default() {
            StoreKind::File => "file",
            StoreKind::ConfigMap => "configmap",
        }
    }

    fn name(&self) -> &str {
        self.configmap.unwrap_or(DEFAULT_NAME)
    }

    fn ns(&self) -> &str {
        self.namespace.unwrap_or(DEFAULT_NAMESPACE)
    }

    /// Where the state is kept: the file `state` (the `--state` given, else its default), or
    /// the ConfigMap (default [`DEFAULT_NAME`] in [`DEFAULT_NAMESPACE`]) with its name and
    /// namespace checked, an error naming the field, its flag and the value.
    pub(super) fn choice(&self, state: PathBuf) -> Result<StoreChoice, FieldError> {
        match self.kind.unwrap_or_default() {
            StoreKind::File => Ok(StoreChoice::File(state)),
            StoreKind::ConfigMap => {
                let name = self.name();
                check_name(name).map_err(|p| {
                    bad("stateConfigmap", format!("--state-configmap {name:?}: {p}"))
                })?;
                let namespace = self.ns();
                check_namespace(namespace)
                    .map_err(|p| bad("namespace", format!("--namespace {namespace:?}: {p}")))?;
                Ok(StoreChoice::ConfigMap(Target {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                }))
            }
        }
    }

    /// Settings given that the chosen store does not use (each is ignored), by flag.
    pub(super) fn unused_flags(&self) -> Vec<&'static str> {
        match self.kind.unwrap_or_default() {
            StoreKind::File => [
                (self.configmap.is_some(), "--state-configmap"),
                (self.namespace.is_some(), "--namespace"),
            ]
            .into_iter()
            .filter_map(|(given, flag)| given.then_some(flag))
            .collect(),
            StoreKind::ConfigMap => {
                if self.state.is_some() {
                    vec!["--state"]
                } else {
                    Vec::new()
                }
            }
        }
    }

    /// Refuses a change of the store, its ConfigMap or its namespace from `running` (a
    /// restart is needed).
    pub(super) fn change_from(&self, running: &Given<'_>) -> Result<(), FieldError> {
        let restart = |field: &str, running: &str| {
            bad(
                field,
                format!("changes only on a restart (running with {running})"),
            )
        };
        if self.kind_name() != running.kind_name() {
            return Err(restart("store", running.kind_name()));
        }
        if self.name() != running.name() {
            return Err(restart("stateConfigmap", running.name()));
        }
        if self.ns() != running.ns() {
            return Err(restart("namespace", running.ns()));
        }
        Ok(())
    }
}
