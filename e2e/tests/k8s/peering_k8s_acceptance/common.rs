//! What the acceptance tests (and [`super::trust`]) share: the lab of clusters from the pool
//! with Liqo installed ([`Lab`]), `liqoctl` and its output, and the polls of what the peerings
//! made.

use std::{
    io::Write as _,
    process::{Output, Stdio},
    time::{Duration, Instant},
};

use control::{
    api::discovery::{
        ClusterIdentity, ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T,
    },
    consts::labels,
    names,
    phase::RoleSet,
};
use e2e::{
    k8s::{self, Lease, Pool, Shape},
    liqo::{self, Liqo},
};
use k8s_openapi::api::{
    certificates::v1::CertificateSigningRequest,
    core::v1::Secret,
    rbac::v1::{ClusterRole, RoleBinding},
};
use kube::{Api, Client, Resource, api::ListParams};

/// How long a wait may take (the product's target is 20 s; the machine is shared).
pub(super) const WAIT: u64 = 60;

/// The clusters these tests share (`testkit::k8s::Pool`): a test gives its set back with
/// [`Lab::done`]; the pool removes the Liqo it installed and whatever the peerings made.
static POOL: Pool = Pool::new("eas");

/// A lab of `n` clusters with Liqo installed, on a set of the pool.
pub(super) struct Lab {
    pub(super) set: Lease,
    pub(super) liqo: Liqo,
}

impl Lab {
    pub(super) async fn up(n: usize) -> Lab {
        let bins = k8s::binaries().unwrap();
        let shape = Shape {
            clusters: n,
            nodes: 1,
            overlapping: true,
        };
        let set = POOL.lease(&bins, shape).await.unwrap();
        let liqo = liqo::install(&set, &bins, &liqo::Options::default())
            .await
            .unwrap();
        Lab { set, liqo }
    }

    /// Gives the clusters back (the test passed: nothing of it runs any more).
    pub(super) async fn done(self) {
        self.set.release().await.unwrap();
    }

    pub(super) async fn client(&self, name: &str) -> Client {
        self.set.get(name).unwrap().client().await.unwrap()
    }

    pub(super) fn id(&self, name: &str) -> String {
        self.liqo.get(name).unwrap().cluster_id.clone()
    }

    pub(super) fn identity(&self, name: &str) -> ClusterIdentity {
        ClusterIdentity {
            cluster_id: self.id(name).parse().unwrap(),
            cluster_name: name.parse().unwrap(),
        }
    }

    /// The tenant namespace on any cluster for the remote cluster `name`.
    pub(super) fn tenant(&self, name: &str) -> String {
        names::tenant_namespace(&self.identity(name)).to_string()
    }

    pub(super) fn path(&self) -> String {
        format!(
            "{}:{}",
            self.liqo.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// `liqoctl --context <context> <args>` with the merged kubeconfig.
    pub(super) fn liqoctl(&self, context: &str, args: &[&str]) -> Output {
        std::process::Command::new(self.liqo.bin.join("liqoctl"))
            .arg("--context")
            .arg(context)
            .args(args)
            .env("KUBECONFIG", &self.set.kubeconfig)
            .env("PATH", self.path())
            .output()
            .unwrap()
    }

    /// What `liqoctl --context <provider> generate peer-command --only-command` prints.
    pub(super) fn peer_command(&self, provider: &str) -> String {
        let out = self.liqoctl(provider, &["generate", "peer-command", "--only-command"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{}{}",
            redact(&text),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.trim()
                .starts_with(&format!("liqoctl peer out-of-band {provider} ")),
            "{}",
            redact(&text)
        );
        text
    }

    /// Pipes `command` into bash with `consumer`'s own kubeconfig (as the seeds do); the
    /// exit status is checked by the caller.
    pub(super) fn bash(&self, consumer: &str, command: &str) -> Output {
        let mut bash = std::process::Command::new("bash")
            .env("KUBECONFIG", &self.set.get(consumer).unwrap().kubeconfig)
            .env("PATH", self.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        bash.stdin
            .take()
            .unwrap()
            .write_all(command.as_bytes())
            .unwrap();
        bash.wait_with_output().unwrap()
    }

    /// `consumer` peers with `provider` by the generated command; returns it.
    pub(super) fn peer(&self, consumer: &str, provider: &str) -> String {
        let command = self.peer_command(provider);
        let started = Instant::now();
        let out = self.bash(consumer, &command);
        assert!(
            out.status.success(),
            "{consumer} -> {provider}: {}",
            text(&out)
        );
        eprintln!(
            "{consumer} -> {provider}: liqoctl peer returned in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        command
    }
}

pub(super) fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        redact(&String::from_utf8_lossy(&out.stdout)),
        redact(&String::from_utf8_lossy(&out.stderr))
    )
}

/// `text` with the value of `--auth-token` hidden.
fn redact(text: &str) -> String {
    let mut hide = false;
    text.split(' ')
        .map(|w| {
            let out = if hide { "<token>" } else { w };
            hide = w == "--auth-token";
            out
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The value of `--<flag>` in a peer command.
pub(super) fn flag(command: &str, name: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().collect();
    let k = words
        .iter()
        .position(|w| *w == format!("--{name}"))
        .unwrap_or_else(|| panic!("no --{name}: {}", redact(command)));
    words[k + 1].to_owned()
}

/// Polls `f` every 200 ms until it is `Ok` or `secs` pass (then panics with its last error).
pub(super) async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    loop {
        match f().await {
            Ok(v) => {
                eprintln!("{what}: {:.1} s", started.elapsed().as_secs_f64());
                return v;
            }
            Err(e) if Instant::now() > deadline => panic!("{what} after {secs} s: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

fn es<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The ForeignCluster for the cluster `id`, if any (by its spec, whatever its name).
pub(super) async fn fc_of(client: &Client, id: &str) -> Result<Option<ForeignCluster>, String> {
    let l = Api::<ForeignCluster>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(es)?;
    let mut found: Vec<ForeignCluster> = l
        .items
        .into_iter()
        .filter(|f| f.spec.cluster_identity.cluster_id.as_str() == id)
        .collect();
    if found.len() > 1 {
        return Err(format!("{} ForeignClusters for {id}", found.len()));
    }
    Ok(found.pop())
}

/// Checks the conditions of the ForeignCluster for `id`.
pub(super) async fn fc_is(
    client: &Client,
    id: &str,
    want: &[(T, S)],
) -> Result<ForeignCluster, String> {
    let fc = fc_of(client, id)
        .await?
        .ok_or_else(|| format!("no ForeignCluster for {id}"))?;
    let st = fc.status.clone().unwrap_or_default();
    for (t, s) in want {
        let got = st.condition(*t);
        if got != *s {
            return Err(format!(
                "{}: {t:?} {got:?}, want {s:?}",
                fc.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
    Ok(fc)
}

pub(super) async fn names_of<K>(api: Api<K>, lp: &ListParams) -> Result<Vec<String>, String>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .list(lp)
        .await
        .map_err(es)?
        .items
        .into_iter()
        .filter_map(|o| o.meta().name.clone())
        .collect())
}

/// The names of the RoleBindings of the peering ClusterRoles of `set` in `ns`.
pub(super) async fn peering_bindings(
    client: &Client,
    ns: &str,
    set: RoleSet,
) -> Result<Vec<String>, String> {
    let roles = names_of(
        Api::<ClusterRole>::all(client.clone()),
        &ListParams::default().labels(&format!(
            "{}={}",
            labels::REMOTE_PEERING_PERMISSIONS,
            set.label_value()
        )),
    )
    .await?;
    if roles.is_empty() {
        return Err(format!("no ClusterRole for {set:?}"));
    }
    let bindings = names_of(
        Api::<RoleBinding>::namespaced(client.clone(), ns),
        &ListParams::default(),
    )
    .await?;
    Ok(roles
        .iter()
        .map(|r| names::role_binding(r).unwrap().to_string())
        .filter(|b| bindings.contains(b))
        .collect())
}

/// Identity Secrets (ours, for the peer `peer_id`) in `ns`: (name, uid).
pub(super) async fn identities(
    client: &Client,
    ns: &str,
    peer_id: &str,
) -> Result<Vec<(String, String)>, String> {
    let l = Api::<Secret>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!(
            "{}=true,{}={peer_id}",
            labels::LOCAL_IDENTITY,
            labels::CLUSTER_ID
        )))
        .await
        .map_err(es)?;
    Ok(l.items
        .into_iter()
        .map(|s| {
            (
                s.metadata.name.unwrap_or_default(),
                s.metadata.uid.unwrap_or_default(),
            )
        })
        .collect())
}

pub(super) async fn csr_count(client: &Client) -> usize {
    Api::<CertificateSigningRequest>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
}
