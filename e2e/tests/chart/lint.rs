//! `helm lint` passes without a warning, and the chart's version is the workspace's.

use serde_json::Value;

use crate::helm;

/// `helm lint --strict` of the chart with `values` (none: the chart's own) exits 0 and says
/// neither a warning nor an error.
fn lint_is_clean(values: Option<&std::path::Path>) {
    let chart = helm::chart();
    let mut args = vec!["lint".as_ref(), "--strict".as_ref(), chart.as_os_str()];
    if let Some(v) = values {
        args.extend(["--values".as_ref(), v.as_os_str()]);
    }
    let run = helm::run(args);
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(run.ok, "{} failed:\n{all}", run.line);
    assert!(
        all.contains("1 chart(s) linted, 0 chart(s) failed"),
        "{}:\n{all}",
        run.line
    );
    for bad in ["[WARNING]", "[ERROR]", "level=WARN", "level=ERROR"] {
        assert!(!all.contains(bad), "{} said {bad}:\n{all}", run.line);
    }
}

#[test]
fn helm_lint_passes_without_warnings() {
    lint_is_clean(None);
    for case in helm::cases() {
        lint_is_clean(Some(&case.values));
    }
}

/// `version = "..."` of `[workspace.package]` in the workspace's Cargo.toml.
fn workspace_version() -> String {
    let path = helm::repo().join("Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let section = text
        .split("\n[")
        .find(|s| s.starts_with("workspace.package]"))
        .unwrap_or_else(|| panic!("{} has no [workspace.package]", path.display()));
    section
        .lines()
        .find_map(|l| l.strip_prefix("version = "))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .unwrap_or_else(|| panic!("[workspace.package] of {} has no version", path.display()))
}

#[test]
fn the_chart_version_and_app_version_are_the_workspace_version() {
    let path = helm::chart().join("Chart.yaml");
    let chart: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let want = workspace_version();
    assert!(!want.is_empty());
    assert_eq!(chart["apiVersion"], "v2", "{}", path.display());
    assert_eq!(chart["name"], "liqo", "{}", path.display());
    assert_eq!(chart["version"], want.as_str(), "{}", path.display());
    assert_eq!(chart["appVersion"], want.as_str(), "{}", path.display());
}
