//! The reflection bench's objects: made at home (`bench-<i>` of each kind, 32 requests in
//! flight), counted on the provider (copies carry the reflection's origin label), half deleted
//! while the virtual kubelet is killed; the provider's API writes and the virtual kubelet's
//! memory.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use futures::{StreamExt, stream};
use k8s_openapi::api::{
    core::v1::{ConfigMap, Secret, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client, Resource,
    api::{DeleteParams, ListParams, PostParams},
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::json;

use crate::{BenchError, peering::probe};

/// Requests in flight while creating or deleting.
const IN_FLIGHT: usize = 32;
/// The objects' name prefix.
const PREFIX: &str = "bench-";

/// Objects per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Services.
    pub services: u64,
    /// EndpointSlices.
    pub endpoint_slices: u64,
    /// ConfigMaps.
    pub config_maps: u64,
    /// Secrets.
    pub secrets: u64,
}

impl Counts {
    /// `n` of each.
    pub fn all(n: u64) -> Counts {
        Counts {
            services: n,
            endpoint_slices: n,
            config_maps: n,
            secrets: n,
        }
    }
}

fn name(i: u32) -> String {
    format!("{PREFIX}{i}")
}

fn step(what: String) -> impl FnOnce(kube::Error) -> BenchError {
    move |e| BenchError::step(what, &e)
}

async fn create<K>(client: &Client, ns: &str, v: serde_json::Value) -> Result<(), BenchError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(v)
        .map_err(|e| BenchError::Options(format!("a {} literal: {e}", K::kind(&()))))?;
    let name = obj.meta().name.clone().unwrap_or_default();
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &obj)
        .await
        .map(drop)
        .map_err(step(format!("creating {} {ns}/{name}", K::kind(&()))))
}

/// The four objects of index `i`: a Service, its EndpointSlice (a home pod and an address
/// outside the cluster), a ConfigMap and a Secret.
async fn create_one(client: &Client, ns: &str, i: u32) -> Result<(), BenchError> {
    let n = name(i);
    create::<Service>(
        client,
        ns,
        json!({"metadata": {"name": n}, "spec": {"ports": [{"name": "http", "port": 80}]}}),
    )
    .await?;
    let pod = format!("10.244.{}.{}", i / 250, i % 250 + 1);
    let outside = format!("192.168.{}.{}", i / 250, i % 250 + 1);
    create::<EndpointSlice>(
        client,
        ns,
        json!({"metadata": {"name": n, "labels": {"kubernetes.io/service-name": n,
                "endpointslice.kubernetes.io/managed-by": "liqo-bench"}},
               "addressType": "IPv4", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
               "endpoints": [{"addresses": [pod], "conditions": {"ready": true}},
                             {"addresses": [outside], "conditions": {"ready": true}}]}),
    )
    .await?;
    create::<ConfigMap>(
        client,
        ns,
        json!({"metadata": {"name": n}, "data": {"index": i.to_string()}}),
    )
    .await?;
    create::<Secret>(
        client,
        ns,
        json!({"metadata": {"name": n}, "type": "Opaque", "stringData": {"index": i.to_string()}}),
    )
    .await
}

/// Creates the `n` objects of each kind in `ns`.
pub async fn create_all(client: &Client, ns: &str, n: u32) -> Result<(), BenchError> {
    let mut s = stream::iter(0..n)
        .map(|i| create_one(client, ns, i))
        .buffer_unordered(IN_FLIGHT);
    while let Some(r) = s.next().await {
        r?;
    }
    Ok(())
}

/// The names of the bench's objects of kind `K` in `ns` (only copies: `copies_only`).
async fn names<K>(
    client: &Client,
    ns: &str,
    copies_only: bool,
) -> Result<BTreeSet<String>, BenchError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let lp = if copies_only {
        ListParams::default().labels(control::consts::reflection::ORIGIN)
    } else {
        ListParams::default()
    };
    let list = Api::<K>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map_err(step(format!("listing {} in {ns}", K::kind(&()))))?;
    Ok(list
        .items
        .iter()
        .filter_map(|o| o.meta().name.clone())
        .filter(|n| n.starts_with(PREFIX))
        .collect())
}

async fn count<K>(client: &Client, ns: &str) -> Result<u64, BenchError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    Ok(names::<K>(client, ns, true).await?.len() as u64)
}

/// The names per kind in `ns`, of copies only or of every object.
async fn all_names(
    client: &Client,
    ns: &str,
    copies_only: bool,
) -> Result<[BTreeSet<String>; 4], BenchError> {
    Ok([
        names::<Service>(client, ns, copies_only).await?,
        names::<EndpointSlice>(client, ns, copies_only).await?,
        names::<ConfigMap>(client, ns, copies_only).await?,
        names::<Secret>(client, ns, copies_only).await?,
    ])
}

/// Waits until the copies in the provider's namespace `remote_ns` are, by name and kind,
/// exactly the objects of the home namespace `local_ns` (none missing, none left over).
pub async fn until_same(
    home: &Client,
    local_ns: &str,
    provider: &Client,
    remote_ns: &str,
    timeout: Duration,
) -> Result<(), BenchError> {
    let want = all_names(home, local_ns, false).await?;
    let deadline = Instant::now() + timeout;
    loop {
        let got = all_names(provider, remote_ns, true).await?;
        if got == want {
            return Ok(());
        }
        if Instant::now() > deadline {
            let diff: Vec<usize> = got
                .iter()
                .zip(&want)
                .map(|(g, w)| g.symmetric_difference(w).count())
                .collect();
            return Err(BenchError::Options(format!(
                "the provider's copies differ from home's objects after {} s (names per kind: {diff:?})",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The copies in the provider's namespace `ns`.
pub async fn copies(client: &Client, ns: &str) -> Result<Counts, BenchError> {
    Ok(Counts {
        services: count::<Service>(client, ns).await?,
        endpoint_slices: count::<EndpointSlice>(client, ns).await?,
        config_maps: count::<ConfigMap>(client, ns).await?,
        secrets: count::<Secret>(client, ns).await?,
    })
}

/// Waits until the provider's namespace `ns` holds exactly `want` copies.
pub async fn until_copies(
    client: &Client,
    ns: &str,
    want: &Counts,
    timeout: Duration,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + timeout;
    loop {
        let got = copies(client, ns).await?;
        if got == *want {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Options(format!(
                "the copies on the provider: {got:?} after {} s, want {want:?}",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Deletes the ConfigMaps and EndpointSlices of even index, killing the process `pid` (the
/// virtual kubelet) with SIGKILL once a quarter of them are gone; returns what is left.
pub async fn delete_half_killing(
    client: &Client,
    ns: &str,
    n: u32,
    pid: u32,
) -> Result<Counts, BenchError> {
    let doomed: Vec<u32> = (0..n).filter(|i| i % 2 == 0).collect();
    let kill_at = doomed.len() / 4;
    let mut done = 0usize;
    let mut killed = false;
    let dp = DeleteParams::default();
    let mut s = stream::iter(doomed.iter().copied())
        .map(|i| {
            let dp = dp.clone();
            async move {
                let n = name(i);
                Api::<ConfigMap>::namespaced(client.clone(), ns)
                    .delete(&n, &dp)
                    .await
                    .map_err(step(format!("deleting ConfigMap {ns}/{n}")))?;
                Api::<EndpointSlice>::namespaced(client.clone(), ns)
                    .delete(&n, &dp)
                    .await
                    .map_err(step(format!("deleting EndpointSlice {ns}/{n}")))?;
                Ok::<(), BenchError>(())
            }
        })
        .buffer_unordered(IN_FLIGHT);
    while let Some(r) = s.next().await {
        r?;
        done += 1;
        if !killed && done >= kill_at {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            )
            .map_err(|e| BenchError::step(format!("killing the virtual kubelet {pid}"), &e))?;
            killed = true;
            eprintln!("bench: virtual kubelet {pid} killed after {done} deletions");
        }
    }
    let gone = doomed.len() as u64;
    Ok(Counts {
        services: u64::from(n),
        endpoint_slices: u64::from(n) - gone,
        config_maps: u64::from(n) - gone,
        secrets: u64::from(n),
    })
}

/// The provider's API writes (POST, PUT, PATCH, server-side APPLY, DELETE) to the reflected
/// kinds so far (its `apiserver_request_total`).
pub async fn mutations(client: &Client) -> Result<u64, BenchError> {
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| BenchError::step("a /metrics request", &e))?;
    let text = client
        .request_text(req)
        .await
        .map_err(step("the provider's /metrics".into()))?;
    Ok(sum_writes(&text))
}

/// The sum of `apiserver_request_total` over writes to Services, EndpointSlices, ConfigMaps
/// and Secrets.
fn sum_writes(text: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| {
            ["POST", "PUT", "PATCH", "APPLY", "DELETE"]
                .iter()
                .any(|v| l.contains(&format!("verb=\"{v}\"")))
                && ["services", "endpointslices", "configmaps", "secrets"]
                    .iter()
                    .any(|r| l.contains(&format!("resource=\"{r}\"")))
                && l.contains("subresource=\"\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// The resident memory of `pid`, MiB.
pub fn rss_mib(pid: u32) -> Result<f64, BenchError> {
    let (rss_kib, _) = probe::memory_kib(pid)?;
    Ok(rss_kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_summed_over_the_reflected_kinds_only() {
        let text = r#"# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 12
apiserver_request_total{code="200",component="apiserver",group="",resource="configmaps",scope="resource",subresource="",verb="PATCH",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",group="",resource="configmaps",scope="resource",subresource="",verb="LIST",version="v1"} 40
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",group="",resource="services",scope="resource",subresource="status",verb="PUT",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",group="discovery.k8s.io",resource="endpointslices",scope="resource",subresource="",verb="DELETE",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",group="",resource="secrets",scope="resource",subresource="",verb="APPLY",version="v1"} 4
"#;
        assert_eq!(sum_writes(text), 21);
    }
}
