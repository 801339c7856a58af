//! Running Helm: finding the binary (`$HELM`, else `helm` on `PATH`), writing the chart built
//! into liqoctl to a private temporary directory, and the few commands `install` and
//! `uninstall` need (`upgrade --install`, `rollback`, `uninstall`, `history`). The kubeconfig
//! and context of the global flags are passed on.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::Command,
};

mod files {
    include!(concat!(env!("OUT_DIR"), "/chart.rs"));
}

/// The release name.
pub const RELEASE: &str = "liqo";
/// The oldest Helm that has what liqoctl uses (`--dry-run=server`, `--hide-secret`).
pub const MIN_VERSION: (u64, u64) = (3, 13);

/// `(major, minor)` of `helm version --short` (`v3.14.2+g...`).
pub fn version(short: &str) -> Option<(u64, u64)> {
    let v = short.trim().strip_prefix('v')?;
    let mut parts = v.split(['.', '+', '-']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Why Helm could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum HelmError {
    /// No helm binary.
    #[error(
        "helm not found on PATH: liqoctl install runs Helm (3.13 or newer); install it \
         (https://helm.sh/docs/intro/install/, or your distribution's package) or set HELM to \
         its path"
    )]
    Missing,
    /// `$HELM` is not a file.
    #[error("HELM={0} is not a file")]
    BadEnv(String),
    /// A Helm too old for liqoctl.
    #[error("{path} is Helm {found:?}: liqoctl install needs Helm 3.13 or newer")]
    Version {
        /// The binary.
        path: String,
        /// What it says it is.
        found: String,
    },
    /// Writing the chart or the values.
    #[error("writing {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Helm could not be run.
    #[error("running {command}")]
    Spawn {
        /// The command line.
        command: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Helm answered something liqoctl cannot read.
    #[error("{command} answered {why}")]
    Answer {
        /// The command line.
        command: String,
        /// What is wrong.
        why: String,
    },
    /// Helm failed.
    #[error("{command} failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it said.
        stderr: String,
    },
}

/// A private temporary directory, removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new one under the system's temporary directory (mode 0700).
    pub fn new(tag: &str) -> Result<TempDir, HelmError> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let p = std::env::temp_dir().join(format!("liqoctl-{tag}-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&p)
            .map_err(|source| HelmError::Write {
                path: p.clone(),
                source,
            })?;
        Ok(TempDir(p))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(dir = %self.0.display(), error = %e, "removing a temporary directory");
        }
    }
}

/// Writes `text` to `path` (created, mode 0600).
pub fn write_file(path: &Path, text: &[u8]) -> Result<(), HelmError> {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    let err = |source| HelmError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(err)?;
    f.write_all(text).map_err(err)
}

/// Writes the chart built into liqoctl under `dir`; returns the chart's directory.
pub fn write_chart(dir: &Path) -> Result<PathBuf, HelmError> {
    let root = dir.join("liqo");
    for (rel, bytes) in files::FILES {
        write_file(&root.join(rel), bytes)?;
    }
    Ok(root)
}

/// The chart's version (`version:` of its Chart.yaml), if it has one.
pub fn chart_version(chart_yaml: &str) -> Option<String> {
    chart_yaml.lines().find_map(|l| {
        l.strip_prefix("version:")
            .map(|v| v.trim().trim_matches('"').to_owned())
    })
}

/// The version of the chart built into liqoctl.
pub fn embedded_version() -> Option<String> {
    files::FILES
        .iter()
        .find(|(p, _)| *p == "Chart.yaml")
        .and_then(|(_, b)| chart_version(&String::from_utf8_lossy(b)))
}

/// Helm with the cluster of the global flags.
#[derive(Debug, Clone)]
pub struct Helm {
    path: PathBuf,
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
}

impl Helm {
    /// Finds helm: `$HELM`, else on `PATH`.
    pub fn find(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Helm, HelmError> {
        let path = match std::env::var_os("HELM").filter(|h| !h.is_empty()) {
            Some(h) => {
                let p = PathBuf::from(&h);
                if !p.is_file() {
                    return Err(HelmError::BadEnv(p.display().to_string()));
                }
                p
            }
            None => std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths)
                .map(|d| d.join("helm"))
                .find(|p| p.is_file())
                .ok_or(HelmError::Missing)?,
        };
        let helm = Helm {
            path,
            kubeconfig: kubeconfig.map(Path::to_owned),
            context: context.map(str::to_owned),
        };
        let out = helm.run(&os(&["version", "--short"]))?;
        match version(&out) {
            Some(v) if v >= MIN_VERSION => Ok(helm),
            _ => Err(HelmError::Version {
                path: helm.path.display().to_string(),
                found: out.trim().to_owned(),
            }),
        }
    }

    /// Runs `helm <args>` with the cluster flags; its stdout.
    pub fn run(&self, args: &[OsString]) -> Result<String, HelmError> {
        let mut all: Vec<OsString> = args.to_vec();
        if let Some(k) = &self.kubeconfig {
            all.extend(["--kubeconfig".into(), k.into()]);
        }
        if let Some(c) = &self.context {
            all.extend(["--kube-context".into(), c.into()]);
        }
        let command = format!(
            "helm {}",
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        );
        tracing::debug!(%command, "running helm");
        let out = Command::new(&self.path)
            .args(&all)
            .output()
            .map_err(|source| HelmError::Spawn {
                command: command.clone(),
                source,
            })?;
        if !out.status.success() {
            return Err(HelmError::Failed {
                command,
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The latest revision of release [`RELEASE`] in `ns` (`None`: never installed).
    pub fn last_revision(&self, ns: &str) -> Result<Option<u64>, HelmError> {
        match self.run(&os(&["history", RELEASE, "-n", ns, "-o", "json"])) {
            Ok(out) => last_revision(&out).map_err(|why| HelmError::Answer {
                command: format!("helm history {RELEASE} -n {ns}"),
                why,
            }),
            Err(HelmError::Failed { stderr, .. }) if stderr.contains("not found") => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The highest `revision` of `helm history -o json` (Helm keeps only the last few: their
/// count is not the latest one).
pub fn last_revision(history: &str) -> Result<Option<u64>, String> {
    let entries: Vec<serde_json::Value> =
        serde_json::from_str(history).map_err(|e| e.to_string())?;
    entries
        .iter()
        .map(|e| {
            e.get("revision")
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| format!("an entry without a revision: {e}"))
        })
        .try_fold(None, |max: Option<u64>, r| Ok(max.max(Some(r?))))
}

/// `&str`s as command arguments.
pub fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}
