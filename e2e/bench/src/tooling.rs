//! What installing the bench's peers shares: the versions and modules it fetches, where it
//! finds a program, and how it runs an installer (its output in a log, whose tail a failure
//! shows).

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use super::BenchError;

/// boringtun-cli's version on crates.io.
pub const BORINGTUN_VERSION: &str = "0.7.1";
/// The wireguard-go module.
pub const WGGO_MODULE: &str = "golang.zx2c4.com/wireguard";

/// Installing `what` failed, and why.
pub(crate) fn install_err(what: &str, detail: impl Into<String>) -> BenchError {
    BenchError::Install {
        what: what.into(),
        detail: detail.into(),
    }
}

/// `name` in `$PATH` or the usual system directories.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(
            [
                "/usr/local/sbin",
                "/usr/local/bin",
                "/usr/sbin",
                "/usr/bin",
                "/sbin",
                "/bin",
            ]
            .map(PathBuf::from),
        )
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The last lines of a log, for error messages.
fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs `cmd` with its output in `log`; on failure, the error holds the log's tail.
pub(crate) fn run_logged(what: &str, cmd: &mut Command, log: &Path) -> Result<(), BenchError> {
    let out = fs::File::create(log)
        .map_err(|e| install_err(what, format!("creating {}: {e}", log.display())))?;
    let err = out
        .try_clone()
        .map_err(|e| install_err(what, e.to_string()))?;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| install_err(what, format!("starting {:?}: {e}", cmd.get_program())))?;
    if status.success() {
        Ok(())
    } else {
        Err(install_err(
            what,
            format!("{status} (log {}):\n{}", log.display(), tail(log, 15)),
        ))
    }
}
