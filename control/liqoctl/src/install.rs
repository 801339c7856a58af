//! `liqoctl install [kubeadm|kind|k3s|generic]` and `liqoctl uninstall [--purge]`.
//!
//! `install` makes the values ([`values`], pure) from the flags, the identity already installed
//! (an upgrade keeps the cluster's name) and the CIDRs the cluster publishes ([`detect`]),
//! labels the namespace for Pod Security (Helm cannot), runs `helm upgrade --install` of the
//! chart built into liqoctl ([`helm`]), then follows every component until it is ready, one
//! line each ([`ready`]); past `--timeout` an upgrade is rolled back to the previous revision
//! and a first install is left for inspection, the error naming what was not ready. No Helm
//! hook, no `--wait`: nothing rolls back behind the operator's back.
//!
//! `uninstall` ([`uninstall`]) refuses while peerings or offloaded namespaces exist, naming
//! them; otherwise it removes the release, then what the components made at run time (the
//! namespace liqoctl created), and with `--purge` the CRDs, each step bounded by `--timeout`;
//! what is left when it ends is named.

pub mod args;
pub mod detect;
pub mod helm;
pub mod ready;
pub mod uninstall;
pub mod values;

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, Deployment},
        core::v1::Namespace,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;

use self::{
    args::InstallArgs,
    detect::{DetectError, Which},
    helm::{Helm, HelmError, RELEASE, TempDir, os},
};

/// The label liqoctl puts on the namespace it prepares (uninstall deletes such a namespace).
pub const NAMESPACE_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const NAMESPACE_LABEL_VALUE: &str = "liqoctl";
/// The controller-manager's Deployment (the chart's).
pub const MANAGER_DEPLOYMENT: &str = "liqo-controller-manager";
/// How often readiness is read.
const POLL: Duration = Duration::from_secs(2);

/// Why `install` failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// `--version` of a chart liqoctl does not have.
    #[error("--version {asked}: this liqoctl has chart {have} only (or give --local-chart-path)")]
    Version {
        /// Asked for.
        asked: String,
        /// Available.
        have: String,
    },
    /// The installed identity could not be read (an upgrade would lose the cluster's name).
    #[error("reading the installed cluster identity")]
    Identity(#[source] liqo_auth::cluster::IdentityError),
    /// A CIDR could not be found.
    #[error(transparent)]
    Detect(#[from] DetectError),
    /// Reading or writing the cluster.
    #[error("{what}")]
    Api {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Helm.
    #[error(transparent)]
    Helm(#[from] HelmError),
    /// A CRD file of the chart is not a CRD.
    #[error("{file} is not a CustomResourceDefinition: {why}")]
    Crd {
        /// The file.
        file: String,
        /// Why.
        why: String,
    },
    /// Encoding the values.
    #[error("encoding the Helm values")]
    Values(#[source] serde_saphyr::SerializeError),
    /// Not ready in time.
    #[error("not ready within {secs} s: {pending}{}", if *.rolled_back { "; rolled back to the previous revision" } else { "; left installed for inspection (liqoctl uninstall removes it)" })]
    Timeout {
        /// The timeout.
        secs: u64,
        /// What was not ready.
        pending: String,
        /// Whether the previous revision was restored.
        rolled_back: bool,
    },
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> InstallError {
    let what = what.into();
    move |source| InstallError::Api { what, source }
}

/// Runs `install`.
pub async fn install(
    client: &Client,
    helm: Option<&Helm>,
    ns: &str,
    a: &InstallArgs,
) -> Result<(), InstallError> {
    let have = match &a.local_chart_path {
        Some(p) => std::fs::read_to_string(p.join("Chart.yaml"))
            .ok()
            .and_then(|t| helm::chart_version(&t)),
        None => helm::embedded_version(),
    }
    .unwrap_or_default();
    if let Some(asked) = a.version.as_ref().filter(|v| **v != have) {
        return Err(InstallError::Version {
            asked: asked.clone(),
            have,
        });
    }
    // An upgrade keeps the installed name unless a new one is given; only a missing identity
    // means a first install (an identity that cannot be read stops here).
    let installed = match liqo_auth::cluster::local_identity(client, ns).await {
        Ok(i) => Some(i),
        Err(liqo_auth::cluster::IdentityError::NotFound { .. }) => None,
        Err(e) => return Err(InstallError::Identity(e)),
    };
    let cluster_name = match (&a.cluster_name, &installed) {
        (Some(n), _) => n.clone(),
        (None, Some(i)) => i.cluster_name.clone(),
        (None, None) => values::generated_name(&random_seed()),
    };
    let pod_cidr = match a.pod_cidr {
        Some(c) => c,
        None => detect::detect(client, a.provider, Which::Pod).await?,
    };
    let service_cidr = match a.service_cidr {
        Some(c) => c,
        None => detect::detect(client, a.provider, Which::Service).await?,
    };
    let inputs = values::Inputs {
        cluster_name: cluster_name.clone(),
        cluster_labels: a.cluster_labels.clone().unwrap_or_default(),
        sharing_percentage: a.sharing_percentage,
        pod_cidr,
        service_cidr,
        reserved_subnets: a.reserved_subnets.clone(),
        api_server_url: a.api_server_url.clone(),
        tag: env!("CARGO_PKG_VERSION").to_owned(),
        ha: a.enable_ha,
    };
    let text = values::to_yaml(&values::values(&inputs)).map_err(InstallError::Values)?;
    if a.only_output_values {
        helm::write_file(&a.dump_values_path, text.as_bytes())?;
        println!("Helm values written to {}", a.dump_values_path.display());
        return Ok(());
    }
    let helm = helm.ok_or(HelmError::Missing)?;
    let tmp = TempDir::new("install")?;
    let chart = match &a.local_chart_path {
        Some(p) => p.clone(),
        None => helm::write_chart(tmp.path())?,
    };
    let values_file = tmp.path().join("values.yaml");
    helm::write_file(&values_file, text.as_bytes())?;
    println!(
        "Installing Liqo {have} on cluster {cluster_name} (pod CIDR {pod_cidr}, service CIDR {service_cidr})"
    );
    let chart_and_values = |mut cmd: Vec<std::ffi::OsString>| {
        cmd.push(chart.clone().into_os_string());
        cmd.extend(os(&["--namespace", ns, "--values"]));
        cmd.push(values_file.clone().into_os_string());
        for s in &a.set {
            cmd.extend(os(&["--set", s]));
        }
        cmd
    };
    // The values checked by the chart's schema and checks first, without the cluster: a bad
    // value is refused naming its key and nothing is created.
    helm.run(&chart_and_values(os(&["template", RELEASE])))?;
    if !a.dry_run {
        prepare_namespace(client, ns).await?;
        // Helm installs `crds/` only the first time and never upgrades it.
        apply_crds(client, &chart).await?;
    }
    let before = helm.last_revision(ns)?;
    let mut cmd = chart_and_values(os(&["upgrade", "--install", RELEASE]));
    if a.dry_run {
        // Helm reads installed objects with `lookup` (the cluster ID); no Secret of the render
        // or the cluster is ever printed.
        cmd.extend(os(&["--dry-run=server", "--hide-secret"]));
        print!("{}", helm.run(&cmd)?);
        return Ok(());
    }
    helm.run(&cmd)?;
    match wait_ready(client, ns, a.timeout).await? {
        Ok(()) => {
            println!(
                "Liqo is installed on cluster {cluster_name}; peer it with `liqoctl generate peer-command`"
            );
            Ok(())
        }
        Err(pending) => {
            let rolled_back = before.is_some();
            if let Some(rev) = before {
                helm.run(&os(&["rollback", RELEASE, &rev.to_string(), "-n", ns]))?;
            }
            Err(InstallError::Timeout {
                secs: a.timeout.as_secs(),
                pending,
                rolled_back,
            })
        }
    }
}

/// Random bytes for a generated name (the clock and the process: no crate for so little).
fn random_seed() -> Vec<u8> {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.finish().to_le_bytes().to_vec()
}

/// Creates the namespace if needed and labels it: Pod Security `privileged` (the gateway and
/// the route agents need the host network and capabilities) and liqoctl's label.
async fn prepare_namespace(client: &Client, ns: &str) -> Result<(), InstallError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let existing = api
        .get_opt(ns)
        .await
        .map_err(api_err(format!("reading namespace {ns}")))?;
    let mut labels = BTreeMap::from([
        ("pod-security.kubernetes.io/enforce", "privileged"),
        ("pod-security.kubernetes.io/warn", "privileged"),
    ]);
    // Only a namespace liqoctl creates is liqoctl's to delete at uninstall (an upgrade keeps
    // the label: the apply owns it, and leaving it out would remove it).
    let made_by_us = existing.as_ref().is_none_or(|n| {
        n.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NAMESPACE_LABEL))
            .is_some_and(|v| v == NAMESPACE_LABEL_VALUE)
    });
    if made_by_us {
        labels.insert(NAMESPACE_LABEL, NAMESPACE_LABEL_VALUE);
    }
    let ns_obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}});
    api.patch(
        ns,
        &PatchParams::apply(crate::FIELD_MANAGER),
        &Patch::Apply(&ns_obj),
    )
    .await
    .map_err(api_err(format!("labelling namespace {ns}")))?;
    Ok(())
}

/// Applies the chart's CRDs (server-side, as liqoctl): new ones created, changed ones
/// upgraded.
async fn apply_crds(client: &Client, chart: &std::path::Path) -> Result<(), InstallError> {
    let dir = chart.join("crds");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|source| HelmError::Write {
            path: dir.clone(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|source| HelmError::Write {
            path: f.clone(),
            source,
        })?;
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&text).map_err(|e| InstallError::Crd {
                file: f.display().to_string(),
                why: e.to_string(),
            })?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::apply(crate::FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(api_err(format!("applying CRD {name}")))?;
    }
    Ok(())
}

/// Follows the release's Deployments and DaemonSets until every one is ready, printing each
/// when it gets there; `Err(pending)` past `timeout`.
async fn wait_ready(
    client: &Client,
    ns: &str,
    timeout: Duration,
) -> Result<Result<(), String>, InstallError> {
    let lp = ListParams::default().labels(&format!("app.kubernetes.io/instance={RELEASE}"));
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let daemons: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut printed = std::collections::BTreeSet::new();
    loop {
        let mut all: Vec<ready::Component> = deploys
            .list(&lp)
            .await
            .map_err(api_err("listing the Deployments"))?
            .items
            .iter()
            .map(ready::deployment)
            .collect();
        all.extend(
            daemons
                .list(&lp)
                .await
                .map_err(api_err("listing the DaemonSets"))?
                .items
                .iter()
                .map(ready::daemon_set),
        );
        for c in all.iter().filter(|c| c.done) {
            if printed.insert(c.name.clone()) {
                println!("  ready: {c}");
            }
        }
        let pending: Vec<String> = all
            .iter()
            .filter(|c| !c.done)
            .map(ToString::to_string)
            .collect();
        if pending.is_empty() && !all.is_empty() {
            return Ok(Ok(()));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(Err(if all.is_empty() {
                "no component found".to_owned()
            } else {
                pending.join(", ")
            }));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests;
