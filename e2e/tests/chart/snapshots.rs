//! The values matrix against its snapshots, and the files of `chart/files/` in the render.

use std::{fmt::Write as _, path::Path};

use serde_json::Value;

use crate::helm::{self, IPAM_SECRET, NAMESPACE};

/// `UPDATE_SNAPSHOTS=1` rewrites the snapshots (and removes those of cases gone).
fn updating() -> bool {
    std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v == "1")
}

/// Where `got` and `want` first differ, with the line of each.
fn first_difference(got: &str, want: &str) -> String {
    let (g, w): (Vec<_>, Vec<_>) = (got.lines().collect(), want.lines().collect());
    let i = g
        .iter()
        .zip(&w)
        .position(|(a, b)| a != b)
        .unwrap_or(g.len().min(w.len()));
    format!(
        "line {}: rendered {:?}, snapshot {:?} ({} and {} lines)",
        i + 1,
        g.get(i).unwrap_or(&"<end>"),
        w.get(i).unwrap_or(&"<end>"),
        g.len(),
        w.len()
    )
}

#[test]
fn every_case_of_the_values_matrix_renders_as_its_snapshot() {
    let dir = helm::chart().join("tests/snapshots");
    let cases = helm::cases();
    let mut failures = String::new();
    for case in &cases {
        let render = helm::template(&case.values, &[]).expect_ok();
        assert!(
            !render.contains("helm.sh/hook"),
            "{}: the chart uses no Helm hook",
            case.name
        );
        let path = dir.join(format!("{}.yaml", case.name));
        if updating() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &render).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(want) if want == render => {}
            Ok(want) => writeln!(
                failures,
                "{}: differs from {}: {}",
                case.name,
                path.display(),
                first_difference(&render, &want)
            )
            .unwrap(),
            Err(e) => writeln!(failures, "{}: {}: {e}", case.name, path.display()).unwrap(),
        }
    }
    let stale: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy();
            !cases.iter().any(|c| c.name == stem)
        })
        .collect();
    for p in &stale {
        if updating() {
            std::fs::remove_file(p).unwrap();
        } else {
            writeln!(failures, "{}: no values file of that name", p.display()).unwrap();
        }
    }
    assert!(
        failures.is_empty(),
        "{failures}(UPDATE_SNAPSHOTS=1 rewrites the snapshots after a wanted change)"
    );
}

#[test]
fn a_render_generates_no_credentials_and_is_the_same_each_time() {
    // liqo-ipam makes and keeps its Secret itself (--tls-secret): a render without cluster
    // access (helm template, a GitOps tool) makes nothing that a second render would change.
    for case in helm::cases() {
        let a = helm::template(&case.values, &[]).expect_ok();
        let b = helm::template(&case.values, &[]).expect_ok();
        assert!(a == b, "{}: two renders differ", case.name);
        let objects = helm::objects(&a);
        assert!(
            helm::find(&objects, "Secret", IPAM_SECRET).is_none(),
            "{}: Secret {IPAM_SECRET} is in the render",
            case.name
        );
        let ipam = helm::find(&objects, "Deployment", "liqo-ipam").unwrap();
        let args = ipam["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
        assert!(
            args.contains(&format!("\"--tls-secret={IPAM_SECRET}\""))
                && args.contains(&format!("\"--namespace={NAMESPACE}\"")),
            "{}: {args}",
            case.name
        );
        for flag in ["--tls-cert-file", "--tls-key-file", "--token-file"] {
            assert!(!args.contains(flag), "{}: {flag} in {args}", case.name);
        }
    }
}

/// `obj` without its labels, with the namespace the files hard-code replaced by `ns` where
/// the chart replaces it, and the webhook services' port the Service's (443).
fn as_rendered(mut obj: Value, ns: &str) -> Value {
    let _ = obj["metadata"].as_object_mut().unwrap().remove("labels");
    let hard_coded = Value::from(NAMESPACE);
    if obj["metadata"]["namespace"] == hard_coded {
        obj["metadata"]["namespace"] = ns.into();
    }
    for s in obj["subjects"].as_array_mut().into_iter().flatten() {
        if s["namespace"] == hard_coded {
            s["namespace"] = ns.into();
        }
    }
    for w in obj["webhooks"].as_array_mut().into_iter().flatten() {
        let svc = &mut w["clientConfig"]["service"];
        if svc["namespace"] == hard_coded {
            svc["namespace"] = ns.into();
        }
        svc["port"] = 443.into();
    }
    obj
}

#[test]
fn every_object_of_the_files_is_in_the_render_with_only_its_namespace_and_labels_changed() {
    let ns = "liqo-elsewhere";
    // Active/standby gateways: the one file rendered only then is in too.
    let render = helm::template(
        &helm::case("defaults"),
        &["--namespace", ns, "--set", "gateway.replicas=2"],
    )
    .expect_ok();
    let rendered = helm::objects(&render);
    let dir = helm::chart().join("files");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 10,
        "{} lists {} files",
        dir.display(),
        files.len()
    );
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let objs = helm::objects(&text);
        assert!(!objs.is_empty(), "{} holds no object", f.display());
        for obj in objs {
            let (kind, name) = (
                obj["kind"].as_str().unwrap(),
                obj["metadata"]["name"].as_str().unwrap(),
            );
            let got = helm::find(&rendered, kind, name)
                .unwrap_or_else(|| panic!("{kind} {name} of {} is not in the render", file(f)));
            let labels = got["metadata"]["labels"].as_object().unwrap();
            assert_eq!(
                labels["app.kubernetes.io/managed-by"], "Helm",
                "{kind} {name}"
            );
            for (k, v) in obj["metadata"]["labels"].as_object().into_iter().flatten() {
                assert_eq!(
                    labels.get(k),
                    Some(v),
                    "{kind} {name}: label {k} of {}",
                    file(f)
                );
            }
            let want = as_rendered(obj.clone(), ns);
            let got = as_rendered(got.clone(), ns);
            if kind == "MutatingWebhookConfiguration" {
                // The pod webhook's failurePolicy comes from webhook.failurePolicy (default Fail,
                // the file's).
                assert_eq!(got["webhooks"][0]["failurePolicy"], "Fail");
            }
            assert_eq!(got, want, "{kind} {name} differs from {}", file(f));
        }
    }
    assert!(
        !render.contains(&format!("namespace: {NAMESPACE}\n")),
        "the render for namespace {ns} names namespace {NAMESPACE}"
    );
}

fn file(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}
