//! liqoctl against a real apiserver (the `e2e::k8s` harness, one cluster): the built binary is
//! run with `--kubeconfig`/`--context` on a cluster prepared as the installer prepares it
//! (namespace `liqo`, identity ConfigMap, `auth-token` Secret, LoadBalancer Service `liqo-auth`
//! with ingress 127.0.0.1). No controller runs: the test writes the ForeignCluster's
//! conditions itself, as the controller-manager would, to drive the success and failure paths.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Output, Stdio},
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use clap::Parser;
use control::{
    api::discovery::{ForeignCluster, ForeignClusterStatus, PeeringEnabled},
    conditions::{Authentication, Condition, Peering, set},
    consts::{keys, labels, objects, values},
    identity::AuthToken,
};
use e2e::k8s::{self, Clusters, Options};
use k8s_openapi::{
    api::core::v1::{ConfigMap, Namespace, Secret, Service},
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use liqoctl::cli::{Cli, Command, PeerArgs, PeerMode};
use serde_json::json;

static NEXT: AtomicUsize = AtomicUsize::new(0);

const ROME_ID: &str = "3f1e7f52-6b8a-4d4c-9a0f-1c2d3e4f5a6b";
const MILAN_ID: &str = "b07938e3-d241-460c-a77b-e286c0f733c7";
const AUTH_PORT: i32 = 31443;

/// Tears the clusters down even when the test fails.
struct DownOnDrop(e2e::lab::Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        // Already down when `Clusters` was dropped first; a failure here cannot be reported
        // from a destructor and leaves nothing `Clusters`' own teardown did not log.
        let _ = k8s::down(&self.0);
    }
}

struct Ctl {
    kubeconfig: PathBuf,
    context: String,
}

impl Ctl {
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_liqoctl"));
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--context")
            .arg(&self.context)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    async fn run(&self, args: &[&str]) -> Output {
        let out = self.command(args).output().await.unwrap();
        eprintln!(
            "$ liqoctl {}\n-> {:?}\nstdout:\n{}stderr:\n{}",
            redact(&args.join(" ")),
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

/// Command lines in the test log without the tokens.
fn redact(s: &str) -> String {
    s.split(' ')
        .map(|w| if w.len() == 128 { "<token>" } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

async fn prepare(client: &Client, token: &AuthToken) {
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": objects::LIQO_NAMESPACE}})).unwrap(),
    )
    .await
    .unwrap();
    let ns = objects::LIQO_NAMESPACE;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {
                "name": objects::CLUSTER_ID_CONFIGMAP,
                "labels": {labels::APP_NAME: values::CLUSTER_ID_CONFIGMAP_APP},
            },
            "data": {keys::CLUSTER_ID: ROME_ID, keys::CLUSTER_NAME: "rome"},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": objects::AUTH_TOKEN_SECRET},
                "stringData": {keys::TOKEN: token.expose()},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": objects::AUTH_SERVICE},
                "spec": {
                    "type": "LoadBalancer",
                    "selector": {"app": "liqo-auth"},
                    "ports": [{"name": "https", "port": AUTH_PORT, "targetPort": AUTH_PORT}],
                },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    services
        .patch_status(
            objects::AUTH_SERVICE,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}})),
        )
        .await
        .unwrap();
}

/// Writes the ForeignCluster's conditions, as its controller would.
async fn set_conditions(fcs: &Api<ForeignCluster>, name: &str, conds: &[Condition]) {
    let now = Time(Timestamp::now());
    let mut status = ForeignClusterStatus::default();
    for c in conds {
        set(&mut status.peering_conditions, *c, &now);
    }
    fcs.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .unwrap();
}

async fn fc_names(fcs: &Api<ForeignCluster>) -> Vec<String> {
    let l = fcs.list(&ListParams::default()).await.unwrap();
    l.items
        .into_iter()
        .filter_map(|f| f.metadata.name)
        .collect()
}

fn crds_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../chart/crds"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_peer_and_unpeer_against_an_apiserver() {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let prefix: e2e::lab::Prefix = format!("lq{n}x{}", std::process::id() % 100_000)
        .parse()
        .unwrap();
    let _guard = DownOnDrop(prefix.clone());
    let bins = k8s::binaries().unwrap();
    let set = Clusters::up(
        &bins,
        &Options {
            prefix,
            clusters: 1,
            nodes: 1,
            overlapping: true,
        },
    )
    .await
    .unwrap();
    let cluster = &set.clusters[0];
    let client = cluster.client().await.unwrap();
    k8s::install_crds(&client, crds_dir()).await.unwrap();
    let rome_token = AuthToken::from_bytes(&[0x5a; 64]);
    prepare(&client, &rome_token).await;
    let ctl = Ctl {
        kubeconfig: set.kubeconfig.clone(),
        context: cluster.name.clone(),
    };
    let fcs: Api<ForeignCluster> = Api::all(client.clone());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), objects::LIQO_NAMESPACE);
    let auth_url = format!("https://127.0.0.1:{AUTH_PORT}");

    // generate peer-command: the command parses back to this cluster's values.
    let out = ctl
        .run(&["generate", "peer-command", "--only-command"])
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stdout(&out);
    assert_eq!(line.lines().count(), 1, "{line}");
    let cli = Cli::try_parse_from(line.trim().split(' ')).unwrap();
    let Command::Peer(PeerArgs {
        mode: Some(PeerMode::OutOfBand(o)),
        ..
    }) = cli.command
    else {
        panic!("not a peer out-of-band command: {line}")
    };
    assert_eq!(o.name.as_str(), "rome");
    assert_eq!(o.cluster_id.as_str(), ROME_ID);
    assert_eq!(o.auth_url.as_str(), auth_url);
    assert_eq!(o.auth_token, rome_token);
    let out = ctl.run(&["generate", "peer-command"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("on a *different* cluster"));
    assert!(stdout(&out).trim_end().ends_with(line.trim()));

    // Our own cluster ID: refused, nothing written.
    let milan_token = AuthToken::from_bytes(&[0x17; 64]);
    let own = ctl
        .run(&[
            "peer",
            "out-of-band",
            "milan",
            "--auth-url",
            "https://127.0.0.2:31443",
            "--cluster-id",
            ROME_ID,
            "--auth-token",
            milan_token.expose(),
        ])
        .await;
    assert_eq!(own.status.code(), Some(1));
    assert!(
        stderr(&own).contains(ROME_ID) && stderr(&own).contains("itself"),
        "{}",
        stderr(&own)
    );
    // A bad flag: refused by the parser (exit 2), nothing written.
    let bad = ctl
        .run(&[
            "peer",
            "out-of-band",
            "milan",
            "--auth-url",
            "https://127.0.0.2:31443",
            "--cluster-id",
            "Not-An-ID",
            "--auth-token",
            milan_token.expose(),
        ])
        .await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("Not-An-ID"), "{}", stderr(&bad));
    // A URL the ForeignCluster's schema refuses (the CRD wants https): the apiserver's dry
    // run refuses it before the token is written.
    let http = ctl
        .run(&[
            "peer",
            "out-of-band",
            "milan",
            "--auth-url",
            "http://127.0.0.2:31443",
            "--cluster-id",
            MILAN_ID,
            "--auth-token",
            milan_token.expose(),
        ])
        .await;
    assert_eq!(http.status.code(), Some(1));
    assert!(
        stderr(&http).contains("writing ForeignCluster milan")
            && stderr(&http).contains("foreignAuthUrl"),
        "{}",
        stderr(&http)
    );
    assert!(fc_names(&fcs).await.is_empty());
    let tokens = secrets
        .list(&ListParams::default().labels(labels::AUTH_TOKEN))
        .await
        .unwrap();
    assert!(tokens.items.is_empty(), "a remote token was written");

    // Another cluster, no controller: the FC and the token are written, then the wait times
    // out at the authentication stage.
    let milan_args = [
        "peer",
        "out-of-band",
        "milan",
        "--auth-url",
        "https://127.0.0.2:31443",
        "--cluster-id",
        MILAN_ID,
        "--auth-token",
        milan_token.expose(),
    ];
    let out = ctl
        .run(&[&milan_args[..], &["--timeout", "3s"]].concat())
        .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Timed out after 3s waiting for authentication"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("Peering enabled"), "{}", stdout(&out));
    let fc = fcs.get("milan").await.unwrap();
    assert_eq!(fc.spec.cluster_identity.cluster_id.as_str(), MILAN_ID);
    assert_eq!(fc.spec.cluster_identity.cluster_name.as_str(), "milan");
    assert_eq!(fc.spec.foreign_auth_url, "https://127.0.0.2:31443");
    assert_eq!(fc.spec.outgoing_peering_enabled, PeeringEnabled::Yes);
    assert_eq!(fc.spec.incoming_peering_enabled, PeeringEnabled::Auto);
    assert!(fc.spec.insecure_skip_tls_verify);
    assert_eq!(
        fc.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::CLUSTER_ID))
            .map(String::as_str),
        Some(MILAN_ID)
    );
    let managers: Vec<_> = fc
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(managers.contains(&"liqoctl".to_owned()), "{managers:?}");
    let secret = secrets
        .get(&format!("{}{MILAN_ID}", objects::REMOTE_TOKEN_PREFIX))
        .await
        .unwrap();
    let data: BTreeMap<_, _> = secret.data.unwrap_or_default();
    assert_eq!(data[keys::TOKEN].0, milan_token.expose().as_bytes());
    let secret_labels = secret.metadata.labels.unwrap_or_default();
    assert_eq!(
        secret_labels.get(labels::CLUSTER_ID).map(String::as_str),
        Some(MILAN_ID)
    );
    assert!(secret_labels.contains_key(labels::AUTH_TOKEN));

    // Authentication refused: the stage fails with its reason, exit 1, before the timeout.
    set_conditions(
        &fcs,
        "milan",
        &[Condition::Authentication(Authentication::Denied)],
    )
    .await;
    let out = ctl.run(&["peer", "milan", "--timeout", "30s"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Authentication to the remote cluster \"milan\" failed")
            && stderr(&out).contains("IdentityDenied"),
        "{}",
        stderr(&out)
    );

    // The success path: the controller's conditions arrive while liqoctl watches.
    set_conditions(
        &fcs,
        "milan",
        &[Condition::Authentication(Authentication::Pending)],
    )
    .await;
    let child = ctl
        .command(&[&milan_args[..], &["--timeout", "60s"]].concat())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    set_conditions(
        &fcs,
        "milan",
        &[Condition::Authentication(Authentication::Accepted)],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    set_conditions(
        &fcs,
        "milan",
        &[
            Condition::Authentication(Authentication::Accepted),
            Condition::Outgoing(Peering::KubeletPending),
        ],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    set_conditions(
        &fcs,
        "milan",
        &[
            Condition::Authentication(Authentication::Accepted),
            Condition::Outgoing(Peering::Accepted),
        ],
    )
    .await;
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("liqoctl peer out-of-band did not finish")
        .unwrap();
    eprintln!("success path:\n{}{}", stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    let expected = [
        "Peering enabled",
        "Authenticated to cluster \"milan\"",
        "Network to the remote cluster \"milan\" not managed yet",
        "Outgoing peering activated to the remote cluster \"milan\"",
        "Node for the remote cluster \"milan\" not created",
        "Peering with the remote cluster \"milan\" established",
    ];
    assert_eq!(lines.len(), expected.len(), "{lines:#?}");
    for (line, want) in lines.iter().zip(expected) {
        assert!(line.starts_with(want), "{line:?} is not {want:?}");
    }

    // As the kubectl plugin, the printed command says so; version reaches the apiserver.
    let out = ctl.run(&["version"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Kubernetes API server version: v1."),
        "{}",
        stdout(&out)
    );
    let dir = cluster.dir.join("liqoctl-plugin");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_liqoctl"), dir.join("kubectl-liqo")).unwrap();
    let plugin = tokio::process::Command::new(dir.join("kubectl-liqo"))
        .args(["--kubeconfig"])
        .arg(&set.kubeconfig)
        .args([
            "--context",
            &cluster.name,
            "generate",
            "peer-command",
            "--only-command",
        ])
        .output()
        .await
        .unwrap();
    assert!(plugin.status.success(), "{}", stderr(&plugin));
    assert!(
        stdout(&plugin).starts_with("kubectl liqo peer out-of-band rome --auth-url "),
        "{}",
        redact(&stdout(&plugin))
    );

    // status: identity, auth URL, the peer.
    let out = ctl.run(&["status"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for want in [
        format!("Cluster ID: {ROME_ID}"),
        "Cluster name: rome".into(),
        format!("Auth URL: {auth_url}"),
        "milan (cluster ID".into(),
        "outgoing Established".into(),
        "authentication Established".into(),
    ] {
        assert!(text.contains(&want), "{want:?} missing from:\n{text}");
    }

    // The same cluster ID under another name updates the existing ForeignCluster (already
    // established: every stage passes at once); another cluster ID under a taken name is
    // refused before anything is written.
    let out = ctl
        .run(&[
            "peer",
            "out-of-band",
            "milan2",
            "--auth-url",
            "https://127.0.0.2:31443",
            "--cluster-id",
            MILAN_ID,
            "--auth-token",
            milan_token.expose(),
            "--timeout",
            "10s",
        ])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("ForeignCluster \"milan\" exists for cluster ID")
            && stdout(&out).contains("Peering with the remote cluster \"milan\" established"),
        "{}",
        stdout(&out)
    );
    const NAPLES_ID: &str = "0c7a9e4b-59d4-4b8e-8f0c-2a1b3c4d5e6f";
    let out = ctl
        .run(&[
            "peer",
            "out-of-band",
            "milan",
            "--auth-url",
            "https://127.0.0.3:31443",
            "--cluster-id",
            NAPLES_ID,
            "--auth-token",
            milan_token.expose(),
            "--timeout",
            "3s",
        ])
        .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("exists for cluster ID"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fc_names(&fcs).await, ["milan"]);
    let naples_token = secrets
        .get_opt(&format!("{}{NAPLES_ID}", objects::REMOTE_TOKEN_PREFIX))
        .await
        .unwrap();
    assert!(
        naples_token.is_none(),
        "a token was written for a refused peering"
    );

    // unpeer: an unknown ForeignCluster is an error; milan goes to outgoing No and the wait
    // ends once the controller reports OutgoingPeering None.
    let out = ctl
        .run(&["unpeer", "out-of-band", "naples", "--timeout", "5s"])
        .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no ForeignCluster named \"naples\""),
        "{}",
        stderr(&out)
    );
    let child = ctl
        .command(&["unpeer", "out-of-band", "milan", "--timeout", "60s"])
        .spawn()
        .unwrap();
    let mut disabled = false;
    for _ in 0..100 {
        if fcs
            .get("milan")
            .await
            .unwrap()
            .spec
            .outgoing_peering_enabled
            == PeeringEnabled::No
        {
            disabled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(disabled, "outgoingPeeringEnabled never became No");
    tokio::time::sleep(Duration::from_millis(500)).await;
    set_conditions(
        &fcs,
        "milan",
        &[
            Condition::Authentication(Authentication::Accepted),
            Condition::Outgoing(Peering::None),
        ],
    )
    .await;
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("liqoctl unpeer did not finish")
        .unwrap();
    eprintln!("unpeer:\n{}{}", stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Outgoing peering to the remote cluster \"milan\" disabled"),
        "{}",
        stdout(&out)
    );
    // The ForeignCluster stays (its identity is reused on re-peering).
    assert_eq!(fc_names(&fcs).await, ["milan"]);
    drop(set);
}
