//! `liqo-ipam serve --tls-secret` on a real API server (the binary's shared harness cluster),
//! run with the token of a ServiceAccount bound by the chart's rules for its Secret (secrets
//! `create`, `get` and `update` of that name): the first start makes the Secret and serves TLS
//! with its certificate and token (the CA and token from the Secret work, a wrong token or none
//! is refused), and two processes starting at once agree on one Secret; a restart serves the same
//! Secret without writing it; a Secret whose certificate names other hosts is replaced (its CA
//! and token kept); a Secret the Role cannot read fails the start naming it. One test, one
//! lease of the pool: the cluster is the one the other `_k8s` tests of the binary share.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use dataplane::supervisor::Attached;
use ipam::service::{
    client::{self, ClientOptions},
    proto,
    tls_secret::{PROFILE, TOKEN_KEY},
};
use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api,
    api::{ListParams, PostParams},
};
use liqo_types::certs::{self, Plan};

use crate::common::{
    self,
    k8s::{Leased, client_of, forbidden, rules, sandbox_with},
};

const SECRET: &str = "liqo-ipam-tls";

/// A `liqo-ipam serve --tls-secret` started in `dir` (its state file and log there), listening
/// on 127.0.0.1 (a name of its certificate through `--tls-names`).
struct Run {
    child: Attached,
    url: String,
    metrics: u16,
}

fn start(dir: &Path, kubeconfig: &Path, ns: &str, secret: &str) -> Run {
    std::fs::create_dir_all(dir).unwrap();
    let (port, metrics) = (common::free_port(), common::free_port());
    let spec = common::serve_spec(&dir.join("state.json"), &[])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .args(["--tls-secret", secret, "--namespace", ns])
        .args(["--tls-names", "127.0.0.1"])
        .env("KUBECONFIG", kubeconfig);
    Run {
        child: spec.attached().expect("starting liqo-ipam serve"),
        url: format!("https://127.0.0.1:{port}"),
        metrics,
    }
}

/// The Secret's `ca.crt` and `token` written to `dir` as a client mounts them.
fn credentials(secret: &Secret, dir: &Path) -> (PathBuf, PathBuf) {
    let data = secret.data.as_ref().unwrap();
    let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
    (
        common::secret(dir, "ca.crt", &text(certs::CA_CERT)),
        common::secret(dir, "token", &text(TOKEN_KEY)),
    )
}

fn options(url: &str, ca: &Path, token: Option<&Path>) -> ClientOptions {
    let mut o = ClientOptions::new(url);
    o.ca_file = Some(ca.to_owned());
    o.token_file = token.map(Path::to_owned);
    o
}

/// Lists with `o`: the call's outcome (a failed connection is a panic).
async fn list(o: &ClientOptions) -> Result<proto::ListResponse, tonic::Status> {
    let mut c = client::connect(o).await.unwrap();
    c.list(proto::Empty {})
        .await
        .map(tonic::Response::into_inner)
}

/// Waits until `run` answers a `List` with the CA and token of the Secret as it is then (failing
/// after 30 s or if it exits); returns that Secret.
async fn serving(run: &mut Run, secrets: &Api<Secret>, name: &str, dir: &Path) -> Secret {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = secrets.get_opt(name).await.unwrap() {
            let (ca, token) = credentials(&s, dir);
            if let Ok(mut c) = client::connect(&options(&run.url, &ca, Some(&token))).await
                && c.list(proto::Empty {}).await.is_ok()
            {
                return s;
            }
        }
        if let Some(status) = run.child.exited().unwrap() {
            panic!(
                "liqo-ipam serve exited with {status}:\n{}",
                run.child.tail(30)
            );
        }
        assert!(
            Instant::now() < deadline,
            "liqo-ipam serve did not serve the Secret's certificate in 30 s:\n{}",
            run.child.tail(30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn stop(mut run: Run) -> String {
    let exit = run.child.stop(Duration::from_secs(10)).unwrap();
    assert!(
        exit.status.success() && !exit.killed,
        "{}",
        run.child.tail(20)
    );
    run.child.tail(usize::MAX)
}

fn text(s: &Secret, key: &str) -> String {
    String::from_utf8(s.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tls_secret_is_made_at_the_first_start_reused_after_and_replaced_when_stale() {
    let leased = Leased::take().await;
    let ns = "ipam-tls-secret";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let kubeconfig = sandbox_with(&leased, ns, &rules("secrets", SECRET), dir).await;
    // The token reaches its Secret only: no list, no other name.
    let mine = Api::<Secret>::namespaced(client_of(&kubeconfig).await, ns);
    assert!(forbidden(
        &mine.list(&ListParams::default()).await.unwrap_err()
    ));
    assert!(forbidden(&mine.get("another").await.unwrap_err()));
    assert!(mine.get_opt(SECRET).await.unwrap().is_none());
    let secrets = Api::<Secret>::namespaced(leased.admin.clone(), ns);

    // First start, two at once (as a rollout could): one makes the Secret, the other serves it
    // too (a 409 on its create reads it again).
    let mut a = start(&dir.join("a"), &kubeconfig, ns, SECRET);
    let mut b = start(&dir.join("b"), &kubeconfig, ns, SECRET);
    let made = serving(&mut a, &secrets, SECRET, dir).await;
    assert_eq!(
        serving(&mut b, &secrets, SECRET, dir)
            .await
            .metadata
            .resource_version,
        made.metadata.resource_version,
        "the second start wrote the Secret again"
    );
    let data = made.data.as_ref().unwrap();
    assert_eq!(
        data.keys().map(String::as_str).collect::<Vec<_>>(),
        ["ca.crt", "ca.key", "tls.crt", "tls.key", "token"]
    );
    assert_eq!(made.type_.as_deref(), Some("Opaque"));
    assert_eq!(
        made.metadata.labels.as_ref().unwrap()["app.kubernetes.io/managed-by"],
        "liqo-ipam"
    );
    let token = text(&made, TOKEN_KEY);
    assert!(
        token.len() == 64 && token.bytes().all(|c| c.is_ascii_hexdigit()),
        "the token is not 32 random bytes in hex"
    );
    let m = certs::Material::from_data(|k| data.get(k).map(|b| b.0.as_slice())).unwrap();
    let i = certs::inspect(&m).unwrap();
    assert!(i.consistent);
    assert_eq!(
        i.cert_sans,
        [
            "liqo-ipam",
            &format!("liqo-ipam.{ns}"),
            &format!("liqo-ipam.{ns}.svc"),
            &format!("liqo-ipam.{ns}.svc.cluster.local"),
            "127.0.0.1",
        ]
    );
    let left = i.cert_not_after.duration_since(SystemTime::now()).unwrap();
    assert!(
        left > certs::YEAR * 10 - certs::DAY,
        "valid 10 years: {left:?}"
    );

    // The Secret's CA and token work; a wrong token or none is refused.
    let (ca, good) = credentials(&made, dir);
    assert!(list(&options(&a.url, &ca, Some(&good))).await.is_ok());
    let wrong = common::secret(dir, "wrong", &"0".repeat(64));
    for token in [Some(wrong.as_path()), None] {
        let e = list(&options(&a.url, &ca, token)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{token:?}: {e}");
    }
    let status = common::status(a.metrics);
    assert_eq!(status["tlsSecret"], format!("{ns}/{SECRET}"));
    assert_eq!(status["authentication"], "bearer token required");
    for log in [stop(a), stop(b)] {
        assert!(
            !log.contains(&token) && !log.contains("PRIVATE KEY"),
            "a key or the token in the log:\n{log}"
        );
    }

    // A restart serves the same Secret, written by nobody.
    let mut again = start(&dir.join("again"), &kubeconfig, ns, SECRET);
    let same = serving(&mut again, &secrets, SECRET, dir).await;
    assert_eq!(
        same.metadata.resource_version,
        made.metadata.resource_version
    );
    assert_eq!(text(&same, certs::TLS_CERT), text(&made, certs::TLS_CERT));
    let log = stop(again);
    assert!(
        log.contains("serving the certificate and token of the Secret"),
        "{log}"
    );

    // A certificate for other names (and its own CA) is replaced at the next start: the
    // certificate reissued by the stored CA, the token kept.
    let other = PROFILE
        .make(
            Plan::New,
            None,
            &["other.example".to_owned()],
            SystemTime::now(),
        )
        .unwrap();
    let mut stale = same.clone();
    let d = stale.data.as_mut().unwrap();
    for (k, v) in other.data() {
        d.insert(k.to_owned(), ByteString(v.as_bytes().to_vec()));
    }
    let stale = secrets
        .replace(SECRET, &PostParams::default(), &stale)
        .await
        .unwrap();
    let mut fixed = start(&dir.join("fixed"), &kubeconfig, ns, SECRET);
    let replaced = serving(&mut fixed, &secrets, SECRET, dir).await;
    assert_ne!(
        replaced.metadata.resource_version,
        stale.metadata.resource_version
    );
    assert_eq!(
        text(&replaced, certs::CA_CERT),
        other.ca_cert,
        "the CA is kept"
    );
    assert_eq!(text(&replaced, TOKEN_KEY), token, "the token is kept");
    assert_ne!(text(&replaced, certs::TLS_CERT), other.cert);
    let data = replaced.data.as_ref().unwrap();
    let m = certs::Material::from_data(|k| data.get(k).map(|b| b.0.as_slice())).unwrap();
    let i = certs::inspect(&m).unwrap();
    assert!(i.consistent && i.cert_sans.contains(&"127.0.0.1".to_owned()));
    stop(fixed);

    // A Secret the Role cannot read fails the start, naming it.
    let run = common::serve_spec(&dir.join("denied").join("state.json"), &[])
        .args(["--listen", &format!("127.0.0.1:{}", common::free_port())])
        .args([
            "--metrics-listen",
            &format!("127.0.0.1:{}", common::free_port()),
        ])
        .args(["--tls-secret", "another", "--namespace", ns])
        .env("KUBECONFIG", &kubeconfig);
    std::fs::create_dir_all(dir.join("denied")).unwrap();
    let (status, out) = common::run_to_exit(run);
    assert!(!status.success(), "{out}");
    assert!(
        out.contains(&format!("--tls-secret: reading Secret {ns}/another"))
            && out.contains("forbidden"),
        "{out}"
    );
    assert!(secrets.get_opt("another").await.unwrap().is_none());
    leased.release().await;
}
