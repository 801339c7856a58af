//! Finding the control-plane binaries: `$LIQO_K8S_BIN` if set, else the output of
//! `e2e/k8s/build.sh` (which builds them once into its cache and returns at once afterwards).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use super::error::K8sError;

/// The binaries of one build.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// Their directory.
    pub dir: PathBuf,
}

/// Every file a cluster needs from the build.
const NEEDED: &[&str] = &[
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "kwok-stage-fast.yaml",
    "kubectl",
    "helm",
];

impl Binaries {
    /// The path of `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn check(dir: PathBuf) -> Result<Binaries, K8sError> {
        let missing: Vec<&str> = NEEDED
            .iter()
            .copied()
            .filter(|n| !dir.join(n).is_file())
            .collect();
        if missing.is_empty() {
            Ok(Binaries { dir })
        } else {
            Err(K8sError::Binaries(format!(
                "{} lacks {}",
                dir.display(),
                missing.join(", ")
            )))
        }
    }
}

/// The build script in the source tree this crate was built from.
pub(crate) fn build_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../k8s/build.sh")
}

/// The binaries: `$LIQO_K8S_BIN`, else built (or found in the cache) by `e2e/k8s/build.sh`.
pub fn binaries() -> Result<Binaries, K8sError> {
    if let Some(dir) = std::env::var_os("LIQO_K8S_BIN").filter(|d| !d.is_empty()) {
        return Binaries::check(dir.into());
    }
    Binaries::check(run_build(None)?)
}

/// Every file a real node needs from `build.sh node`.
const NODE_NEEDED: &[&str] = &[
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
    "coredns",
    "pause",
];

/// The binaries of a real node (kubelet, kube-proxy, containerd, runc, CoreDNS, pause):
/// `$LIQO_K8S_NODE_BIN`, else built (or found in the cache) by `e2e/k8s/build.sh node`.
pub fn node_binaries() -> Result<Binaries, K8sError> {
    let dir = match std::env::var_os("LIQO_K8S_NODE_BIN").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => run_build(Some("node"))?,
    };
    let missing: Vec<&str> = NODE_NEEDED
        .iter()
        .copied()
        .filter(|n| !dir.join(n).is_file())
        .collect();
    if missing.is_empty() {
        Ok(Binaries { dir })
    } else {
        Err(K8sError::Binaries(format!(
            "{} lacks {} (run e2e/k8s/build.sh node)",
            dir.display(),
            missing.join(", ")
        )))
    }
}

/// Runs the build script (with `what`, if any); the directory its last line names.
fn run_build(what: Option<&str>) -> Result<PathBuf, K8sError> {
    let script = build_script();
    let out = Command::new("bash")
        .arg(&script)
        .args(what)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| K8sError::Binaries(format!("running {}: {e}", script.display())))?;
    if !out.status.success() {
        return Err(K8sError::Binaries(format!(
            "{} {} failed ({}); see its output above",
            script.display(),
            what.unwrap_or_default(),
            out.status
        )));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(PathBuf::from(
        stdout.lines().last().unwrap_or_default().trim(),
    ))
}
