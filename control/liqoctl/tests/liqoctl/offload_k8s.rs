//! `offload namespace` and `unoffload namespace` against a real apiserver (the `testkit::k8s`
//! harness, one cluster, CRDs installed, see `common`). No controller-manager runs: the test
//! plays the NamespaceOffloading controller, writing the status (phases, conditions,
//! observedGeneration) and the finalizer itself while the built binary waits, so the waiting,
//! success, failure and timeout paths run on the real apiserver; the immutable mapping
//! strategy is refused by the CRD's own CEL rule. Exit codes are checked before output.

#[allow(dead_code, reason = "peer_k8s uses the rest")]
use crate::common;

use std::{process::Output, time::Duration};

use common::{Ctx, stderr, stdout};
use control::{
    api::offloading::{NAME, NamespaceOffloading},
    consts::offloading::NAMESPACE_OFFLOADING_FINALIZER,
    offloading::status::{
        CLUSTER_NOT_SELECTED, CLUSTER_SELECTED, CREATING, CREATION_LOOP_BACK_OFF,
        REMOTE_NAMESPACE_CREATED, Row,
    },
};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader, Lines},
    process::{Child, ChildStdout},
};

const NS: &str = "liqo-demo";
const SEED: [&str; 9] = [
    "offload",
    "namespace",
    NS,
    "--namespace-mapping-strategy",
    "EnforceSameName",
    "--pod-offloading-strategy",
    "LocalAndRemote",
    "--selector",
    "topology.liqo.io/region=south",
];
const FAILED_MESSAGE: &str =
    "namespace liqo-demo exists on the provider and is not managed by Liqo";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offload_and_unoffload_against_an_apiserver() {
    let x = Ctx::up().await;
    let client: Client = x.fcs.clone().into();
    let nsoffs: Api<NamespaceOffloading> = Api::namespaced(client.clone(), NS);
    missing_namespace(&x).await;
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
        )
        .await
        .unwrap();
    waits_for_the_current_generation_then_succeeds(&x, &nsoffs).await;
    an_unchanged_apply_is_done_at_once(&x, &nsoffs).await;
    failures_name_the_cluster(&x, &nsoffs).await;
    a_timeout_names_the_phase(&x, &nsoffs).await;
    the_mapping_strategy_is_immutable(&x, &nsoffs).await;
    unoffload(&x, &nsoffs).await;
}

/// A namespace that does not exist: both commands fail naming it, nothing written.
async fn missing_namespace(x: &Ctx) {
    for args in [
        &["offload", "namespace", "nowhere"][..],
        &["unoffload", "namespace", "nowhere"][..],
    ] {
        let o = x.ctl.run(args).await;
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&o).contains("namespace \"nowhere\" not found"),
            "{}",
            stderr(&o)
        );
    }
}

/// The binary running in the background, its stdout read line by line.
struct Running {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: String,
}

impl Running {
    fn start(x: &Ctx, args: &[&str]) -> Running {
        eprintln!("$ liqoctl {} &", args.join(" "));
        let mut child = x.ctl.command(args).spawn().unwrap();
        let out = child.stdout.take().unwrap();
        Running {
            child,
            lines: BufReader::new(out).lines(),
            seen: String::new(),
        }
    }

    /// Reads stdout until a line containing `wanted` (fails after 30 s or at the end).
    async fn line(&mut self, wanted: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no line with {wanted:?} in 30 s; saw:\n{}", self.seen))
                .unwrap()
                .unwrap_or_else(|| panic!("stdout ended before {wanted:?}; saw:\n{}", self.seen));
            self.seen.push_str(&line);
            self.seen.push('\n');
            if line.contains(wanted) {
                return line;
            }
        }
    }

    /// Waits for the exit (60 s at most); the output holds the rest of stdout.
    async fn finish(mut self) -> Output {
        let mut rest = self.seen;
        while let Some(l) = self.lines.next_line().await.unwrap() {
            rest.push_str(&l);
            rest.push('\n');
        }
        let mut o = tokio::time::timeout(Duration::from_secs(60), self.child.wait_with_output())
            .await
            .expect("liqoctl did not exit in 60 s")
            .unwrap();
        o.stdout = rest.into_bytes();
        eprintln!(
            "-> {:?}\nstdout:\n{}stderr:\n{}",
            o.status.code(),
            stdout(&o),
            stderr(&o)
        );
        o
    }
}

fn cond(row: Row, message: Option<&str>) -> Value {
    json!({
        "type": row.type_,
        "status": row.status,
        "lastTransitionTime": "2022-05-05T15:08:43Z",
        "reason": row.reason,
        "message": message.unwrap_or(row.message),
    })
}

/// Writes the status as the controller would; `observed` defaults to the current generation.
async fn set_status(
    nsoffs: &Api<NamespaceOffloading>,
    phase: &str,
    observed: Option<i64>,
    naples: Value,
) -> i64 {
    let generation = nsoffs.get(NAME).await.unwrap().metadata.generation.unwrap();
    let status = json!({"status": {
        "offloadingPhase": phase,
        "remoteNamespaceName": NS,
        "observedGeneration": observed.unwrap_or(generation),
        "remoteNamespacesConditions": {
            "florence-539f8b": [cond(CLUSTER_NOT_SELECTED, None)],
            "naples-7881be": naples,
        },
    }});
    nsoffs
        .patch_status(NAME, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    generation
}

/// The seed's command: the object is applied by `liqoctl`; a Ready of an older generation
/// is not taken, InProgress is printed, Ready names the selected cluster.
async fn waits_for_the_current_generation_then_succeeds(
    x: &Ctx,
    nsoffs: &Api<NamespaceOffloading>,
) {
    let mut run = Running::start(x, &[&SEED[..], &["--timeout", "60s"]].concat());
    run.line("NamespaceOffloading applied").await;
    let obj = nsoffs.get(NAME).await.unwrap();
    let spec = serde_json::to_value(&obj.spec).unwrap();
    assert_eq!(
        spec,
        json!({
            "namespaceMappingStrategy": "EnforceSameName",
            "podOffloadingStrategy": "LocalAndRemote",
            "clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.liqo.io/region", "operator": "In", "values": ["south"]},
            ]}]},
        })
    );
    let managers: Vec<_> = obj
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.as_deref())
        .collect();
    assert_eq!(managers, ["liqoctl"]);
    // A Ready of generation 0, then InProgress of the current one: still waiting.
    let selected = json!([cond(CLUSTER_SELECTED, None), cond(CREATING, None)]);
    set_status(nsoffs, "Ready", Some(0), selected.clone()).await;
    set_status(nsoffs, "InProgress", None, selected).await;
    run.line("Offloading phase: InProgress").await;
    let ready = json!([
        cond(CLUSTER_SELECTED, None),
        cond(REMOTE_NAMESPACE_CREATED, None)
    ]);
    set_status(nsoffs, "Ready", None, ready).await;
    let o = run.finish().await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).ends_with(
            "Namespace \"liqo-demo\" offloaded to naples-7881be (remote namespace \"liqo-demo\")\n"
        ),
        "{}",
        stdout(&o)
    );
}

/// The same flags again: the generation does not change, the status already says Ready.
async fn an_unchanged_apply_is_done_at_once(x: &Ctx, nsoffs: &Api<NamespaceOffloading>) {
    let before = nsoffs.get(NAME).await.unwrap().metadata.generation;
    let o = x
        .ctl
        .run(&[&SEED[..], &["--timeout", "10s"]].concat())
        .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("offloaded to naples-7881be"),
        "{}",
        stdout(&o)
    );
    assert_eq!(nsoffs.get(NAME).await.unwrap().metadata.generation, before);
}

/// A new pod strategy (a new generation), then AllFailed: the error names the cluster and
/// its condition's message.
async fn failures_name_the_cluster(x: &Ctx, nsoffs: &Api<NamespaceOffloading>) {
    let mut args = SEED.to_vec();
    args[6] = "Remote";
    args.extend(["--timeout", "60s"]);
    let mut run = Running::start(x, &args);
    run.line("NamespaceOffloading applied").await;
    let failed = json!([
        cond(CLUSTER_SELECTED, None),
        cond(CREATION_LOOP_BACK_OFF, Some(FAILED_MESSAGE))
    ]);
    let generation = set_status(nsoffs, "AllFailed", None, failed).await;
    assert_eq!(generation, 2);
    let o = run.finish().await;
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert_eq!(
        stderr(&o).trim_end(),
        format!(
            "Error: offloading namespace \"liqo-demo\" failed (phase AllFailed): naples-7881be: \
             CreationLoopBackOff: {FAILED_MESSAGE}"
        )
    );
}

/// No verdict within `--timeout`: the error names the phase and the cluster still creating.
async fn a_timeout_names_the_phase(x: &Ctx, nsoffs: &Api<NamespaceOffloading>) {
    let mut args = SEED.to_vec();
    args[6] = "Local";
    args.extend(["--timeout", "4s"]);
    let mut run = Running::start(x, &args);
    run.line("NamespaceOffloading applied").await;
    let creating = json!([cond(CLUSTER_SELECTED, None), cond(CREATING, None)]);
    set_status(nsoffs, "InProgress", None, creating).await;
    let o = run.finish().await;
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert_eq!(
        stderr(&o).trim_end(),
        "Error: timed out after 4s waiting for namespace \"liqo-demo\" to be offloaded: stuck \
         in phase InProgress; naples-7881be: Creating: The remote namespace is being created"
    );
}

/// DefaultName over EnforceSameName: the apiserver's CEL rule refuses it, field named.
async fn the_mapping_strategy_is_immutable(x: &Ctx, nsoffs: &Api<NamespaceOffloading>) {
    let before = nsoffs.get(NAME).await.unwrap();
    let o = x
        .ctl
        .run(&[
            "offload",
            "namespace",
            NS,
            "--namespace-mapping-strategy",
            "DefaultName",
        ])
        .await;
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let e = stderr(&o);
    assert!(
        e.contains("writing the NamespaceOffloading \"offloading\" in namespace \"liqo-demo\"")
            && e.contains("spec.namespaceMappingStrategy")
            && e.contains("namespaceMappingStrategy is immutable")
            && e.contains("HTTP 422"),
        "{e}"
    );
    let after = nsoffs.get(NAME).await.unwrap();
    assert_eq!(after.spec, before.spec);
}

/// `unoffload`: held by the controller's finalizer it waits (and times out naming the
/// phase); `offload` meanwhile is refused; once the finalizer goes it is done; again, it is a
/// no-op.
async fn unoffload(x: &Ctx, nsoffs: &Api<NamespaceOffloading>) {
    nsoffs
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [NAMESPACE_OFFLOADING_FINALIZER]}})),
        )
        .await
        .unwrap();
    let o = x
        .ctl
        .run(&["unoffload", "namespace", NS, "--timeout", "3s"])
        .await;
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("deleted: waiting"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("timed out after 3s")
            && stderr(&o).contains("stuck in phase InProgress")
            && stderr(&o).contains("clusters still reported: florence-539f8b, naples-7881be")
            && stderr(&o).contains(NAMESPACE_OFFLOADING_FINALIZER),
        "{}",
        stderr(&o)
    );
    let o = x.ctl.run(&SEED).await;
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("is being deleted"), "{}", stderr(&o));
    let mut run = Running::start(x, &["unoffload", "ns", NS]);
    run.line("deleted: waiting").await;
    let terminating = json!([cond(CLUSTER_SELECTED, None)]);
    set_status(nsoffs, "Terminating", None, terminating).await;
    run.line("Offloading phase: Terminating").await;
    nsoffs
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    let o = run.finish().await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).ends_with("Offloading of namespace \"liqo-demo\" removed\n"),
        "{}",
        stdout(&o)
    );
    assert!(nsoffs.get_opt(NAME).await.unwrap().is_none());
    let o = x.ctl.run(&["unoffload", "namespace", NS]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "Namespace \"liqo-demo\" is not offloaded: nothing to do\n"
    );
}
