//! Generates the gRPC code from `proto/ipam.proto` with a vendored `protoc`, so building needs
//! no system package.

use std::{env, fs, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    println!("cargo:rerun-if-changed=proto/ipam.proto");
    tonic_prost_build::configure().compile_with_config(
        config,
        &["proto/ipam.proto"],
        &["proto"],
    )?;
    // The generator writes `allow` attributes without a reason, which the workspace lints
    // refuse; give each one.
    let out = PathBuf::from(env::var("OUT_DIR")?).join("liqo.ipam.v1.rs");
    let code = fs::read_to_string(&out)?;
    fs::write(&out, with_reasons(&code))?;
    Ok(())
}

/// Adds `reason = "generated code"` to every `allow(...)` attribute that has none.
fn with_reasons(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(i) = rest.find("allow(") {
        let open = i + "allow(".len();
        out.push_str(&rest[..open]);
        rest = &rest[open..];
        // Find the parenthesis closing `allow(`.
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                depth += match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
                depth == 0
            })
            .map_or(rest.len(), |(j, _)| j);
        let inner = &rest[..end];
        if inner.contains("reason") {
            out.push_str(inner);
        } else {
            // The list may end with a trailing comma.
            out.push_str(inner.trim_end().trim_end_matches(','));
            out.push_str(", reason = \"generated code\"");
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}
