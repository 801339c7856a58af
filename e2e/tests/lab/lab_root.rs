//! The lab on the real kernel (needs root): build, connectivity, coexistence, teardown.

use crate::common;

use std::process::Command;

use common::LabGuard;
use dataplane::Netns;
use e2e::{
    lab::{self, Lab, LabError, Prefix, check},
    topology::Topology,
};

fn leftovers(p: &Prefix) -> Vec<String> {
    Netns::list()
        .unwrap()
        .into_iter()
        .filter(|n| p.owns(n))
        .map(|n| n.to_string())
        .collect()
}

fn assert_all_ok(m: &check::Matrix) {
    assert!(m.failures().is_empty(), "{}", m.render());
    for p in &m.probes {
        // Inside a cluster there is no NAT: the server sees the client's own address.
        assert_eq!(
            p.tcp.as_ref().unwrap(),
            &m.endpoints[p.src].addr,
            "{}",
            m.render()
        );
    }
}

#[tokio::test]
async fn two_clusters_every_pod_reaches_every_pod_of_its_cluster() {
    let g = LabGuard::new('e');
    let lab = lab::up(g.0.clone(), Topology::preset("two-clusters").unwrap())
        .await
        .unwrap();
    let m = check::intra_cluster(&lab).unwrap();
    assert_eq!(m.probes.len(), 2 * 4 * 3, "2 clusters x 4 pods x 3 peers");
    assert_all_ok(&m);
    assert_eq!(
        leftovers(&g.0).len(),
        17,
        "wan + 2 x (lan + 2 nodes + 4 pods + gateway)"
    );

    let r = lab::down(&g.0).unwrap();
    assert_eq!((r.namespaces, r.state), (17, true));
    assert!(
        r.processes >= 4,
        "an IPAM service and a gateway per cluster: {r:?}"
    );
    assert!(leftovers(&g.0).is_empty());
    assert!(matches!(Lab::load(&g.0), Err(LabError::NotUp(_))));
    assert_eq!(
        lab::down(&g.0).unwrap(),
        lab::DownReport::default(),
        "down twice is harmless"
    );
}

#[tokio::test]
async fn two_labs_with_different_prefixes_coexist() {
    let (a, b) = (LabGuard::new('e'), LabGuard::new('e'));
    let la = lab::up(a.0.clone(), Topology::preset("two-clusters").unwrap())
        .await
        .unwrap();
    let lb = lab::up(b.0.clone(), Topology::preset("two-clusters").unwrap())
        .await
        .unwrap();
    assert_all_ok(&check::intra_cluster(&la).unwrap());
    assert_all_ok(&check::intra_cluster(&lb).unwrap());
    lab::down(&a.0).unwrap();
    assert!(leftovers(&a.0).is_empty());
    assert_eq!(leftovers(&b.0).len(), 17, "the other lab is untouched");
    assert_all_ok(&check::intra_cluster(&lb).unwrap());
}

#[tokio::test]
async fn down_after_a_crash_leaves_nothing() {
    let g = LabGuard::new('e');
    let lab = lab::up(g.0.clone(), Topology::preset("one-cluster").unwrap())
        .await
        .unwrap();
    // A process left running inside a pod, a namespace from a half-finished `up`, no state file.
    let mut stray = lab
        .netns(&"rome/n0-p0".parse().unwrap())
        .unwrap()
        .command("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let half: dataplane::NetnsName = format!("{}-rome-n9", g.0).parse().unwrap();
    Netns::create(&half).unwrap();
    std::fs::remove_file(format!("/run/liqo-lab/{}.json", g.0)).unwrap();

    let r = lab::down(&g.0).unwrap();
    assert!(r.processes >= 1, "{r:?}");
    assert_eq!(
        r.namespaces,
        1 + 1 + 2 + 4 + 1 + 1,
        "wan, lan, nodes, pods, gateway, stray"
    );
    assert!(leftovers(&g.0).is_empty());
    assert!(
        !stray.wait().unwrap().success(),
        "the stray process was killed"
    );
}

#[tokio::test]
async fn up_twice_is_refused_and_keeps_the_first_lab() {
    let g = LabGuard::new('e');
    let lab = lab::up(g.0.clone(), Topology::preset("one-cluster").unwrap())
        .await
        .unwrap();
    let e = lab::up(g.0.clone(), Topology::preset("two-clusters").unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(e, LabError::AlreadyUp { namespaces: 9, .. }),
        "{e}"
    );
    assert_all_ok(&check::intra_cluster(&lab).unwrap());
    assert_eq!(Lab::load(&g.0).unwrap().topology, lab.topology);
}

fn cli(prefix: &Prefix, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_liqo-lab"))
        .arg("--prefix")
        .arg(prefix.as_str())
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn cli_round_trip_and_bad_topology() {
    let g = LabGuard::new('e');
    let dir = std::env::temp_dir().join(format!("liqo-lab-{}", g.0));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "clusters:\n  - name: rome\n    podCIDR: 10.200.0.0/16\n    nodes:\n      - name: n0\n        podSlice: 10.200.0.0/23\n      - name: n1\n        podSlice: 10.200.1.0/24\n").unwrap();
    let out = cli(&g.0, &["up", "--file", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("clusters[0].nodes[1].podSlice") && err.contains("overlaps"),
        "{err}"
    );
    assert!(leftovers(&g.0).is_empty(), "a bad topology creates nothing");

    let out = cli(&g.0, &["up", "--preset", "one-cluster"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli(&g.0, &["status", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["namespaces"].as_array().unwrap().len(), 2 + 4);
    assert!(
        v["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["present"] == true)
    );
    let out = cli(
        &g.0,
        &[
            "exec",
            "rome/n0-p0",
            "--",
            "ping",
            "-c1",
            "-W2",
            "10.200.1.3",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = cli(&g.0, &["exec", "rome/n0-p0", "--", "sh", "-c", "exit 3"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "exec passes the exit code through"
    );
    let out = cli(&g.0, &["check"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("12 of 12 probes passed"));
    let out = cli(&g.0, &["down"]);
    assert!(out.status.success());
    assert!(leftovers(&g.0).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn quickstart_shows_every_pod_the_matrix_and_the_speed() {
    let g = LabGuard::new('q');
    let out = cli(&g.0, &["quickstart"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every pod with its own address and its address in the other cluster.
    for pod in ["n0-p0", "n0-p1", "n1-p0", "n1-p1"] {
        for (cluster, other) in [("rome", "milan"), ("milan", "rome")] {
            assert!(
                text.lines().any(|l| l.contains(cluster)
                    && l.contains(pod)
                    && l.contains(&format!("(as seen from {other})"))),
                "{cluster}/{pod} missing:\n{text}"
            );
        }
    }
    assert!(text.contains("56 of 56 probes passed"), "{text}");
    assert!(
        text.contains("across clusters") && text.contains("Gbit/s"),
        "{text}"
    );
    assert!(!text.contains("FAILED"), "{text}");
    assert!(
        text.contains(&format!("liqo-lab --prefix {} down", g.0)),
        "{text}"
    );
}

/// The first `sh` code block after the heading `title` of the README.
fn readme_block(title: &str) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let after = &readme[readme.find(title).unwrap_or_else(|| panic!("no {title}"))..];
    let start = after.find("```sh\n").unwrap() + "```sh\n".len();
    after[start..start + after[start..].find("```").unwrap()].to_owned()
}

#[test]
fn the_readme_commands_need_no_sudo_as_root_and_the_build_shows_progress() {
    let starts = |block: &str, cmd: &str| block.lines().any(|l| l.trim_start().starts_with(cmd));
    // A fresh Debian root shell has no sudo: the commands must work without it.
    let try_it = readme_block("## Try it");
    assert!(starts(&try_it, "bash scripts/quickstart.sh"), "{try_it}");
    assert!(!starts(&try_it, "sudo "), "{try_it}");
    let tests = readme_block("## Run all the tests");
    assert!(starts(&tests, "bash .ci/run"), "{tests}");
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/quickstart.sh"
    ))
    .unwrap();
    let build = script.lines().find(|l| l.contains("cargo build")).unwrap();
    assert!(
        !build
            .split_whitespace()
            .any(|w| w == "-q" || w == "--quiet"),
        "the release build runs for minutes: its progress must show ({build})"
    );
}

/// A directory with `id`, `readlink`, `dirname`, `env` and `bash` (and `sudo` if given), the
/// only programs a script's root check may find, and a copy of the script (`scripts/quickstart.sh`
/// or `.ci/run`) as `script.sh`; removed on drop.
struct FakePath(std::path::PathBuf);

impl FakePath {
    fn new(tag: &str, sudo: Option<&str>, script: &str) -> FakePath {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("liqo-qs-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        for tool in ["id", "readlink", "dirname", "env", "bash"] {
            let found = ["/usr/bin", "/bin"]
                .iter()
                .map(|d| std::path::Path::new(d).join(tool))
                .find(|p| p.exists())
                .unwrap();
            std::os::unix::fs::symlink(found, dir.join(tool)).unwrap();
        }
        if let Some(body) = sudo {
            let p = dir.join("sudo");
            std::fs::write(&p, body).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let copy = dir.join("script.sh");
        std::fs::copy(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(script),
            &copy,
        )
        .unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o644)).unwrap();
        FakePath(dir)
    }

    /// Runs the script as `nobody` with only this directory on PATH.
    fn run_as_nobody(&self) -> std::process::Output {
        // The child's PATH holds only the fake directory: name setpriv by its path.
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("setpriv (util-linux)");
        Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(self.0.join("bash"))
            .arg(self.0.join("script.sh"))
            .args(["--prefix", "qsx"])
            .env_clear()
            .env("PATH", &self.0)
            .env("HOME", &self.0)
            .output()
            .unwrap()
    }
}

impl Drop for FakePath {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            eprintln!("removing {}: {e}", self.0.display());
        }
    }
}

#[test]
fn the_quickstart_asks_sudo_for_root_or_says_to_run_as_root() {
    asks_sudo_or_says_root("quickstart", "scripts/quickstart.sh");
}

#[test]
fn the_test_command_asks_sudo_for_root_or_says_to_run_as_root() {
    asks_sudo_or_says_root("ci", ".ci/run");
}

/// Run as `nobody`, `script` exits 1 saying to run it as root where there is no sudo, and
/// re-runs itself through sudo (keeping PATH) where there is.
fn asks_sudo_or_says_root(tag: &str, script: &str) {
    dataplane::netns::require_root();
    let no_sudo = FakePath::new(&format!("{tag}-nosudo"), None, script);
    let out = no_sudo.run_as_nobody();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("run it as root"), "{err}");

    let with_sudo = FakePath::new(
        &format!("{tag}-sudo"),
        Some("#!/bin/sh\necho \"SUDO $*\"\n"),
        script,
    );
    let out = with_sudo.run_as_nobody();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("SUDO "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.starts_with("SUDO env PATH=")
            && line.ends_with(&format!(
                "bash {} --prefix qsx",
                with_sudo.0.join("script.sh").display()
            )),
        "{line}"
    );
}
