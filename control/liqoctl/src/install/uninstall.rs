//! `liqoctl uninstall [--purge]`: refused while peerings are active or namespaces offloaded
//! (their finalizers need the controllers the release runs); otherwise the ForeignClusters of
//! past peerings go first (their controller still runs) with the tenant namespaces made for
//! those peers, then the release (Helm deletes what it
//! made), then the namespace liqoctl made (with what the components made in it
//! at run time: certificates, keys, tokens, the IPAM's state, Leases), and with `--purge` the
//! CRDs. Each wait is bounded by `--timeout`; what is left is named, never waited on forever.

use std::time::Duration;

use control::api::{
    discovery::{ForeignCluster, ResourceRequest},
    net::{NetworkConfig, TunnelEndpoint},
    offloading::NamespaceOffloading,
    sharing::ResourceOffer,
    virtualkubelet::{NamespaceMap, ShadowPod},
};
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        coordination::v1::Lease,
        core::v1::{ConfigMap, Namespace, Secret},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams},
};

use super::{
    InstallError, MANAGER_DEPLOYMENT, NAMESPACE_LABEL, NAMESPACE_LABEL_VALUE, api_err,
    args::UninstallArgs,
    helm::{Helm, RELEASE, os},
};

/// How often removal is checked.
const POLL: Duration = Duration::from_secs(1);

/// Why `uninstall` failed.
#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    /// Peerings are active.
    #[error(
        "refusing to uninstall while peered with {0} (unpeer first: liqoctl unpeer <name> here, and on the peer for its peering with this cluster)"
    )]
    Peered(String),
    /// ForeignClusters of past peerings exist but no controller-manager runs to release them.
    #[error(
        "refusing to uninstall: ForeignClusters {0} need the controller-manager to be removed, and Deployment liqo-controller-manager has no available replica (start it again, or delete them yourself)"
    )]
    ManagerDown(String),
    /// Offloaded namespaces exist.
    #[error(
        "refusing to uninstall while namespaces are offloaded: {0} (liqoctl unoffload namespace <name> first)"
    )]
    Offloaded(String),
    /// Liqo objects still wait for their controllers.
    #[error(
        "refusing to uninstall while these wait for Liqo's controllers (their finalizers): {0}"
    )]
    Finalized(String),
    /// Something failed on the way.
    #[error(transparent)]
    Install(#[from] InstallError),
    /// Not all gone in time.
    #[error("still present after {secs} s: {left}")]
    Left {
        /// The timeout.
        secs: u64,
        /// What is left.
        left: String,
    },
}

/// Runs `uninstall`.
pub async fn uninstall(
    client: &Client,
    helm: &Helm,
    ns: &str,
    a: &UninstallArgs,
) -> Result<(), UninstallError> {
    // Refusals first: nothing is touched.
    let fcs = foreign_clusters(client).await?;
    let active = active_peerings(&fcs);
    if !active.is_empty() {
        return Err(UninstallError::Peered(names(active.into_iter())));
    }
    let offloaded = listed(Api::<NamespaceOffloading>::all(client.clone())).await?;
    if !offloaded.is_empty() {
        return Err(UninstallError::Offloaded(names(
            offloaded.iter().map(|o| o.namespace.clone()),
        )));
    }
    // Whatever else still holds a finalizer needs its controller, which the release runs: a
    // teardown under way (an unpeer just made: a peering Disconnecting, objects still held)
    // gets until the timeout to finish; then the refusal names what is left, and nothing was
    // touched. A peering that starts meanwhile is refused.
    let deadline = tokio::time::Instant::now() + a.timeout;
    let mut said = false;
    let fcs = loop {
        let fcs = foreign_clusters(client).await?;
        let active = active_peerings(&fcs);
        if !active.is_empty() {
            return Err(UninstallError::Peered(names(active.into_iter())));
        }
        let mut held = held(client).await?;
        held.extend(
            disconnecting(&fcs)
                .into_iter()
                .map(|n| format!("ForeignCluster {n} (Disconnecting)")),
        );
        if held.is_empty() {
            break fcs;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(UninstallError::Finalized(held.join(", ")));
        }
        if !said {
            println!(
                "Waiting for Liqo's controllers to release {} (up to {} s)",
                held.join(", "),
                a.timeout.as_secs()
            );
            said = true;
        }
        tokio::time::sleep(POLL).await;
    };
    // Their finalizers need the controller-manager: none available, nothing is touched.
    if !fcs.is_empty() && !manager_available(client, ns).await? {
        return Err(UninstallError::ManagerDown(names(
            fcs.iter()
                .map(|f| f.metadata.name.clone().unwrap_or_default()),
        )));
    }
    // The ForeignClusters of past peerings go while their controller still runs (it releases
    // what they hold: finalizers, the tenant's objects).
    let fc_api = Api::<ForeignCluster>::all(client.clone());
    for fc in &fcs {
        let name = fc.metadata.name.clone().unwrap_or_default();
        println!("Removing ForeignCluster {name} (no active peering)");
        delete_and_wait(&fc_api, &name, deadline, a.timeout).await?;
    }
    // The tenant namespaces the components made for past peers (no release owns them): the
    // peers' identities, certificate records and role bindings.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let tenants = namespaces
        .list(&ListParams::default().labels(&format!(
            "{}={}",
            control::consts::labels::TENANT_NAMESPACE,
            control::consts::values::TRUE
        )))
        .await
        .map_err(api_err("listing the tenant namespaces"))?;
    for t in tenants.items {
        let name = t.metadata.name.unwrap_or_default();
        println!("Removing tenant namespace {name}");
        delete_and_wait(&namespaces, &name, deadline, a.timeout).await?;
    }
    if helm
        .last_revision(ns)
        .map_err(InstallError::from)?
        .is_some()
    {
        println!("Removing release {RELEASE} from namespace {ns}");
        // What is left of the timeout (at least 1 s).
        let secs = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .as_secs()
            .max(1)
            .to_string();
        helm.run(&os(&[
            "uninstall",
            RELEASE,
            "-n",
            ns,
            "--wait",
            "--timeout",
            &format!("{secs}s"),
        ]))
        .map_err(InstallError::from)?;
    }
    let ours = namespaces
        .get_opt(ns)
        .await
        .map_err(api_err(format!("reading namespace {ns}")))?
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(NAMESPACE_LABEL))
                .is_some_and(|v| v == NAMESPACE_LABEL_VALUE)
        });
    if ours.is_some() {
        println!("Removing namespace {ns} (made by liqoctl install)");
        delete_and_wait(&namespaces, ns, deadline, a.timeout).await?;
    } else {
        // Not liqoctl's namespace: what the components made there at run time stays, named.
        let mut left: Vec<String> = Vec::new();
        for (kind, items) in [
            (
                "Secret",
                listed(Api::<Secret>::namespaced(client.clone(), ns)).await?,
            ),
            (
                "ConfigMap",
                listed(Api::<ConfigMap>::namespaced(client.clone(), ns)).await?,
            ),
            (
                "Lease",
                listed(Api::<Lease>::namespaced(client.clone(), ns)).await?,
            ),
        ] {
            left.extend(
                items
                    .into_iter()
                    .filter(|o| o.name != "kube-root-ca.crt")
                    .map(|o| format!("{kind} {}", o.name)),
            );
        }
        if !left.is_empty() {
            println!(
                "Namespace {ns} was not made by liqoctl install: kept, with {}",
                left.join(", ")
            );
        }
    }
    if a.purge {
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let liqo: Vec<String> = crds
            .list(&ListParams::default())
            .await
            .map_err(api_err("listing the CRDs"))?
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .filter(|n| n.ends_with(".liqo.io"))
            .collect();
        for name in &liqo {
            println!("Removing CRD {name}");
            delete_and_wait(&crds, name, deadline, a.timeout).await?;
        }
    }
    println!(
        "Liqo is uninstalled{}",
        if a.purge { " (CRDs too)" } else { "" }
    );
    Ok(())
}

/// The objects whose finalizers need the controllers the release runs, as `Kind ns/name`.
async fn held(client: &Client) -> Result<Vec<String>, UninstallError> {
    let mut held = Vec::new();
    held.extend(finalized::<ResourceRequest>(client).await?);
    held.extend(finalized::<ResourceOffer>(client).await?);
    held.extend(finalized::<NetworkConfig>(client).await?);
    held.extend(finalized::<TunnelEndpoint>(client).await?);
    held.extend(finalized::<NamespaceMap>(client).await?);
    held.extend(finalized::<ShadowPod>(client).await?);
    Ok(held)
}

/// Every ForeignCluster (none when its CRD is gone).
async fn foreign_clusters(client: &Client) -> Result<Vec<ForeignCluster>, UninstallError> {
    match Api::<ForeignCluster>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => Ok(l.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(api_err("listing the ForeignClusters")(e).into()),
    }
}

/// The ForeignClusters with a peering in either direction (outgoing or incoming `Pending` or
/// `Established`): uninstalling would leave the peer's side and their finalizers without a
/// controller. Past peerings (`None`) are not active; `Disconnecting` ones are going
/// ([`disconnecting`]).
pub fn active_peerings(fcs: &[ForeignCluster]) -> Vec<String> {
    with_peering(fcs, |s| !matches!(s, Status::None | Status::Disconnecting))
}

/// The ForeignClusters with a peering being torn down (`Disconnecting` in either direction).
pub fn disconnecting(fcs: &[ForeignCluster]) -> Vec<String> {
    with_peering(fcs, |s| s == Status::Disconnecting)
}

use control::api::discovery::PeeringConditionStatus as Status;

fn with_peering(fcs: &[ForeignCluster], pick: impl Fn(Status) -> bool) -> Vec<String> {
    use control::api::discovery::PeeringConditionType as T;
    fcs.iter()
        .filter(|fc| {
            let st = fc.status.clone().unwrap_or_default();
            [T::OutgoingPeering, T::IncomingPeering]
                .into_iter()
                .any(|t| pick(st.condition(t)))
        })
        .map(|fc| fc.metadata.name.clone().unwrap_or_default())
        .collect()
}

/// Whether the controller-manager's Deployment has an available replica (the ForeignClusters'
/// finalizers need it).
async fn manager_available(client: &Client, ns: &str) -> Result<bool, UninstallError> {
    let d = Api::<Deployment>::namespaced(client.clone(), ns)
        .get_opt(MANAGER_DEPLOYMENT)
        .await
        .map_err(api_err(format!(
            "reading Deployment {ns}/{MANAGER_DEPLOYMENT}"
        )))?;
    Ok(d.and_then(|d| d.status)
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
        > 0)
}

/// One object listed: its namespace, name and finalizers.
struct Listed {
    namespace: String,
    name: String,
    finalizers: Vec<String>,
}

/// Every object of `api` (none when its CRD is gone: a purge that stopped half-way can run
/// again).
async fn listed<K>(api: Api<K>) -> Result<Vec<Listed>, UninstallError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.list(&ListParams::default()).await {
        Ok(l) => Ok(l
            .items
            .iter()
            .map(|o| Listed {
                namespace: o.meta().namespace.clone().unwrap_or_default(),
                name: o.meta().name.clone().unwrap_or_default(),
                finalizers: o.meta().finalizers.clone().unwrap_or_default(),
            })
            .collect()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(api_err(format!("listing the {}s", K::kind(&())))(e).into()),
    }
}

/// The objects of kind `K` that hold a finalizer, as `Kind ns/name`.
async fn finalized<K>(client: &Client) -> Result<Vec<String>, UninstallError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let items = listed(Api::<K>::all(client.clone())).await?;
    Ok(items
        .into_iter()
        .filter(|o| !o.finalizers.is_empty())
        .map(|o| format!("{} {}/{}", K::kind(&()), o.namespace, o.name))
        .collect())
}

fn names(it: impl Iterator<Item = String>) -> String {
    let mut v: Vec<String> = it.collect();
    v.sort();
    v.dedup();
    v.join(", ")
}

/// Deletes `name` and waits until it is gone (or the deadline).
async fn delete_and_wait<K>(
    api: &Api<K>,
    name: &str,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<(), UninstallError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(api_err(format!("deleting {name}"))(e).into()),
    }
    loop {
        let left = api
            .get_opt(name)
            .await
            .map_err(api_err(format!("reading {name}")))?;
        let Some(left) = left else {
            return Ok(());
        };
        if tokio::time::Instant::now() >= deadline {
            let finalizers = left.meta().finalizers.clone().unwrap_or_default();
            return Err(UninstallError::Left {
                secs: timeout.as_secs(),
                left: format!("{name} (finalizers {finalizers:?})"),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}
