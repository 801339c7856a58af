//! The command lines the chart renders are ones its programs accept: for every container of
//! every case, the program its image names, run with the container's args and `--help` (clap
//! parses every flag and value before it prints the help: an unknown flag or a bad value
//! fails). Kubernetes' `$(VAR)` expansions get what the kubelet would put there (each VAR must
//! be one of the container's variables). The binaries are the build's (`cargo build --workspace
//! --bins`, or `$LIQO_BIN_DIR`).

use std::collections::BTreeSet;

use crate::helm;

/// The program of an image `<registry>/<prefix>/<program>:<tag>`.
fn program(image: &str) -> &str {
    let name = image.rsplit('/').next().unwrap_or(image);
    name.split(':').next().unwrap_or(name)
}

/// A value the kubelet could give variable `var` (from the downward API).
fn sample(var: &str) -> &'static str {
    match var {
        "POD_IP" | "HOST_IP" => "10.244.0.10",
        "NODE_NAME" => "node-0",
        "POD_NAME" => "pod-0",
        "POD_NAMESPACE" => "liqo",
        _ => "value",
    }
}

/// `arg` with every `$(VAR)` expanded as the kubelet would; every VAR must be in `env`.
fn expand(arg: &str, env: &[&str], what: &str) -> String {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(i) = rest.find("$(") {
        out.push_str(&rest[..i]);
        let end = rest[i..]
            .find(')')
            .map(|e| i + e)
            .unwrap_or_else(|| panic!("{what}: {arg}"));
        let var = &rest[i + 2..end];
        assert!(
            env.contains(&var),
            "{what}: $({var}) is not a variable of the container"
        );
        out.push_str(sample(var));
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[test]
fn every_rendered_command_line_parses_with_its_program() {
    let mut checked = BTreeSet::new();
    for case in helm::cases() {
        let render = helm::template(&case.values, &[]).expect_ok();
        for o in helm::objects(&render)
            .iter()
            .filter(|o| o["kind"] == "Deployment" || o["kind"] == "DaemonSet")
        {
            let spec = &o["spec"]["template"]["spec"];
            let containers = spec["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .chain(spec["initContainers"].as_array().into_iter().flatten());
            for c in containers {
                let image = c["image"].as_str().unwrap();
                let prog = program(image);
                assert!(
                    c["command"].is_null(),
                    "{}: {prog}: the image's entrypoint runs",
                    case.name
                );
                let env: Vec<&str> = c["env"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e["name"].as_str())
                    .collect();
                let what = format!("{}: {prog}", case.name);
                let args: Vec<String> = c["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| expand(a.as_str().unwrap(), &env, &what))
                    .collect();
                let bin =
                    e2e::lab::bin(prog).unwrap_or_else(|e| panic!("{}: {prog}: {e}", case.name));
                let out = std::process::Command::new(&bin)
                    .args(&args)
                    .arg("--help")
                    .env_remove("KUBECONFIG")
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}: {} {}: exit {:?}: {}",
                    case.name,
                    prog,
                    args.join(" "),
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr)
                );
                checked.insert(format!("{} {}", prog, args.join(" ")));
            }
        }
    }
    // Every program of the chart was run, in more than one form.
    let programs: BTreeSet<&str> = checked
        .iter()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    for p in [
        "liqo-controller-manager",
        "liqo-auth",
        "liqo-ipam",
        "liqo-gateway",
        "liqo-gateway-operator",
        "liqo-overlay",
        "liqo-route-operator",
        "liqo-proxy",
    ] {
        assert!(programs.contains(p), "{p} checked: {programs:?}");
    }
    println!("{} distinct command lines parsed", checked.len());
}
