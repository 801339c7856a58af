//! Running helm on the chart: the binary, the values matrix, a render and its objects.

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

/// The release every render is named after.
pub(crate) const RELEASE: &str = "liqo";
/// The namespace every render is made for (the one the files of `chart/files/` hard-code).
pub(crate) const NAMESPACE: &str = "liqo";
/// The Secret liqo-ipam makes and keeps itself (`--tls-secret`): never in a render.
pub(crate) const IPAM_SECRET: &str = "liqo-ipam-tls";

/// The repository's root.
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The chart.
pub(crate) fn chart() -> PathBuf {
    repo().join("chart")
}

/// helm: `$HELM`, else the one `e2e/k8s/build.sh` puts beside the Kubernetes binaries
/// (`$LIQO_K8S_BIN`, or built into its cache); a test without it fails, saying why.
pub(crate) fn binary() -> PathBuf {
    if let Some(h) = std::env::var_os("HELM").filter(|h| !h.is_empty()) {
        let p = PathBuf::from(h);
        assert!(p.is_file(), "HELM={} is not a file", p.display());
        return p;
    }
    let bins = testkit::k8s::binaries().unwrap_or_else(|e| {
        panic!("helm: set HELM, or LIQO_K8S_BIN to e2e/k8s/build.sh's output: {e}")
    });
    bins.path("helm")
}

/// A finished helm command.
pub(crate) struct Run {
    /// The command line, for messages.
    pub(crate) line: String,
    /// Whether it exited 0.
    pub(crate) ok: bool,
    /// Its stdout.
    pub(crate) stdout: String,
    /// Its stderr.
    pub(crate) stderr: String,
}

impl Run {
    /// Its stdout, once it exited 0 (else a failure with its stderr).
    pub(crate) fn expect_ok(self) -> String {
        assert!(self.ok, "{} failed:\n{}", self.line, self.stderr);
        self.stdout
    }
}

/// Runs helm with `args`.
pub(crate) fn run<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let line = format!(
        "helm {}",
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = Command::new(binary())
        .args(&args)
        .output()
        .unwrap_or_else(|e| panic!("running {line}: {e}"));
    Run {
        line,
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `helm template` of the chart with the values file `values` and `extra` arguments.
pub(crate) fn template(values: &Path, extra: &[&str]) -> Run {
    let chart = chart();
    let mut args: Vec<&OsStr> = vec![
        "template".as_ref(),
        RELEASE.as_ref(),
        chart.as_os_str(),
        "--namespace".as_ref(),
        NAMESPACE.as_ref(),
        "--values".as_ref(),
        values.as_os_str(),
    ];
    args.extend(extra.iter().map(OsStr::new));
    run(args)
}

/// One case of the values matrix.
pub(crate) struct Case {
    /// Its name (the values file's stem, the snapshot's).
    pub(crate) name: String,
    /// Its values file.
    pub(crate) values: PathBuf,
}

/// The values matrix: every `chart/tests/values/*.yaml`, by name.
pub(crate) fn cases() -> Vec<Case> {
    let dir = chart().join("tests/values");
    let mut cases: Vec<Case> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|values| Case {
            name: values.file_stem().unwrap().to_string_lossy().into_owned(),
            values,
        })
        .collect();
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(
        cases.iter().any(|c| c.name == "defaults"),
        "{} has no defaults.yaml",
        dir.display()
    );
    cases
}

/// The values file of the case `name`.
pub(crate) fn case(name: &str) -> PathBuf {
    let p = chart().join("tests/values").join(format!("{name}.yaml"));
    assert!(p.is_file(), "{} is missing", p.display());
    p
}

/// The objects of a render (empty documents skipped).
pub(crate) fn objects(render: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(render)
        .unwrap_or_else(|e| panic!("the render is not YAML: {e}\n{render}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The object of `kind` named `name` in `objects`.
pub(crate) fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}
