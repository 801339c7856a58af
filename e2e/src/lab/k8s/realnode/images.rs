//! The images of the real nodes: OCI archives (no registry), the lab's own (`e2e/images`: the
//! sandbox's pause and the demo) built by `chart/images/build.sh --images e2e/images --tag lab`
//! into the lab's image directory, every archive there imported into each node; with Liqo from
//! its chart, also the chart's images ([`build_chart`]).

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::Command,
    time::UNIX_EPOCH,
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
    chart_like_programs(&repo().join("chart/images"))
}

/// The programs of a folder of images: a subfolder with a `Containerfile` each.
fn chart_like_programs(dir: &Path) -> Result<Vec<String>, K8sLabError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)
        .map_err(|e| K8sLabError::lab(format!("reading {}", dir.display()), e))?
    {
        let entry = entry.map_err(|e| K8sLabError::lab(format!("reading {}", dir.display()), e))?;
        if entry.path().join("Containerfile").is_file() {
            out.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    Ok(out)
}

fn oci_archives(dir: &Path) -> Result<Vec<PathBuf>, K8sLabError> {
    let what = || format!("reading the lab's images in {}", dir.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| K8sLabError::lab(what(), e))? {
        let path = entry.map_err(|e| K8sLabError::lab(what(), e))?.path();
        if path.to_string_lossy().ends_with(".oci.tar") {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// Builds the chart's images into [`chart_dir`] from the binaries in `bin_dir` (the lab's own
/// build: no release build), named as the lab installs the chart:
/// `localhost/liqo-lab/<program>:lab`.
pub fn build_chart(bin_dir: &Path) -> Result<PathBuf, K8sLabError> {
    let out = chart_dir();
    let args: Vec<OsString> = [
        "--registry",
        REGISTRY,
        "--repository-prefix",
        PREFIX,
        "--tag",
        TAG,
        "--no-run-check",
    ]
    .iter()
    .map(OsString::from)
    .chain(["--bin-dir".into(), bin_dir.into()])
    .collect();
    let src = repo().join("chart/images");
    run_build(
        &src,
        bin_dir,
        &[],
        &args,
        &out,
        "the chart's images for the lab",
    )?;
    Ok(out)
}

/// Runs `chart/images/build.sh ARGS --out OUT`, unless every input ([`inputs`]) and every
/// archive is as the last successful build into `out` left them (kept in `out/.inputs`): a lab
/// started again with the same binaries reuses the archives instead of spending half a minute
/// remaking them, and archives made since by hand (other binaries) are made again.
fn run_build(
    src: &Path,
    bin_dir: &Path,
    extra: &[PathBuf],
    args: &[OsString],
    out: &Path,
    what: &str,
) -> Result<(), K8sLabError> {
    let stamp = out.join(".inputs");
    let programs = chart_like_programs(src)?;
    let archives: Vec<PathBuf> = programs
        .iter()
        .map(|p| out.join(format!("{p}.oci.tar")))
        .collect();
    let now = inputs(src, &programs, bin_dir, extra, args)?;
    if archives.iter().all(|a| a.is_file()) {
        let current = now.clone() + &files_text(&archives)?;
        // An unreadable stamp (none yet, or damaged) only means building again.
        if std::fs::read_to_string(&stamp).is_ok_and(|was| was == current) {
            println!("   {what}: up to date in {}", out.display());
            return Ok(());
        }
    }
    // A build that fails half-way leaves no claim that the archives match.
    match std::fs::remove_file(&stamp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(K8sLabError::lab(format!("removing {}", stamp.display()), e)),
    }
    let status = Command::new("bash")
        .arg(repo().join("chart/images/build.sh"))
        .args(args)
        .args(["--out".as_ref(), out.as_os_str()])
        .status()
        .map_err(|e| {
            K8sLabError::lab(format!("building {what}: running chart/images/build.sh"), e)
        })?;
    if !status.success() {
        return Err(K8sLabError::lab(
            format!("building {what}"),
            format!("chart/images/build.sh exited {status}; see its output above"),
        ));
    }
    let made = files_text(&archives)?;
    std::fs::write(&stamp, now + &made)
        .map_err(|e| K8sLabError::lab(format!("writing {}", stamp.display()), e))
}

/// What an image build reads, as text: the build script, every file of the images' folder and
/// every binary an image copies in (size and modification time: cargo and the Go build rewrite
/// a binary they change), and the build's flags.
fn inputs(
    src: &Path,
    programs: &[String],
    bin_dir: &Path,
    extra: &[PathBuf],
    args: &[OsString],
) -> Result<String, K8sLabError> {
    let mut files = vec![repo().join("chart/images/build.sh")];
    for program in programs {
        let dir = src.join(program);
        let containerfile = dir.join("Containerfile");
        let text = std::fs::read_to_string(&containerfile)
            .map_err(|e| K8sLabError::lab(format!("reading {}", containerfile.display()), e))?;
        for entry in std::fs::read_dir(&dir)
            .map_err(|e| K8sLabError::lab(format!("reading {}", dir.display()), e))?
        {
            let entry =
                entry.map_err(|e| K8sLabError::lab(format!("reading {}", dir.display()), e))?;
            files.push(entry.path());
        }
        files.extend(
            text.lines()
                .filter_map(|l| l.strip_prefix("COPY bin/"))
                .filter_map(|l| l.split_whitespace().next())
                .map(|bin| match extra.iter().find(|x| x.ends_with(bin)) {
                    Some(x) => x.clone(),
                    None => bin_dir.join(bin),
                }),
        );
    }
    files.sort();
    files.dedup();
    let text: String = args
        .iter()
        .map(|a| format!("arg {}\n", a.to_string_lossy()))
        .collect();
    Ok(text + &files_text(&files)?)
}

/// One line per file: its path, size and modification time, or `missing` (a missing input is
/// said by the build itself, which then fails).
fn files_text(files: &[PathBuf]) -> Result<String, K8sLabError> {
    let mut text = String::new();
    for f in files {
        let meta = match std::fs::metadata(f) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                text += &format!("file {} missing\n", f.display());
                continue;
            }
            Err(e) => return Err(K8sLabError::lab(format!("reading {}", f.display()), e)),
        };
        let mtime = meta
            .modified()
            .map_err(|e| K8sLabError::lab(format!("the modification time of {}", f.display()), e))?
            .duration_since(UNIX_EPOCH)
            // A time before 1970 (a clock set wrong) counts as 0: the size still tells.
            .map_or(0, |d| d.as_nanos());
        text += &format!("file {} {} {mtime}\n", f.display(), meta.len());
    }
    Ok(text)
}

/// Builds the lab's images into [`images_dir`]: the demo from `bin_dir` (where `liqo-demo`
/// is), the sandbox's pause from the node binaries `node_bin`.
pub fn build(bin_dir: &Path, node_bin: &Path) -> Result<PathBuf, K8sLabError> {
    let out = images_dir();
    let src = repo().join("e2e/images");
    let pause = node_bin.join("pause");
    let args: Vec<OsString> = vec![
        "--images".into(),
        src.clone().into(),
        "--tag".into(),
        TAG.into(),
        "--no-run-check".into(),
        "--bin-dir".into(),
        bin_dir.into(),
        "--extra-bin".into(),
        pause.clone().into(),
    ];
    run_build(&src, bin_dir, &[pause], &args, &out, "the lab's images")?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of one image copying `liqo-demo` and `pause`, and a bin dir with `liqo-demo`.
    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("images");
        std::fs::create_dir_all(src.join("demo")).unwrap();
        std::fs::write(
            src.join("demo/Containerfile"),
            "FROM scratch\nCOPY bin/liqo-demo /liqo-demo\nCOPY bin/pause /pause\n",
        )
        .unwrap();
        let bins = t.path().join("bin");
        std::fs::create_dir_all(&bins).unwrap();
        std::fs::write(bins.join("liqo-demo"), "v1").unwrap();
        let pause = t.path().join("node/pause");
        std::fs::create_dir_all(pause.parent().unwrap()).unwrap();
        std::fs::write(&pause, "p").unwrap();
        (t, src, bins, pause)
    }

    fn programs(src: &Path) -> Vec<String> {
        chart_like_programs(src).unwrap()
    }

    #[test]
    fn inputs_name_every_copied_binary_and_change_with_one() {
        let (_t, src, bins, pause) = setup();
        let args = [OsString::from("--tag"), OsString::from("lab")];
        let a = inputs(
            &src,
            &programs(&src),
            &bins,
            std::slice::from_ref(&pause),
            &args,
        )
        .unwrap();
        assert!(a.contains("arg --tag\narg lab\n"), "{a}");
        assert!(
            a.contains(&format!("file {} 2 ", bins.join("liqo-demo").display())),
            "{a}"
        );
        // The extra binary is taken from where it was given, not from the bin dir.
        assert!(a.contains(&format!("file {} 1 ", pause.display())), "{a}");
        assert!(a.contains("/demo/Containerfile "), "{a}");
        assert_eq!(
            a,
            inputs(
                &src,
                &programs(&src),
                &bins,
                std::slice::from_ref(&pause),
                &args
            )
            .unwrap()
        );
        std::fs::write(bins.join("liqo-demo"), "v22").unwrap();
        let b = inputs(
            &src,
            &programs(&src),
            &bins,
            std::slice::from_ref(&pause),
            &args,
        )
        .unwrap();
        assert_ne!(a, b, "a rebuilt binary must make the images again");
        let other = [OsString::from("--tag"), OsString::from("other")];
        assert_ne!(
            b,
            inputs(&src, &programs(&src), &bins, &[pause], &other).unwrap()
        );
    }

    #[test]
    fn a_missing_binary_is_named_not_an_error() {
        let (_t, src, bins, _pause) = setup();
        let a = inputs(&src, &programs(&src), &bins, &[], &[]).unwrap();
        assert!(
            a.contains(&format!("file {} missing", bins.join("pause").display())),
            "{a}"
        );
    }
}
