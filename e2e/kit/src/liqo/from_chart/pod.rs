//! What a pod of the chart's Deployments gets from its node, for a process of the harness:
//! the identity of its kwok pod (name, node), its environment resolved as the kubelet does,
//! and the files of its volumes (Secret, ConfigMap, projected token, CA and namespace,
//! emptyDir).

use std::{collections::BTreeMap, path::Path};

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Container, EnvVar, KeyToPath, Pod, Secret, Volume},
};
use kube::{Api, Client, api::ListParams};

use super::{NAMESPACE, plumb};
use crate::{
    k8s::Cluster,
    liqo::{error::LiqoError, objects::token_kubeconfig},
};
use std::path::PathBuf;

/// The pod of Deployment `d` (kwok runs its status): its name and node, for the downward API.
pub(super) async fn pod_of(client: &Client, d: &Deployment) -> Result<(String, String), LiqoError> {
    let name = name_of(d);
    let selector = d
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .map(|l| {
            l.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(LiqoError::kube(format!(
            "listing the pods of Deployment {name}"
        )))?;
    pods.items
        .iter()
        .find_map(|p| {
            let node = p.spec.as_ref()?.node_name.clone()?;
            Some((p.metadata.name.clone()?, node))
        })
        .ok_or_else(|| LiqoError::Chart {
            path: PathBuf::from(format!("Deployment {NAMESPACE}/{name}")),
            problem: "no scheduled pod".into(),
        })
}

/// The container's environment, resolved as the kubelet would for a pod of the harness
/// (`status.podIP` is 127.0.0.1, the pod's name and node are its kwok pod's; a field the
/// harness cannot give is an error naming it).
pub(super) async fn env(
    client: &Client,
    deployment: &str,
    (pod, node): &(String, String),
    vars: &[EnvVar],
) -> Result<BTreeMap<String, String>, LiqoError> {
    let mut out = BTreeMap::new();
    for v in vars {
        let value = match (&v.value, &v.value_from) {
            (Some(x), _) => plumb::expand(x, &out),
            (None, Some(from)) => {
                if let Some(f) = &from.field_ref {
                    match f.field_path.as_str() {
                        "status.podIP" | "status.hostIP" => "127.0.0.1".to_owned(),
                        "metadata.name" => pod.clone(),
                        "spec.nodeName" => node.clone(),
                        "metadata.namespace" => NAMESPACE.to_owned(),
                        other => {
                            return Err(LiqoError::Chart {
                                path: PathBuf::from(format!("Deployment {NAMESPACE}/{deployment}")),
                                problem: format!("env {}: fieldRef {other} is not plumbed", v.name),
                            });
                        }
                    }
                } else if let Some(k) = &from.secret_key_ref {
                    let s = Api::<Secret>::namespaced(client.clone(), NAMESPACE)
                        .get(&k.name)
                        .await
                        .map_err(LiqoError::kube(format!("reading Secret {}", k.name)))?;
                    let data = s.data.unwrap_or_default();
                    String::from_utf8_lossy(
                        &data.get(&k.key).map(|b| b.0.clone()).unwrap_or_default(),
                    )
                    .into_owned()
                } else if let Some(k) = &from.config_map_key_ref {
                    let m = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
                        .get(&k.name)
                        .await
                        .map_err(LiqoError::kube(format!("reading ConfigMap {}", k.name)))?;
                    m.data
                        .unwrap_or_default()
                        .get(&k.key)
                        .cloned()
                        .unwrap_or_default()
                } else {
                    String::new()
                }
            }
            (None, None) => String::new(),
        };
        out.insert(v.name.clone(), value);
    }
    Ok(out)
}

/// Writes the files volume `vol` shows its container into `local`.
pub(super) async fn volume(
    client: &Client,
    c: &Cluster,
    sa: &str,
    vol: &Volume,
    local: &Path,
) -> Result<(), LiqoError> {
    std::fs::create_dir_all(local).map_err(|e| LiqoError::io(local, e))?;
    let write = |name: &str, bytes: &[u8]| -> Result<(), LiqoError> {
        let path = local.join(name);
        crate::k8s::write_file(&path, &String::from_utf8_lossy(bytes), true)?;
        Ok(())
    };
    if let Some(s) = &vol.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        let secret = Api::<Secret>::namespaced(client.clone(), NAMESPACE)
            .get(&name)
            .await
            .map_err(LiqoError::kube(format!("reading Secret {name}")))?;
        let data = secret.data.unwrap_or_default();
        let items: Vec<(String, String)> = match &s.items {
            Some(items) => items
                .iter()
                .map(|i| (i.key.clone(), i.path.clone()))
                .collect(),
            None => data.keys().map(|k| (k.clone(), k.clone())).collect(),
        };
        for (key, path) in items {
            write(
                &path,
                &data.get(&key).map(|b| b.0.clone()).unwrap_or_default(),
            )?;
        }
    } else if let Some(m) = &vol.config_map {
        config_map(client, &m.name, m.items.as_deref(), &write).await?;
    } else if let Some(p) = &vol.projected {
        for src in p.sources.iter().flatten() {
            if let Some(t) = &src.service_account_token {
                let kc = token_kubeconfig(client, c, sa, local, None).await?;
                let token = token_of(&kc)?;
                write(&t.path, token.as_bytes())?;
                std::fs::remove_file(&kc).map_err(|e| LiqoError::io(&kc, e))?;
            }
            if let Some(m) = &src.config_map {
                config_map(client, &m.name, m.items.as_deref(), &write).await?;
            }
            if let Some(d) = &src.downward_api {
                for i in d.items.iter().flatten() {
                    if i.field_ref.as_ref().map(|f| f.field_path.as_str())
                        == Some("metadata.namespace")
                    {
                        write(&i.path, NAMESPACE.as_bytes())?;
                    }
                }
            }
        }
    }
    // emptyDir: the directory itself.
    Ok(())
}

async fn config_map(
    client: &Client,
    name: &str,
    items: Option<&[KeyToPath]>,
    write: &impl Fn(&str, &[u8]) -> Result<(), LiqoError>,
) -> Result<(), LiqoError> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .get(name)
        .await
        .map_err(LiqoError::kube(format!("reading ConfigMap {name}")))?;
    let data = cm.data.unwrap_or_default();
    let pairs: Vec<(String, String)> = match items {
        Some(items) => items
            .iter()
            .map(|i| (i.key.clone(), i.path.clone()))
            .collect(),
        None => data.keys().map(|k| (k.clone(), k.clone())).collect(),
    };
    for (key, path) in pairs {
        write(
            &path,
            data.get(&key).map(String::as_bytes).unwrap_or_default(),
        )?;
    }
    Ok(())
}

/// The token of a kubeconfig [`token_kubeconfig`] wrote.
fn token_of(kubeconfig: &Path) -> Result<String, LiqoError> {
    let text = std::fs::read_to_string(kubeconfig).map_err(|e| LiqoError::io(kubeconfig, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| LiqoError::Chart {
        path: kubeconfig.to_owned(),
        problem: e.to_string(),
    })?;
    Ok(v["users"][0]["user"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

/// The name of Deployment `d`.
pub(super) fn name_of(d: &Deployment) -> String {
    d.metadata.name.clone().unwrap_or_default()
}

/// The containers of Deployment `d`'s pod template.
pub(super) fn containers(d: &Deployment) -> &[Container] {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map_or(&[][..], |p| p.containers.as_slice())
}
