//! The images of the real nodes: OCI archives (no registry), the lab's own (`e2e/images`: the
//! sandbox's pause and the demo) built by `chart/images/build.sh --images e2e/images --tag lab`
//! into the lab's image directory, every archive there imported into each node; with Liqo from
//! its chart, also the chart's images ([`build_chart`]).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::lab::k8s::K8sLabError;

/// The lab's image tag (the sandbox image is `localhost/liqo-lab/pause:lab`).
pub const TAG: &str = "lab";
/// The registry of the lab's images (and of the chart's, as the lab installs it).
pub const REGISTRY: &str = "localhost";
/// The path between the registry and the program.
pub const PREFIX: &str = "liqo-lab";

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

/// Where the chart's images for the lab are ([`build_chart`]): `chart/` in [`images_dir`].
pub fn chart_dir() -> PathBuf {
    images_dir().join("chart")
}

/// The OCI archives to import; the sandbox image must be one of them. With `chart`, also the
/// chart's images ([`build_chart`]), one per folder of `chart/images`.
pub(super) fn archives(chart: bool) -> Result<Vec<PathBuf>, K8sLabError> {
    let dir = images_dir();
    let mut found = oci_archives(&dir)?;
    if chart {
        let dir = chart_dir();
        // No directory yet: nothing built (said below, naming the first image missing).
        let theirs = match oci_archives(&dir) {
            Ok(found) => found,
            Err(_) if !dir.exists() => Vec::new(),
            Err(e) => return Err(e),
        };
        for program in chart_programs()? {
            if !theirs
                .iter()
                .any(|p| p.ends_with(format!("{program}.oci.tar")))
            {
                return Err(K8sLabError::lab(
                    format!("the chart's images in {}", dir.display()),
                    format!(
                        "no {program}.oci.tar: build them with `bash chart/images/build.sh \
                         --registry {REGISTRY} --repository-prefix {PREFIX} --tag {TAG} --out {}`",
                        dir.display()
                    ),
                ));
            }
        }
        found.extend(theirs);
    }
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

/// The programs the chart runs: a folder with a `Containerfile` each in `chart/images`.
fn chart_programs() -> Result<Vec<String>, K8sLabError> {
    let dir = repo().join("chart/images");
    let mut out: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| K8sLabError::lab(format!("reading {}", dir.display()), e))?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("Containerfile").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    Ok(out)
}

fn oci_archives(dir: &Path) -> Result<Vec<PathBuf>, K8sLabError> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| K8sLabError::lab(format!("reading the lab's images in {}", dir.display()), e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".oci.tar"))
        .collect();
    found.sort();
    Ok(found)
}

/// Builds the chart's images into [`chart_dir`] from the binaries in `bin_dir` (the lab's own
/// build: no release build), named as the lab installs the chart:
/// `localhost/liqo-lab/<program>:lab`.
pub fn build_chart(bin_dir: &Path) -> Result<PathBuf, K8sLabError> {
    let out = chart_dir();
    run_build(
        Command::new("bash")
            .arg(repo().join("chart/images/build.sh"))
            .args(["--registry", REGISTRY, "--repository-prefix", PREFIX])
            .args(["--tag", TAG, "--no-run-check"])
            .args(["--bin-dir".as_ref(), bin_dir.as_os_str()])
            .args(["--out".as_ref(), out.as_os_str()]),
        "building the chart's images for the lab",
    )?;
    Ok(out)
}

fn run_build(cmd: &mut Command, what: &str) -> Result<(), K8sLabError> {
    let status = cmd
        .status()
        .map_err(|e| K8sLabError::lab(format!("{what}: running chart/images/build.sh"), e))?;
    if status.success() {
        Ok(())
    } else {
        Err(K8sLabError::lab(
            what,
            format!("chart/images/build.sh exited {status}; see its output above"),
        ))
    }
}

/// Builds the lab's images into [`images_dir`]: the demo from `bin_dir` (where `liqo-demo`
/// is), the sandbox's pause from the node binaries `node_bin`.
pub fn build(bin_dir: &Path, node_bin: &Path) -> Result<PathBuf, K8sLabError> {
    let out = images_dir();
    run_build(
        Command::new("bash")
            .arg(repo().join("chart/images/build.sh"))
            .args(["--images".as_ref(), repo().join("e2e/images").as_os_str()])
            .args(["--tag", TAG, "--no-run-check"])
            .args(["--bin-dir".as_ref(), bin_dir.as_os_str()])
            .args(["--extra-bin".as_ref(), node_bin.join("pause").as_os_str()])
            .args(["--out".as_ref(), out.as_os_str()]),
        "building the lab's images",
    )?;
    Ok(out)
}
