//! Builds the chart into liqoctl: every file of `chart/` (but its `tests/` and its images'
//! recipes, `images/`: what `.helmignore` leaves out) as bytes, listed in `$OUT_DIR/chart.rs`,
//! which `install::chart` writes out for Helm.

use std::{
    env, fs,
    path::{Path, PathBuf},
};

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let rel = p.strip_prefix(root).expect("under the chart").to_path_buf();
        if rel == Path::new("tests") || rel == Path::new("images") {
            continue;
        }
        if p.is_dir() {
            walk(root, &p, out);
        } else {
            println!("cargo:rerun-if-changed={}", p.display());
            out.push((rel.to_string_lossy().into_owned(), p));
        }
    }
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest
        .join("../../chart")
        .canonicalize()
        .expect("the chart beside the crate");
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    let mut code = String::from(
        "/// The chart's files: (path in the chart, contents).\npub(super) static FILES: &[(&str, &[u8])] = &[\n",
    );
    for (rel, path) in files {
        code.push_str(&format!(
            "    ({rel:?}, include_bytes!({:?})),\n",
            path.display().to_string()
        ));
    }
    code.push_str("];\n");
    let out = PathBuf::from(env::var("OUT_DIR").expect("set by cargo")).join("chart.rs");
    fs::write(&out, code).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
