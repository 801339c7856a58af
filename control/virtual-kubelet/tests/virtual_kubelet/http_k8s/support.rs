//! Helpers of `http_k8s.rs`: the virtual node's name and the remote namespace, the pods it
//! creates, kubectl and curl on blocking threads, a client certificate without rights.

use std::{collections::BTreeMap, io::Write as _, process::Stdio, time::Duration};

use control::api::discovery::ClusterIdentity;
use serde_json::json;
use testkit::k8s::{self, Cluster};

/// The virtual node.
pub(crate) const NODE: &str = "liqo-milan";
/// The remote namespace of `demo`.
pub(crate) const REMOTE_NS: &str = "demo-rome";

pub(crate) fn identity(id: &str, name: &str) -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: id.parse().unwrap(),
        cluster_name: name.parse().unwrap(),
    }
}

/// Appends `lines` to the container log kwok serves on `c`, in CRI format.
pub(crate) fn append_log(c: &Cluster, lines: &[&str]) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(c.container_log())
        .unwrap();
    for l in lines {
        let now = k8s_openapi::jiff::Timestamp::now();
        writeln!(f, "{now} stdout F {l}").unwrap();
    }
}

/// A pod bound to the virtual node (tolerating the taints of a node that never reports).
pub(crate) fn local_pod(name: &str, ns: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}],
                 "tolerations": [{"operator": "Exists"}]}
    })
}

/// The provider's copy of a pod: on milan's kwok node, with `labels`.
pub(crate) fn remote_pod(
    name: &str,
    kwok_node: &str,
    labels: &BTreeMap<String, String>,
) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "namespace": REMOTE_NS, "labels": labels},
        "spec": {"nodeName": kwok_node, "containers": [{"name": "c", "image": "busybox"}]}
    })
}

/// kubectl against rome with `args`, `stdin` fed; (exit code, stdout, stderr). On a blocking
/// thread: the runtime's workers keep serving the kubelet API meanwhile.
pub(crate) async fn kubectl(
    bins: &k8s::Binaries,
    rome: &Cluster,
    args: &[&str],
    stdin: &str,
) -> (i32, String, String) {
    let (kubectl, kubeconfig, context) = (
        bins.path("kubectl"),
        rome.kubeconfig.clone(),
        rome.name.clone(),
    );
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let stdin = stdin.to_owned();
    tokio::task::spawn_blocking(move || {
        kubectl_blocking(&kubectl, &kubeconfig, &context, &args, &stdin)
    })
    .await
    .unwrap()
}

pub(crate) fn kubectl_blocking(
    kubectl: &std::path::Path,
    kubeconfig: &std::path::Path,
    context: &str,
    args: &[String],
    stdin: &str,
) -> (i32, String, String) {
    let mut child = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--context")
        .arg(context)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Fed from a thread of its own: kubectl may write much before it reads all of its stdin.
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_owned();
    let feeder = std::thread::spawn(move || input.write_all(stdin.as_bytes()));
    // kubectl must end by itself within 60 s: killed after, the test then fails on its output.
    let pid = child.id();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        if done_rx.recv_timeout(Duration::from_secs(60)).is_err() {
            eprintln!("kubectl {pid} still running after 60 s: killing it");
            // It may have ended meanwhile: then there is nothing to kill.
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
    });
    let out = child.wait_with_output().unwrap();
    // kubectl may end without reading all of its stdin (a command that reads only part):
    // a broken pipe is not the test's failure, the output tells.
    let _ = feeder.join().unwrap();
    // The killer may have given up already (then it killed kubectl): nothing to tell.
    let _ = done_tx.send(());
    killer.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// curl to the kubelet API at `port` with `args`; (exit code, body then the status code on
/// its own line). On a blocking thread, as [`kubectl`].
pub(crate) async fn curl(port: u16, path: &str, args: &[&str]) -> (i32, String) {
    let path = path.to_owned();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || curl_blocking(port, &path, &args))
        .await
        .unwrap()
}

pub(crate) fn curl_blocking(port: u16, path: &str, args: &[String]) -> (i32, String) {
    let out = std::process::Command::new("curl")
        .args(["-sk", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl must be installed");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A client certificate of user `nobody` (no group) signed by `c`'s CA, in `c`'s directory
/// (removed with the cluster); (certificate path, key path).
pub(crate) fn nobody_cert(c: &Cluster) -> (String, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key =
        KeyPair::from_pem(&std::fs::read_to_string(c.dir.join("pki/ca.key")).unwrap()).unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(DnType::CommonName, "liqo-lab-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let issuer = Issuer::new(ca, ca_key);
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, "nobody");
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &issuer).unwrap();
    let (crt_path, key_path) = (c.dir.join("nobody.crt"), c.dir.join("nobody.key"));
    std::fs::write(&crt_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (
        crt_path.display().to_string(),
        key_path.display().to_string(),
    )
}
