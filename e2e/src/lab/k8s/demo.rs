//! The demo application on a lab with real nodes (the manual's quick start): namespace
//! `liqo-demo` offloaded by `liqoctl offload namespace`, a Deployment of `liqo-demo` spread over
//! the home cluster's nodes and its virtual node, its Service; requests from a demo pod to the
//! Service ([`ask`]) and their answers counted per pod ([`Tally`]). The quickstart and the
//! tests use it; it never tears anything down (`liqo-lab down` does).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Namespace, Pod, Service},
};
use kube::{Api, Client, api::ListParams};
use serde_json::json;

use super::{K8sLab, K8sLabError};

/// The namespace the demo runs in (offloaded).
pub const NAMESPACE: &str = "liqo-demo";
/// The demo's image (imported into every real node).
pub const IMAGE: &str = "localhost/liqo-lab/liqo-demo:lab";
/// The name of the demo's Deployment and Service, and its pods' `app` label.
pub const NAME: &str = "demo";
/// The toleration pods need to run on a virtual node.
pub const VIRTUAL_NODE_TAINT: &str = "virtual-node.liqo.io/not-allowed";

/// One answer of the demo (its `?format=text` line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The pod that answered.
    pub pod: String,
    /// Its node, as its own cluster names it.
    pub node: String,
    /// The client address it saw (without the port).
    pub client: String,
}

/// An answer line (`pod=… namespace=… node=… cluster=… client=ip:port served=…`), if it is one.
pub fn parse(line: &str) -> Option<Answer> {
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(k)?.strip_prefix('='))
            .map(str::to_owned)
    };
    let client = field("client")?;
    let client = match client.rsplit_once(':') {
        Some((ip, port)) if port.parse::<u16>().is_ok() => ip.trim_matches(['[', ']']).to_owned(),
        _ => client,
    };
    Some(Answer {
        pod: field("pod")?,
        node: field("node")?,
        client,
    })
}

/// The answers to a series of requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Requests made.
    pub asked: usize,
    /// What came back instead of an answer, one entry per failed request.
    pub failed: Vec<String>,
    /// Per answering pod: how many answers, and the client addresses it saw.
    pub by_pod: BTreeMap<String, (usize, BTreeSet<String>)>,
}

impl Tally {
    /// Counts the output of [`script`] for `asked` requests: an answer per line, or `FAIL …`.
    pub fn of(output: &str, asked: usize) -> Tally {
        let mut t = Tally {
            asked,
            ..Tally::default()
        };
        for line in output.lines().map(str::trim).filter(|l| !l.is_empty()) {
            match parse(line) {
                Some(a) => {
                    let e = t.by_pod.entry(a.pod).or_default();
                    e.0 += 1;
                    e.1.insert(a.client);
                }
                None => t.failed.push(line.to_owned()),
            }
        }
        let answered = t.answered();
        for _ in (answered + t.failed.len())..asked {
            t.failed.push("no answer".into());
        }
        t
    }

    /// How many requests were answered.
    pub fn answered(&self) -> usize {
        self.by_pod.values().map(|(n, _)| n).sum()
    }
}

/// The shell script a client pod runs: `each` requests to every one of `hosts` (at `port`), one
/// line per request (the answer, or `FAIL <host>`); each request bounded by 15 s (a path that
/// drops packets would hold a connect for minutes; 15 s, not 5: CI run 47 lost one request of
/// 100 to the 5 s bound while the 100 took 20 s on a loaded machine instead of 2, and 6,000
/// requests on an idle lab all answered).
pub fn script(hosts: &[&str], port: u16, each: usize) -> String {
    format!(
        "ask() {{ exec 3<>/dev/tcp/$1/{port} && printf 'GET /?format=text HTTP/1.0\\r\\n\\r\\n' >&3 \
         && cat <&3 | tail -n1; }}; export -f ask; \
         for h in {}; do for i in $(seq 1 {each}); do \
         a=$(timeout 15 bash -c 'ask \"$0\"' \"$h\"); echo \"${{a:-FAIL $h}}\"; done; done",
        hosts.join(" ")
    )
}

/// Whether a pod is Ready.
pub fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The node a pod is bound to (empty when not yet scheduled).
pub fn node_of(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

async fn create<K>(api: Api<K>, v: serde_json::Value) -> Result<(), K8sLabError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let what = format!("creating {}", v["metadata"]["name"]);
    let obj: K = serde_json::from_value(v).map_err(|e| K8sLabError::lab(what.clone(), e))?;
    api.create(&Default::default(), &obj)
        .await
        .map_err(K8sLabError::kube(what))?;
    Ok(())
}

/// On cluster `home`: the namespace, offloaded with `liqoctl offload namespace`, the demo's
/// Deployment of `replicas` spread one per node at most apart (virtual nodes included) and its
/// Service (port 80). Returns how long the offload took.
pub async fn deploy(k: &K8sLab, home: &str, replicas: u32) -> Result<Duration, K8sLabError> {
    let client = k.client(home).await?;
    create(
        Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": NAMESPACE}}),
    )
    .await?;
    // liqoctl waits until every provider created the namespace and said so: a round trip
    // across the WAN through both clusters' replicators. Its default (20 s, upstream's) was
    // too short on a loaded 2-core machine (CI run 45); the time it took is printed.
    let t = Instant::now();
    k.tool_ok(
        "liqoctl",
        home,
        &["offload", "namespace", NAMESPACE, "--timeout", "2m"],
    )?;
    let offloaded = t.elapsed();
    let env = json!([
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]);
    let labels = json!({"app": NAME});
    create(Api::<Deployment>::namespaced(client.clone(), NAMESPACE), json!({
        "metadata": {"name": NAME},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": labels}}],
                "tolerations": [{"key": VIRTUAL_NODE_TAINT, "operator": "Exists", "effect": "NoExecute"}],
                "containers": [{"name": NAME, "image": IMAGE, "imagePullPolicy": "Never", "env": env,
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1}}]}}}})).await?;
    create(
        Api::<Service>::namespaced(client, NAMESPACE),
        json!({"metadata": {"name": NAME},
            "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}}),
    )
    .await?;
    Ok(offloaded)
}

/// The demo's pods on `home` once `n` of them are Ready and none is terminating (at most
/// `within`); the error names each pod's node and readiness.
pub async fn ready_pods(
    home: &Client,
    n: usize,
    within: Duration,
) -> Result<Vec<Pod>, K8sLabError> {
    let api: Api<Pod> = Api::namespaced(home.clone(), NAMESPACE);
    let deadline = Instant::now() + within;
    loop {
        let live: Vec<Pod> = api
            .list(&ListParams::default().labels(&format!("app={NAME}")))
            .await
            .map_err(K8sLabError::kube("listing the demo's pods"))?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        if live.len() == n && live.iter().all(ready) {
            return Ok(live);
        }
        if Instant::now() >= deadline {
            let seen: Vec<String> = live
                .iter()
                .map(|p| {
                    // What holds a pod back: its phase, its false conditions, its containers'
                    // waiting reasons.
                    let st = p.status.as_ref();
                    let held: Vec<String> = st
                        .and_then(|s| s.conditions.as_ref())
                        .into_iter()
                        .flatten()
                        .filter(|c| c.status != "True")
                        .map(|c| {
                            format!(
                                "{} {}",
                                c.type_,
                                c.message.as_deref().or(c.reason.as_deref()).unwrap_or("")
                            )
                        })
                        .chain(
                            st.and_then(|s| s.container_statuses.as_ref())
                                .into_iter()
                                .flatten()
                                .filter_map(|c| c.state.as_ref()?.waiting.as_ref())
                                .map(|w| {
                                    format!(
                                        "waiting {} {}",
                                        w.reason.as_deref().unwrap_or(""),
                                        w.message.as_deref().unwrap_or("")
                                    )
                                }),
                        )
                        .collect();
                    format!(
                        "{} on {:?} ready={} phase={:?} {held:?}",
                        p.metadata.name.as_deref().unwrap_or("?"),
                        node_of(p),
                        ready(p),
                        st.and_then(|s| s.phase.as_deref()),
                    )
                })
                .collect();
            return Err(K8sLabError::lab(
                format!("waiting {} s for {n} Ready demo pods", within.as_secs()),
                format!("found {seen:?}"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Runs [`script`] in pod `from` of the demo's namespace on `home` and counts the answers.
pub fn ask(
    k: &K8sLab,
    home: &str,
    from: &str,
    hosts: &[&str],
    each: usize,
) -> Result<Tally, K8sLabError> {
    let out = k.tool_ok(
        "kubectl",
        home,
        &[
            "exec",
            "-n",
            NAMESPACE,
            from,
            "--",
            "bash",
            "-c",
            &script(hosts, 80, each),
        ],
    )?;
    Ok(Tally::of(&out, hosts.len() * each))
}

/// Asks `host` from pod `from` until pod `pod` answers (at most `within`): an endpoint reaches
/// kube-proxy a moment after its pod is Ready.
pub fn until_answered_by(
    k: &K8sLab,
    home: &str,
    from: &str,
    host: &str,
    pod: &str,
    within: Duration,
) -> Result<Duration, K8sLabError> {
    let t = Instant::now();
    loop {
        let tally = ask(k, home, from, &[host], 3)?;
        if tally.by_pod.contains_key(pod) {
            return Ok(t.elapsed());
        }
        if t.elapsed() >= within {
            return Err(K8sLabError::lab(
                format!(
                    "waiting {} s for {pod} to answer at {host}",
                    within.as_secs()
                ),
                format!("the last answers: {tally:?}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_parsed_and_counted_and_a_missing_one_is_a_failure() {
        let out = "pod=demo-a namespace=liqo-demo node=n0 cluster=rome client=10.200.0.17:40000 served=1\n\
                   FAIL 10.96.0.20\n\
                   pod=demo-b namespace=liqo-demo node=n1 cluster= client=[fd00::1]:5 served=2\n\
                   pod=demo-a namespace=liqo-demo node=n0 cluster=rome client=10.200.0.18:1 served=3\n";
        let t = Tally::of(out, 5);
        assert_eq!(t.answered(), 3);
        assert_eq!(
            t.failed,
            vec!["FAIL 10.96.0.20".to_owned(), "no answer".to_owned()]
        );
        assert_eq!(t.by_pod["demo-a"].0, 2);
        assert_eq!(
            t.by_pod["demo-a"].1.iter().cloned().collect::<Vec<_>>(),
            vec!["10.200.0.17", "10.200.0.18"]
        );
        assert_eq!(t.by_pod["demo-b"].1.iter().next().unwrap(), "fd00::1");
        assert_eq!(parse("HTTP/1.0 500"), None);
        assert_eq!(parse("pod=x node=y").map(|a| a.pod), None, "no client");
    }

    #[test]
    fn the_script_asks_every_host_each_time_and_says_which_failed() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            for n in 0..3 {
                let (mut s, peer) = listener.accept().unwrap();
                let mut buf = [0u8; 512];
                let got = s.read(&mut buf).unwrap();
                assert!(buf[..got].starts_with(b"GET /?format=text HTTP/1.0"));
                let line = format!(
                    "pod=demo-{n} namespace=d node=n0 cluster=rome client={peer} served={n}\n"
                );
                let answer = format!(
                    "HTTP/1.0 200 OK\r\ncontent-length: {}\r\n\r\n{line}",
                    line.len()
                );
                s.write_all(answer.as_bytes()).unwrap();
            }
        });
        // 127.0.0.2 is loopback too, but nothing listens there: every request to it fails.
        let out = std::process::Command::new("bash")
            .args(["-c", &script(&["127.0.0.1", "127.0.0.2"], port, 3)])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        server.join().unwrap();
        let t = Tally::of(&String::from_utf8_lossy(&out.stdout), 6);
        assert_eq!(t.answered(), 3, "{t:?}");
        assert_eq!(t.by_pod.len(), 3, "{t:?}");
        assert!(
            t.by_pod.values().all(|(_, c)| c.contains("127.0.0.1")),
            "{t:?}"
        );
        assert_eq!(t.failed, vec!["FAIL 127.0.0.2".to_owned(); 3]);
    }
}
