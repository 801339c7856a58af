//! [`Tool`] and [`Install`]: what a run used, with the version each reports, and what it had to
//! install first.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use serde::{Deserialize, Serialize};

use crate::parse::first_line;

/// A tool the bench used, with the version it reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// What it is (`boringtun-cli`, `wireguard-go latest`, `liqoctl`, ...).
    pub name: String,
    /// Where it is.
    pub path: String,
    /// The first line of its `--version` (plus the module version for a Go build).
    pub version: String,
}

impl Tool {
    /// `path`, with the first line `path version_arg` prints (on stdout, else on stderr). Never
    /// `--help`: wireguard-go would create an interface named `--help`.
    pub fn probe(name: &str, path: &Path, version_arg: &str) -> Tool {
        let version = Command::new(path)
            .arg(version_arg)
            .stdin(Stdio::null())
            .output()
            .map(|o| {
                let out = first_line(&String::from_utf8_lossy(&o.stdout));
                let out = if out.is_empty() {
                    first_line(&String::from_utf8_lossy(&o.stderr))
                } else {
                    out
                };
                if out.is_empty() {
                    format!("unknown ({version_arg} printed nothing, {})", o.status)
                } else {
                    out
                }
            })
            .unwrap_or_else(|e| format!("unknown ({e})"));
        Tool {
            name: name.into(),
            path: path.display().to_string(),
            version,
        }
    }

    /// One of our binaries at `link` (its real path: a symlink is followed), with its
    /// `--version`.
    pub fn ours(name: &str, link: PathBuf) -> Tool {
        let path = std::fs::canonicalize(&link).unwrap_or(link);
        Tool::probe(name, &path, "--version")
    }

    /// Whether it is a debug build of ours (under a `target/debug` directory).
    pub fn is_debug_build(&self) -> bool {
        self.path.contains("/debug/")
    }
}

/// `liqoctl` (next to the kit's Liqo install) and our binaries `names` that took part in a
/// bench on the test kit's clusters; a binary not found is left out.
pub fn liqo_tools(installed: &e2e::liqo::Liqo, names: &[&str]) -> Vec<Tool> {
    let mut tools = vec![Tool::ours("liqoctl", installed.bin.join("liqoctl"))];
    for name in names {
        if let Ok(path) = e2e::lab::bin(name) {
            tools.push(Tool::ours(name, path));
        }
    }
    tools
}

/// What the bench installed (or found installed) before measuring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Install {
    /// What.
    pub what: String,
    /// `installed`, `built`, `present`, ...
    pub action: String,
    /// How long it took, seconds.
    pub secs: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_from_the_first_line_and_what_failed_otherwise() {
        let sh = Tool::probe("sh", Path::new("/bin/sh"), "-c");
        assert_eq!((sh.name.as_str(), sh.path.as_str()), ("sh", "/bin/sh"));
        assert!(!sh.version.is_empty(), "{sh:?}");
        let none = Tool::probe("none", Path::new("/no/such/tool"), "--version");
        assert!(none.version.starts_with("unknown ("), "{none:?}");
        assert!(!none.is_debug_build());
        let debug = Tool {
            name: "liqo-gateway".into(),
            path: "/src/target/debug/liqo-gateway".into(),
            version: "liqo-gateway 0.1.0".into(),
        };
        assert!(debug.is_debug_build());
    }
}
