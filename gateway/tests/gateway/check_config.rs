//! `liqo-gateway check-config` as a shell pipeline uses it (no root needed).

use crate::common;

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
};

use common::BIN;

#[test]
fn check_config_piped_into_a_reader_that_stops_early_exits_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    // Far more than a pipe buffer (64 KiB) of output, so the writer meets the closed pipe.
    std::fs::write(
        &config,
        format!(
            "namespace: liqo-gw-check\nprivateKeyFile: {}\nlocalPodCIDR: 10.200.0.0/16\npeers:\n{}",
            dir.path().join("key").display(),
            common::endpointless_peers(1024)
        ),
    )
    .unwrap();
    // `| head -1`: read one line, then close the pipe.
    let mut child = Command::new(BIN)
        .args(["check-config", "--config"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("ok: "), "{first:?}");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}
