//! The images of the real nodes: OCI archives (no registry), the lab's own (`e2e/images`: the
//! sandbox's pause and the demo) built by `chart/images/build.sh --images e2e/images --tag lab`
//! into the lab's image directory, every archive there imported into each node.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::lab::k8s::K8sLabError;

/// The lab's image tag (the sandbox image is `localhost/liqo-lab/pause:lab`).
pub const TAG: &str = "lab";

/// Where the images imported into every node are: `$LIQO_LAB_IMAGES`, else
/// `target/lab-images` of the source tree.
pub fn images_dir() -> PathBuf {
    std::env::var_os("LIQO_LAB_IMAGES")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/lab-images"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The OCI archives to import; the sandbox image must be one of them.
pub(super) fn archives() -> Result<Vec<PathBuf>, K8sLabError> {
    let dir = images_dir();
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| K8sLabError::lab(format!("reading the lab's images in {}", dir.display()), e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".oci.tar"))
        .collect();
    found.sort();
    if !found.iter().any(|p| p.ends_with("pause.oci.tar")) {
        return Err(K8sLabError::lab(
            format!("the lab's images in {}", dir.display()),
            format!(
                "no pause.oci.tar (the sandbox image): build them with `bash chart/images/build.sh \
                 --images e2e/images --tag {TAG} --out {}` or set LIQO_LAB_IMAGES",
                dir.display()
            ),
        ));
    }
    Ok(found)
}

/// Builds the lab's images into [`images_dir`]: the demo from `bin_dir` (where `liqo-demo`
/// is), the sandbox's pause from the node binaries `node_bin`.
pub fn build(bin_dir: &Path, node_bin: &Path) -> Result<PathBuf, K8sLabError> {
    let out = images_dir();
    let script = repo().join("chart/images/build.sh");
    let status = Command::new("bash")
        .arg(&script)
        .args(["--images".as_ref(), repo().join("e2e/images").as_os_str()])
        .args(["--tag", TAG, "--no-run-check"])
        .args(["--bin-dir".as_ref(), bin_dir.as_os_str()])
        .args(["--extra-bin".as_ref(), node_bin.join("pause").as_os_str()])
        .args(["--out".as_ref(), out.as_os_str()])
        .status()
        .map_err(|e| K8sLabError::lab(format!("running {}", script.display()), e))?;
    if status.success() {
        Ok(out)
    } else {
        Err(K8sLabError::lab(
            "building the lab's images",
            format!("{} exited {status}; see its output above", script.display()),
        ))
    }
}
