//! liqoctl against a real apiserver (the `testkit::k8s` harness, one cluster, see `common`): the
//! built binary is run with `--kubeconfig`/`--context`. No controller runs: the test writes the
//! ForeignCluster's conditions itself, as the controller-manager would, to drive the success
//! and failure paths. Exit codes are checked before output.

use crate::common;

use std::{collections::BTreeMap, time::Duration};

use clap::Parser;
use common::{Ctx, MILAN_ID, ROME_ID, fc_names, redact, set_conditions, stderr, stdout};
use control::{
    api::discovery::PeeringEnabled,
    conditions::{Authentication, Condition, Peering},
    consts::{keys, labels, objects},
};
use kube::api::ListParams;
use liqoctl::cli::{Cli, Command, PeerArgs, PeerMode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_peer_and_unpeer_against_an_apiserver() {
    let x = Ctx::up().await;
    generate_peer_command(&x).await;
    refusals_write_nothing(&x).await;
    no_controller_times_out_at_authentication(&x).await;
    stages_fail_and_succeed(&x).await;
    plugin_version_and_status(&x).await;
    existing_cluster_id_and_taken_name(&x).await;
    unpeer(&x).await;
    unpeer_removes_what_never_authenticated(&x).await;
}

/// `generate peer-command`: the command parses back to this cluster's values.
async fn generate_peer_command(x: &Ctx) {
    let Ctx {
        ctl,
        auth_url,
        rome_token,
        ..
    } = x;
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
    assert_eq!(o.auth_token, *rome_token);
    let out = ctl.run(&["generate", "peer-command"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("on a *different* cluster"));
    assert!(stdout(&out).trim_end().ends_with(line.trim()));
}

/// Our own ID, a bad flag, a URL the schema refuses: nothing written.
async fn refusals_write_nothing(x: &Ctx) {
    let Ctx {
        ctl,
        fcs,
        secrets,
        milan_token,
        ..
    } = x;
    // Our own cluster ID: refused, nothing written.
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
    // The auth service answers for another cluster than --cluster-id (milan's URL pasted
    // with naples' ID): refused naming both, before anything is written.
    const NAPLES_ID: &str = "0c7a9e4b-59d4-4b8e-8f0c-2a1b3c4d5e6f";
    let wrong = ctl
        .run(&[
            "peer",
            "out-of-band",
            "naples",
            "--auth-url",
            &x.milan_url,
            "--cluster-id",
            NAPLES_ID,
            "--auth-token",
            milan_token.expose(),
        ])
        .await;
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    let e = stderr(&wrong);
    assert!(
        e.contains(&format!(
            "answers for cluster {MILAN_ID} (milan), not {NAPLES_ID}"
        )) && e.contains("nothing was written and no token was sent"),
        "{e}"
    );
    assert!(fc_names(fcs).await.is_empty());
    // Nobody answers at --auth-url (a URL only the cluster may resolve): a warning, the
    // ForeignCluster is written (the controller-manager checks before any token is sent).
    let dead = ctl
        .run(&[
            "peer",
            "out-of-band",
            "naples",
            "--auth-url",
            "https://127.0.0.9:1",
            "--cluster-id",
            NAPLES_ID,
            "--auth-token",
            milan_token.expose(),
            "--timeout",
            "1s",
        ])
        .await;
    assert_eq!(dead.status.code(), Some(1), "no controller: timed out");
    assert!(
        stderr(&dead).contains("Warning: cannot ask the auth service at https://127.0.0.9:1")
            && stderr(&dead).contains("Timed out"),
        "{}",
        stderr(&dead)
    );
    assert_eq!(fc_names(fcs).await, ["naples"]);
    // Cleaned up for the phases below.
    fcs.delete("naples", &Default::default()).await.unwrap();
    secrets
        .delete(
            &format!("{}{NAPLES_ID}", objects::REMOTE_TOKEN_PREFIX),
            &Default::default(),
        )
        .await
        .unwrap();
    for _ in 0..50 {
        if fc_names(fcs).await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(fc_names(fcs).await.is_empty());
    let tokens = secrets
        .list(&ListParams::default().labels(labels::AUTH_TOKEN))
        .await
        .unwrap();
    assert!(tokens.items.is_empty(), "a remote token was written");
}

/// No controller: the ForeignCluster and the token are written, the wait times out.
async fn no_controller_times_out_at_authentication(x: &Ctx) {
    let Ctx {
        ctl,
        fcs,
        secrets,
        milan_token,
        ..
    } = x;
    let milan_args = x.milan_args();
    // Another cluster, no controller: the FC and the token are written, then the wait times
    // out at the authentication stage.
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
    assert_eq!(fc.spec.foreign_auth_url, x.milan_url);
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
}

/// A failed stage, then the success path.
async fn stages_fail_and_succeed(x: &Ctx) {
    let Ctx { ctl, fcs, .. } = x;
    let milan_args = x.milan_args();
    // A refusal from before the command answered an earlier attempt: liqoctl waits past it.
    // The controller's retry (Pending, then refused again) fails the stage with its reason,
    // exit 1, well before the timeout.
    set_conditions(
        fcs,
        "milan",
        &[Condition::Authentication(Authentication::Denied)],
    )
    .await;
    let started = std::time::Instant::now();
    let child = ctl
        .command(&["peer", "milan", "--timeout", "30s"])
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for a in [Authentication::Pending, Authentication::Denied] {
        set_conditions(fcs, "milan", &[Condition::Authentication(a)]).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("liqoctl peer did not finish")
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Authentication to the remote cluster \"milan\" failed")
            && stderr(&out).contains("IdentityDenied"),
        "{}",
        stderr(&out)
    );
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "failed at the retry's refusal, not at the timeout: {:?}",
        started.elapsed()
    );

    // The success path: the controller's conditions arrive while liqoctl watches.
    set_conditions(
        fcs,
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
        fcs,
        "milan",
        &[Condition::Authentication(Authentication::Accepted)],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    set_conditions(
        fcs,
        "milan",
        &[
            Condition::Authentication(Authentication::Accepted),
            Condition::Outgoing(Peering::KubeletPending),
        ],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    set_conditions(
        fcs,
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
        "The auth service at https://127.0.0.2:",
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
}

/// The kubectl plugin, `version`, `status`.
async fn plugin_version_and_status(x: &Ctx) {
    let Ctx {
        ctl, auth_url, dir, ..
    } = x;
    // As the kubectl plugin, the printed command says so; version reaches the apiserver.
    let out = ctl.run(&["version"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Kubernetes API server version: v1."),
        "{}",
        stdout(&out)
    );
    let dir = dir.join("liqoctl-plugin");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_liqoctl"), dir.join("kubectl-liqo")).unwrap();
    let plugin = tokio::process::Command::new(dir.join("kubectl-liqo"))
        .args(["--kubeconfig"])
        .arg(&ctl.kubeconfig)
        .args([
            "--context",
            &ctl.context,
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
        "API server: https://127.0.0.1:".into(),
        format!("Cluster ID: {ROME_ID}"),
        "Cluster name: rome".into(),
        format!("Auth URL: {auth_url}"),
        "milan (cluster ID".into(),
        "outgoing Established".into(),
        "authentication Established".into(),
    ] {
        assert!(text.contains(&want), "{want:?} missing from:\n{text}");
    }
}

/// An existing cluster ID under another name; a taken name.
async fn existing_cluster_id_and_taken_name(x: &Ctx) {
    let Ctx {
        ctl,
        fcs,
        secrets,
        milan_token,
        ..
    } = x;
    // The same cluster ID under another name updates the existing ForeignCluster (already
    // established: every stage passes at once); another cluster ID under a taken name is
    // refused before anything is written.
    let out = ctl
        .run(&[
            "peer",
            "out-of-band",
            "milan2",
            "--auth-url",
            &x.milan_url,
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
    assert_eq!(fc_names(fcs).await, ["milan"]);
    let naples_token = secrets
        .get_opt(&format!("{}{NAPLES_ID}", objects::REMOTE_TOKEN_PREFIX))
        .await
        .unwrap();
    assert!(
        naples_token.is_none(),
        "a token was written for a refused peering"
    );
}

/// `unpeer`.
async fn unpeer(x: &Ctx) {
    let Ctx { ctl, fcs, .. } = x;
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
        fcs,
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
    assert_eq!(fc_names(fcs).await, ["milan"]);
}

/// A ForeignCluster that never authenticated, with what its controller made (tenant
/// namespace, an unsigned identity Secret): `unpeer` removes all of it and names each; a
/// tenant namespace holding an identity this cluster issued to the peer is kept.
async fn unpeer_removes_what_never_authenticated(x: &Ctx) {
    use control::{api::discovery::ClusterIdentity, names};
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    use kube::Api;
    let Ctx {
        ctl, fcs, secrets, ..
    } = x;
    let client = fcs.clone().into_client();
    for (name, id, issued) in [
        ("naples", "0c7a9e4b-59d4-4b8e-8f0c-2a1b3c4d5e6f", false),
        ("florence", "5d2e8a1c-3b4f-4c6d-9e7f-8a9b0c1d2e3f", true),
    ] {
        let url = common::fake_auth("127.0.0.3", id, name).await;
        let token = control::identity::AuthToken::from_bytes(&[0x33; 64]);
        let out = ctl
            .run(&[
                "peer",
                "out-of-band",
                name,
                "--auth-url",
                &url,
                "--cluster-id",
                id,
                "--auth-token",
                token.expose(),
                "--timeout",
                "2s",
            ])
            .await;
        assert_eq!(out.status.code(), Some(1), "no controller: timed out");
        // What the controller makes before it is refused.
        let tenant = names::tenant_namespace(&ClusterIdentity {
            cluster_id: id.parse().unwrap(),
            cluster_name: name.parse().unwrap(),
        })
        .to_string();
        let nss: Api<Namespace> = Api::all(client.clone());
        nss.create(
            &Default::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": tenant, "labels": {
                labels::CLUSTER_ID: id, labels::TENANT_NAMESPACE: "true"}}}))
            .unwrap(),
        )
        .await
        .unwrap();
        let in_tenant: Api<Secret> = Api::namespaced(client.clone(), &tenant);
        in_tenant
            .create(
                &Default::default(),
                &serde_json::from_value(serde_json::json!({"metadata": {
                    "name": "liqo-identity-abcde",
                    "labels": {labels::LOCAL_IDENTITY: "true", labels::CLUSTER_ID: id}},
                    "stringData": {keys::PRIVATE_KEY: "k", keys::CSR: "c"}}))
                .unwrap(),
            )
            .await
            .unwrap();
        if issued {
            in_tenant
                .create(
                    &Default::default(),
                    &serde_json::from_value(serde_json::json!({"metadata": {
                        "name": objects::REMOTE_CERTIFICATE_SECRET}}))
                    .unwrap(),
                )
                .await
                .unwrap();
        }
        set_conditions(
            fcs,
            name,
            &[Condition::Authentication(Authentication::Denied)],
        )
        .await;

        let out = ctl
            .run(&["unpeer", "out-of-band", name, "--timeout", "60s"])
            .await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        let token_secret = format!("{}{id}", objects::REMOTE_TOKEN_PREFIX);
        for want in [
            format!(
                "ForeignCluster {name:?} never authenticated (AuthenticationStatus Denied (IdentityDenied)"
            ),
            format!("Removed ForeignCluster {name:?}"),
            format!("Peering with the remote cluster {name:?} removed"),
        ] {
            assert!(text.contains(&want), "{want:?} missing from:\n{text}");
        }
        assert!(
            fcs.get_opt(name).await.unwrap().is_none(),
            "{name} still there"
        );
        let token_left = secrets.get_opt(&token_secret).await.unwrap();
        let ns_left = nss.get_opt(&tenant).await.unwrap();
        if issued {
            // The peer authenticates to us with its token: kept with the namespace.
            assert!(token_left.is_some());
            assert!(
                text.contains(&format!("Kept Secret liqo/{token_secret}")),
                "{text}"
            );
            assert!(text.contains(&format!("Kept namespace {tenant}")), "{text}");
            assert!(
                text.contains(&format!("Removed Secret {tenant}/liqo-identity-abcde")),
                "{text}"
            );
            assert!(ns_left.is_some());
            assert!(
                in_tenant
                    .get_opt("liqo-identity-abcde")
                    .await
                    .unwrap()
                    .is_none()
            );
            assert!(
                in_tenant
                    .get_opt(objects::REMOTE_CERTIFICATE_SECRET)
                    .await
                    .unwrap()
                    .is_some(),
                "the identity this cluster issued is kept"
            );
        } else {
            assert!(token_left.is_none());
            assert!(
                text.contains(&format!("Removed Secret liqo/{token_secret}")),
                "{text}"
            );
            assert!(
                text.contains(&format!("Removed namespace {tenant}, with our key and CSR")),
                "{text}"
            );
            assert!(ns_left.is_none(), "{tenant} still there");
        }
    }
}
