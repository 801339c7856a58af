//! The quickstart on real nodes: what it builds before the lab (the node binaries, the lab's
//! images) and, once peered, the manual's demo: `liqo-demo` offloaded, the demo spread over
//! rome's nodes and `liqo-milan`, 100 requests from a rome pod to its Service, and what the
//! nodes' programs use.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use e2e::lab::{
    self, Prefix,
    k8s::{K8sLab, demo, nodes, realnode},
};
use kube::Api;

/// Replicas of the demo: one per node of rome (two) and two on `liqo-milan` at most.
const REPLICAS: u32 = 4;
/// Requests to each of the Service's ClusterIP and DNS name.
const EACH: usize = 50;

/// Builds (or finds in the cache) what real nodes run and the lab's images.
pub(crate) fn build() -> Result<()> {
    println!(
        "== Building what the real nodes run: kubelet, kube-proxy, containerd, runc, CoreDNS \
         (from the Go module proxy;\n   about 8 minutes the first time, cached after)"
    );
    let t = Instant::now();
    let node = testkit::k8s::node_binaries().context("the node binaries")?;
    println!(
        "   node binaries ready in {:.1} s: {}",
        t.elapsed().as_secs_f64(),
        node.dir.display()
    );
    println!("== Building the lab's images (the sandbox's pause and liqo-demo, OCI archives)");
    let t = Instant::now();
    let demo_bin = lab::bin("liqo-demo")?;
    let dir = realnode::images::build(
        demo_bin
            .parent()
            .context("the liqo-demo binary's directory")?,
        &node.dir,
    )?;
    println!(
        "   images ready in {:.1} s: {}",
        t.elapsed().as_secs_f64(),
        dir.display()
    );
    println!("== Building Liqo's images (one per component of the chart, OCI archives)");
    let t = Instant::now();
    let dir = realnode::images::build_chart(
        demo_bin
            .parent()
            .context("the liqo-demo binary's directory")?,
    )?;
    println!(
        "   images ready in {:.1} s: {}",
        t.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}

/// The demo on lab `k` (peered rome -> milan): prints its sections; whether every request was
/// answered, by both clusters.
pub(crate) async fn run(k: &K8sLab, prefix: &Prefix) -> Result<bool> {
    let rome = k.client("rome").await?;
    let took = nodes::wait_named(&rome, "liqo-milan", Duration::from_secs(120)).await?;
    println!(
        "   the virtual node liqo-milan Ready {:.1} s later\n",
        took.as_secs_f64()
    );
    let t = Instant::now();
    let offloaded = demo::deploy(k, "rome", REPLICAS).await?;
    let pods = demo::ready_pods(&rome, REPLICAS as usize, Duration::from_secs(180)).await?;
    println!(
        "== `liqoctl offload namespace {ns}`; the demo ({REPLICAS} replicas of {img}, spread over \
         rome's nodes and liqo-milan)\n   offloaded in {:.1} s; the demo Ready {:.1} s later\n",
        offloaded.as_secs_f64(),
        (t.elapsed() - offloaded).as_secs_f64(),
        ns = demo::NAMESPACE,
        img = demo::IMAGE,
    );
    let wide = |ctx: &str, args: &[&str]| k.tool_ok("kubectl", ctx, args);
    println!(
        "== kubectl --context rome -n {ns} get pods -o wide\n\n{}",
        wide(
            "rome",
            &["-n", demo::NAMESPACE, "get", "pods", "-o", "wide"]
        )?,
        ns = demo::NAMESPACE
    );
    println!(
        "== kubectl --context milan get pods -A -l app={} -o wide   (the offloaded pods, in real \
         containers on milan's nodes)\n\n{}",
        demo::NAME,
        wide(
            "milan",
            &[
                "get",
                "pods",
                "-A",
                "-l",
                &format!("app={}", demo::NAME),
                "-o",
                "wide"
            ]
        )?
    );
    let cluster_of = |pod: &str| {
        pods.iter()
            .find(|p| p.metadata.name.as_deref() == Some(pod))
            .map(|p| match demo::node_of(p).strip_prefix("liqo-") {
                Some(c) => (c.to_owned(), "(virtual)".to_owned()),
                None => ("rome".to_owned(), demo::node_of(p)),
            })
    };
    let from = pods
        .iter()
        .find(|p| !demo::node_of(p).starts_with("liqo-"))
        .and_then(|p| p.metadata.name.clone())
        .context("a demo pod on rome's own nodes")?;
    let offloaded = pods
        .iter()
        .find(|p| demo::node_of(p).starts_with("liqo-"))
        .and_then(|p| p.metadata.name.clone())
        .context("a demo pod on liqo-milan")?;
    let svc = Api::<k8s_openapi::api::core::v1::Service>::namespaced(rome.clone(), demo::NAMESPACE)
        .get(demo::NAME)
        .await?;
    let ip = svc
        .spec
        .and_then(|s| s.cluster_ip)
        .context("the demo Service's ClusterIP")?;
    let dns = format!("{}.{}.svc.cluster.local", demo::NAME, demo::NAMESPACE);
    demo::until_answered_by(k, "rome", &from, &ip, &offloaded, Duration::from_secs(60))?;
    let t = Instant::now();
    let tally = demo::ask(k, "rome", &from, &[&ip, &dns], EACH)?;
    println!(
        "== {} requests from rome pod {from} to the Service: {EACH} to its ClusterIP {ip}, {EACH} \
         to {dns} ({:.1} s)\n",
        tally.asked,
        t.elapsed().as_secs_f64()
    );
    println!(
        "   {:<24} {:<8} {:<10} {:>7}  CLIENT ADDRESS IT SAW",
        "POD", "CLUSTER", "NODE", "ANSWERS"
    );
    let mut per_cluster = std::collections::BTreeMap::<String, usize>::new();
    for (pod, (n, clients)) in &tally.by_pod {
        let (cluster, node) = cluster_of(pod).unwrap_or_else(|| ("?".into(), "?".into()));
        *per_cluster.entry(cluster.clone()).or_default() += n;
        let clients: Vec<&str> = clients.iter().map(String::as_str).collect();
        println!(
            "   {pod:<24} {cluster:<8} {node:<10} {n:>7}  {}",
            clients.join(", ")
        );
    }
    let summary: Vec<String> = per_cluster
        .iter()
        .map(|(c, n)| format!("{n} by {c}"))
        .collect();
    println!(
        "\n   answered {}/{}: {}{}",
        tally.answered(),
        tally.asked,
        summary.join(", "),
        if tally.failed.is_empty() {
            String::new()
        } else {
            format!("; failed: {:?}", tally.failed)
        }
    );
    println!(
        "   (milan's pods see the client at milan's view of rome's pod CIDR: the tunnel's \
         remapping at work)\n"
    );
    memory(prefix);
    println!(
        "   Explore the demo (after eval \"$(liqo-lab --prefix {prefix} k8s env)\"):\n\
         \x20    kubectl --context rome -n {ns} get pods,svc,endpointslices -o wide\n\
         \x20    kubectl --context rome -n {ns} exec {from} -- bash -c 'exec 3<>/dev/tcp/{name}/80; \
         printf \"GET /?format=text HTTP/1.0\\r\\n\\r\\n\" >&3; cat <&3'\n\
         \x20    kubectl --context rome -n {ns} logs {offloaded}     (a container on milan)\n\
         \x20    kubectl --context rome -n {ns} scale deployment {name} --replicas 6\n",
        ns = demo::NAMESPACE,
        name = demo::NAME,
    );
    // Every request answered, by a demo pod, from both clusters.
    Ok(tally.failed.is_empty()
        && !per_cluster.contains_key("?")
        && per_cluster.contains_key("rome")
        && per_cluster.contains_key("milan"))
}

/// The resident memory of every real node's programs.
fn memory(prefix: &Prefix) {
    println!("== Memory of the real nodes' programs (resident, MiB)\n");
    println!(
        "   {:<8} {:<5} {:>8} {:>11} {:>15} {:>11} {:>8}",
        "CLUSTER", "NODE", "kubelet", "containerd", "shims (count)", "kube-proxy", "coredns"
    );
    let mib = |u: &realnode::NodeUsage, p: &str| {
        u.rss_kib
            .get(p)
            .map(|(kib, n)| (format!("{:.0}", *kib as f64 / 1024.0), *n))
            .unwrap_or(("-".into(), 0))
    };
    for u in realnode::usage(prefix) {
        let shims = mib(&u, "containerd-shim");
        println!(
            "   {:<8} {:<5} {:>8} {:>11} {:>15} {:>11} {:>8}",
            u.cluster,
            u.node,
            mib(&u, "kubelet").0,
            mib(&u, "containerd").0,
            format!("{} ({})", shims.0, shims.1),
            mib(&u, "kube-proxy").0,
            mib(&u, "coredns").0
        );
    }
    println!();
}
