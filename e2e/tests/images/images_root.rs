//! Every image built by `chart/images/build.sh` runs its program as the chart runs it, and the
//! gateway's image carries the lab's cross-cluster check (needs root).

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use dataplane::netns::require_root;
use e2e::lab::{self, GATEWAY_RUN_ENV, Lab, Prefix, check};

use crate::{
    chart::{self, Container},
    podman::Podman,
};

/// The workspace's version: every binary prints it, every image is tagged with it (the chart's
/// appVersion, which the chart test keeps equal to it).
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The lab: two clusters with the same pod CIDR (the gateway's NAT is needed), two nodes each
/// (the overlay to the gateway node), one pod per node.
const TOPOLOGY: &str = "
clusters:
  - name: rome
    podCIDR: 10.200.0.0/16
    nodes: 2
    podsPerNode: 1
  - name: milan
    podCIDR: 10.200.0.0/16
    nodes: 2
    podsPerNode: 1
";

/// The test's podman storage and lab prefix; dropped (also on a failure): the containers are
/// stopped (each gateway removes its namespace on SIGTERM), the lab is taken down, then the
/// storage is removed with every container and image in it ([`Podman`]'s drop).
struct Guard {
    prefix: Prefix,
    podman: Podman,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Err(e) = self.podman.stop_all() {
            eprintln!("cleanup: {e}");
        }
        if let Err(e) = lab::down(&self.prefix) {
            eprintln!("cleanup: taking lab {} down: {e}", self.prefix);
        }
    }
}

/// The stdout of `cmd`, which must exit 0 (else a failure naming it, with its output).
fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `--ulimit` flags at this process's hard limits: podman would ask for more than a process
/// without CAP_SYS_RESOURCE may have, and lowers its own process limit to 32768 there.
fn ulimits() -> Vec<String> {
    let limits = std::fs::read_to_string("/proc/self/limits").expect("/proc/self/limits");
    let hard = |name: &str| -> u64 {
        let line = limits
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} in /proc/self/limits"));
        let v = line[name.len()..].split_whitespace().nth(1).unwrap_or("");
        if v == "unlimited" {
            1 << 20
        } else {
            v.parse()
                .unwrap_or_else(|_| panic!("{name:?} in /proc/self/limits: {v:?}"))
        }
    };
    let nofile = hard("Max open files");
    let nproc = hard("Max processes").min(32768);
    vec![
        format!("--ulimit=nofile={nofile}:{nofile}"),
        format!("--ulimit=nproc={nproc}:{nproc}"),
    ]
}

/// The binaries' directory: the one holding this build's liqo-gateway.
fn bin_dir() -> PathBuf {
    let gw = testkit::bin("liqo-gateway")
        .unwrap_or_else(|e| panic!("{e} (build them first: cargo build --workspace --bins)"));
    gw.parent().expect("a binary's directory").to_owned()
}

/// Runs `chart/images/build.sh` on the binaries of `bins` into `out` (no run check: this test
/// makes its own); its stdout.
fn build(bins: &Path, out: &Path) -> String {
    let script = chart::repo().join("chart/images/build.sh");
    stdout_of(
        Command::new("bash")
            .arg(&script)
            .arg("--bin-dir")
            .arg(bins)
            .arg("--out")
            .arg(out)
            .arg("--no-run-check")
            .env("TMPDIR", out),
    )
}

#[test]
fn every_image_runs_as_the_chart_runs_it_and_the_gateway_image_carries_the_lab() {
    require_root();
    let t0 = Instant::now();
    let g = Guard {
        prefix: format!("im{}", std::process::id() % 100_000)
            .parse()
            .unwrap(),
        podman: Podman::new(),
    };
    let podman = &g.podman;
    let out = podman.dir().join("out");
    std::fs::create_dir(&out).unwrap();

    // The chart's programs are the images' (a program without a Containerfile, or the other
    // way round, fails here, named).
    let containers = chart::containers();
    let programs: BTreeSet<&str> = containers.iter().map(|c| c.program.as_str()).collect();
    let images_dir = chart::repo().join("chart/images");
    let recipes: BTreeSet<String> = std::fs::read_dir(&images_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Containerfile").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        programs,
        recipes.iter().map(String::as_str).collect(),
        "the chart's programs and {}/*/Containerfile",
        images_dir.display()
    );

    let table = build(&bin_dir(), &out);
    let built = t0.elapsed();
    for p in &programs {
        let line = table
            .lines()
            .find(|l| l.contains(&format!("/{p}:{VERSION} ")));
        assert!(
            line.is_some_and(|l| l.ends_with(&format!(" {p} {VERSION}"))),
            "build.sh's table has no line for {p} {VERSION}:\n{table}"
        );
    }
    eprintln!("{table}");

    // Each archive loads under the chart's name for it.
    for p in &programs {
        let archive = out.join(format!("{p}.oci.tar"));
        let loaded = podman.ok(&["load", "--input", archive.to_str().unwrap()]);
        let c = containers.iter().find(|c| c.program == *p).unwrap();
        assert!(
            loaded.contains(&format!("Loaded image: {}", c.image)),
            "{}: loaded {loaded:?}, the chart runs {}",
            archive.display(),
            c.image
        );
    }
    let loaded = t0.elapsed();

    // Each container's program prints its version with the container's security context, and
    // each image's user is the chart's (non-root where the chart says so).
    let limits = ulimits();
    let run = |c: &Container, extra: &[String], entrypoint: &str, args: &[&str]| -> String {
        let mut a: Vec<String> = ["run", "--rm", "--pull=never", "--network=none"]
            .map(String::from)
            .to_vec();
        a.extend(limits.iter().cloned());
        a.extend(extra.iter().cloned());
        a.push(format!("--entrypoint={entrypoint}"));
        a.push(c.image.clone());
        a.extend(args.iter().map(|s| (*s).to_owned()));
        podman.ok(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let mut seen = BTreeSet::new();
    for c in containers.iter().filter(|c| seen.insert(c.program.clone())) {
        let flags = chart::security_flags(c);
        let mut binaries = vec![c.program.clone()];
        if c.program == "liqo-controller-manager" {
            // Its virtual kubelets, and liqoctl move volume's Jobs.
            binaries.extend(["liqo-virtual-kubelet".into(), "liqo-mover".into()]);
        }
        for b in &binaries {
            let got = run(c, &flags, &format!("/usr/local/bin/{b}"), &["--version"]);
            assert_eq!(
                got,
                format!("{b} {VERSION}\n"),
                "{} ({}): {b} --version",
                c.what,
                c.image
            );
        }
        // The image's own user (no --user): the one the chart runs it as.
        let id = run(c, &[], "id", &["-u"]);
        let want = c.run_as_user();
        assert_eq!(
            id.trim(),
            want.to_string(),
            "{}: the user of {}",
            c.what,
            c.image
        );
        if c.security()["runAsNonRoot"] == true {
            assert_ne!(want, 0, "{}: runAsNonRoot", c.what);
        }
    }
    // The gateway runs nft for its NAT table: its image carries it.
    let gateway = containers
        .iter()
        .find(|c| c.program == "liqo-gateway")
        .expect("the chart runs liqo-gateway");
    let nft = run(
        gateway,
        &chart::security_flags(gateway),
        "nft",
        &["--version"],
    );
    assert!(
        nft.starts_with("nftables v"),
        "nft --version in {}: {nft:?}",
        gateway.image
    );
    let ran = t0.elapsed();

    // The lab, every gateway run from its image in its node's namespace with exactly what the
    // chart grants the gateway container.
    let mut words = podman.words();
    words.extend(["run", "--rm", "--pull=never", "--name=liqo-gateway-{netns}"].map(String::from));
    words.extend(limits.iter().cloned());
    words.extend(chart::security_flags(gateway));
    words.extend(chart::lab_flags(gateway));
    words.push(gateway.image.clone());
    let prefix_words = words.join(" ");
    assert!(
        prefix_words.contains("--privileged") || prefix_words.contains("--cap-add"),
        "the gateway container gets no privilege from the chart: {prefix_words}"
    );
    let topology = podman.dir().join("topology.yaml");
    std::fs::write(&topology, TOPOLOGY).unwrap();
    let (conf_key, conf) = podman.env();
    let liqo_lab = |args: &[&str]| {
        stdout_of(
            Command::new(env!("CARGO_BIN_EXE_liqo-lab"))
                .args(["--prefix", g.prefix.as_str()])
                .args(args)
                .env(GATEWAY_RUN_ENV, &prefix_words)
                .env(conf_key, &conf),
        )
    };
    liqo_lab(&["up", "--file", topology.to_str().unwrap()]);
    liqo_lab(&["peer", "rome", "milan"]);
    let lab = Lab::load(&g.prefix).unwrap();
    let m = check::with_peerings(&lab).unwrap();
    assert!(m.failures().is_empty(), "{}", m.render());
    let cross = m
        .probes
        .iter()
        .filter(|p| m.endpoints[p.src].cluster != m.endpoints[p.dst].cluster)
        .count();
    // Each of the 4 pods to the 2 of the other cluster.
    assert_eq!(cross, 8, "{}", m.render());

    // What carried it: a container per cluster (podman is the process the lab records), whose
    // gateway made its namespace on the host through the chart's Bidirectional mount.
    let names = podman.ok(&["ps", "--format", "{{.Names}}"]);
    let mut names: Vec<&str> = names.lines().collect();
    names.sort_unstable();
    let node = |c: &str| lab.node_netns(c, "n0");
    assert_eq!(
        names,
        [
            format!("liqo-gateway-{}", node("milan")),
            format!("liqo-gateway-{}", node("rome"))
        ],
        "the running containers"
    );
    for c in ["rome", "milan"] {
        let pid_file = format!("/run/liqo-lab/{}.d/{c}/gateway.pid", g.prefix);
        let text = std::fs::read_to_string(&pid_file).unwrap();
        assert_eq!(text.lines().nth(1), Some("podman"), "{pid_file}: {text:?}");
        let gw_ns = Path::new("/run/netns").join(format!("{}-{c}-gw", g.prefix));
        assert!(gw_ns.exists(), "{} is missing", gw_ns.display());
    }
    let checked = t0.elapsed();

    // Stopped, each gateway removes its namespace (from inside its container) and its container
    // goes (--rm); the lab goes; nothing of the test's storage still runs or is mounted but the
    // storage itself (the guard removes it).
    podman.stop_all().unwrap();
    for c in ["rome", "milan"] {
        let gw_ns = Path::new("/run/netns").join(format!("{}-{c}-gw", g.prefix));
        assert!(
            !gw_ns.exists(),
            "{} is left after its gateway stopped",
            gw_ns.display()
        );
    }
    assert_eq!(
        podman.containers_left(Duration::from_secs(30)),
        "",
        "containers left 30 s after they stopped"
    );
    lab::down(&g.prefix).unwrap();
    // The last cleanup process exits just after its container is gone: awaited, bounded.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = podman.processes();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        left = podman.processes();
    }
    assert!(
        left.is_empty(),
        "processes of the test's podman left: {left:#?}"
    );
    eprintln!(
        "seconds: build.sh {:.1}, loads {:.1}, runs {:.1}, lab check {:.1}, stop {:.1}",
        built.as_secs_f64(),
        (loaded - built).as_secs_f64(),
        (ran - loaded).as_secs_f64(),
        (checked - ran).as_secs_f64(),
        (t0.elapsed() - checked).as_secs_f64()
    );
}
