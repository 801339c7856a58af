//! The chart's containers, from `helm template` with every component on (the values matrix's
//! `proxy` case), and the podman flags that grant a container exactly what the chart grants it:
//! its security context and its pod's, its network, its mounts.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

/// The repository's root.
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// helm: `$HELM`, else the one `e2e/k8s/build.sh` puts beside the Kubernetes binaries.
fn helm() -> PathBuf {
    if let Some(h) = std::env::var_os("HELM").filter(|h| !h.is_empty()) {
        return h.into();
    }
    testkit::k8s::binaries()
        .unwrap_or_else(|e| {
            panic!("helm: set HELM, or LIQO_K8S_BIN to e2e/k8s/build.sh's output: {e}")
        })
        .path("helm")
}

/// A container of the render.
pub(crate) struct Container {
    /// `<workload>/<container>`, for messages.
    pub(crate) what: String,
    /// Its image, as the chart names it.
    pub(crate) image: String,
    /// The program: the image's last path segment without the tag.
    pub(crate) program: String,
    /// The container.
    pub(crate) spec: Value,
    /// Its pod's spec.
    pub(crate) pod: Value,
}

impl Container {
    /// Its securityContext (null when none).
    pub(crate) fn security(&self) -> &Value {
        &self.spec["securityContext"]
    }

    /// The user the chart runs it as (`runAsUser`); every container of the chart says.
    pub(crate) fn run_as_user(&self) -> u64 {
        self.security()["runAsUser"]
            .as_u64()
            .unwrap_or_else(|| panic!("{}: no runAsUser in {}", self.what, self.security()))
    }
}

/// Every container of the render with every component on.
pub(crate) fn containers() -> Vec<Container> {
    let values = repo().join("chart/tests/values/proxy.yaml");
    let mut cmd = Command::new(helm());
    cmd.args(["template", "liqo"])
        .arg(repo().join("chart"))
        .args(["--namespace", "liqo", "--values"])
        .arg(&values);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let render = String::from_utf8_lossy(&out.stdout);
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&render)
        .unwrap_or_else(|e| panic!("the render is not YAML: {e}\n{render}"));
    let mut found = Vec::new();
    for o in docs
        .iter()
        .filter(|o| o["kind"] == "Deployment" || o["kind"] == "DaemonSet")
    {
        let pod = &o["spec"]["template"]["spec"];
        for c in pod["containers"].as_array().into_iter().flatten() {
            let what = format!("{}/{}", o["metadata"]["name"], c["name"]).replace('"', "");
            let image = c["image"]
                .as_str()
                .unwrap_or_else(|| panic!("{what} has no image"))
                .to_owned();
            let program = image
                .rsplit('/')
                .next()
                .and_then(|last| last.split(':').next())
                .unwrap_or_default()
                .to_owned();
            found.push(Container {
                what,
                image,
                program,
                spec: c.clone(),
                pod: pod.clone(),
            });
        }
    }
    assert!(
        !found.is_empty(),
        "no container in the render of {}",
        values.display()
    );
    found
}

/// Fails for a field of `what`'s securityContext that [`security_flags`] cannot translate.
fn untranslated(what: &str, k: &str, v: &Value) -> ! {
    panic!("{what}: securityContext.{k}: {v} is not translated to podman")
}

/// The podman flags of the privileges the chart grants `c`: its securityContext and its pod's.
/// A field this does not know fails, naming it (its translation would be a guess).
pub(crate) fn security_flags(c: &Container) -> Vec<String> {
    let mut flags = Vec::new();
    let sc = c.security().as_object().cloned().unwrap_or_default();
    let mut user = None;
    let mut group = None;
    for (k, v) in &sc {
        match k.as_str() {
            "privileged" => {
                if v == true {
                    flags.push("--privileged".to_owned());
                }
            }
            "runAsUser" => user = Some(v.as_u64().unwrap_or_else(|| untranslated(&c.what, k, v))),
            "runAsGroup" => group = Some(v.as_u64().unwrap_or_else(|| untranslated(&c.what, k, v))),
            // The image's user is checked against it; with runAsUser given, nothing to add.
            "runAsNonRoot" => {
                assert!(
                    v != true || sc.get("runAsUser").and_then(Value::as_u64) != Some(0),
                    "{}: runAsNonRoot with runAsUser 0",
                    c.what
                );
            }
            "readOnlyRootFilesystem" => {
                if v == true {
                    flags.push("--read-only".to_owned());
                }
            }
            "allowPrivilegeEscalation" => {
                if v == false {
                    flags.push("--security-opt=no-new-privileges".to_owned());
                }
            }
            "capabilities" => {
                for (kk, list) in v.as_object().into_iter().flatten() {
                    let flag = match kk.as_str() {
                        "drop" => "--cap-drop",
                        "add" => "--cap-add",
                        _ => panic!(
                            "{}: securityContext.capabilities.{kk} is not translated",
                            c.what
                        ),
                    };
                    for cap in list.as_array().into_iter().flatten() {
                        let cap = cap.as_str().unwrap_or_else(|| untranslated(&c.what, k, v));
                        flags.push(format!("{flag}={}", cap.to_ascii_lowercase()));
                    }
                }
            }
            _ => untranslated(&c.what, k, v),
        }
    }
    if let Some(u) = user {
        flags.push(match group {
            Some(g) => format!("--user={u}:{g}"),
            None => format!("--user={u}"),
        });
    }
    for (k, v) in c.pod["securityContext"].as_object().into_iter().flatten() {
        match k.as_str() {
            // podman's default seccomp profile is the runtime's default.
            "seccompProfile" if v["type"] == "RuntimeDefault" => {}
            "fsGroup" => flags.push(format!(
                "--group-add={}",
                v.as_u64()
                    .unwrap_or_else(|| panic!("{}: fsGroup {v} is not a number", c.what))
            )),
            _ => panic!(
                "{}: the pod's securityContext.{k}: {v} is not translated",
                c.what
            ),
        }
    }
    flags
}

/// The podman flags of `c`'s network and mounts in a lab node: the host network is the node's
/// namespace (`{netns}`, which the lab fills in); a hostPath directory is mounted as it is
/// (Bidirectional propagation: rshared), a hostPath CharDevice is a device; an emptyDir is the
/// lab's directory of the cluster's files (`{dir}`, at its own path: the lab's config names
/// files there). Any other volume fails, naming it.
pub(crate) fn lab_flags(c: &Container) -> Vec<String> {
    assert_eq!(
        c.pod["hostNetwork"], true,
        "{}: runs in a lab node only on the host network",
        c.what
    );
    let mut flags = vec!["--network=ns:/run/netns/{netns}".to_owned()];
    let mut empty_dirs = 0;
    for m in c.spec["volumeMounts"].as_array().into_iter().flatten() {
        let name = &m["name"];
        let path = m["mountPath"].as_str().unwrap_or_default();
        let vol = c.pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| &v["name"] == name)
            .unwrap_or_else(|| panic!("{}: mount {name} has no volume", c.what));
        let mut options = Vec::new();
        match m["mountPropagation"].as_str() {
            Some("Bidirectional") => options.push("rshared"),
            Some("HostToContainer") => options.push("rslave"),
            None | Some("None") => {}
            Some(other) => panic!("{}: mountPropagation {other} is not translated", c.what),
        }
        if m["readOnly"] == true {
            options.push("ro");
        }
        let options = if options.is_empty() {
            String::new()
        } else {
            format!(":{}", options.join(","))
        };
        if let Some(host) = vol["hostPath"].as_object() {
            let src = host["path"].as_str().unwrap_or_default();
            if host.get("type").is_some_and(|t| t == "CharDevice") {
                flags.push(format!("--device={src}:{path}"));
            } else {
                flags.push(format!("--volume={src}:{path}{options}"));
            }
        } else if vol.get("emptyDir").is_some() {
            empty_dirs += 1;
            flags.push(format!("--volume={{dir}}:{{dir}}{options}"));
        } else {
            panic!("{}: volume {vol} is not translated to the lab", c.what);
        }
    }
    assert!(
        empty_dirs <= 1,
        "{}: the lab has one directory per cluster for {empty_dirs} emptyDirs",
        c.what
    );
    flags
}
