//! Installing CRD files (as a user would, from `chart/crds/`) with server-side apply, and
//! waiting until the apiserver serves them.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};

use super::error::K8sError;

/// The field manager of everything the harness applies.
pub const MANAGER: &str = "liqo-lab";

/// Applies every `*.yaml` CRD in `dir` and waits until each is Established; returns their names.
pub async fn install_crds(client: &Client, dir: &Path) -> Result<Vec<String>, K8sError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| K8sError::io(dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut names = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|e| K8sError::io(f, e))?;
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&text)
            .map_err(|e| K8sError::Options(format!("{}: {e}", f.display())))?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(K8sError::kube(format!("applying {}", f.display())))?;
        names.push(name);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for name in &names {
        loop {
            let crd = api
                .get(name)
                .await
                .map_err(K8sError::kube(format!("reading CRD {name}")))?;
            let established = crd.status.and_then(|s| s.conditions).is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if established {
                break;
            }
            if Instant::now() > deadline {
                return Err(K8sError::Options(format!(
                    "CRD {name} not Established after 30 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(names)
}
