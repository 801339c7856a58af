//! An offloaded pod's ServiceAccount at work from where the pod runs: rome's API server
//! publishes its address as one of its nodes' (`default/kubernetes`; the node relays it), the
//! virtual kubelet gives the remote pod that address as milan reaches it (an external-CIDR
//! address of rome, which rome's gateway translates) with a token of its home ServiceAccount;
//! a pod of milan dials it with that token and the reflected root CA, checks the certificate as
//! `kubernetes.default.svc`, and lists the pods of the home namespace through the tunnel.

use std::{net::Ipv4Addr, time::Duration};

use control::shadowpod::token::{API_NAMES, HomeApi, PORT_ENV, TOKEN_KEY, api_env};
use dataplane::{NetnsName, netns::Netns};
use e2e::lab::k8s::{K8sLab, relay::api_node};
use k8s_openapi::api::{
    authentication::v1::SelfSubjectReview,
    core::v1::{ConfigMap, Container, Pod, Secret},
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use testkit::k8s::account;

use super::{NS, reach::CLIENT_POD, services::map_ip, until};

/// What the remote pod was given to reach the home API server (its Debug leaves the token
/// out).
#[derive(Clone)]
pub(crate) struct Given {
    /// The address its API names resolve to (hostAliases).
    pub(crate) host: Ipv4Addr,
    /// `KUBERNETES_SERVICE_PORT`.
    pub(crate) port: u16,
    /// The token (its Secret on milan).
    token: String,
    /// The root CA (its reflected ConfigMap on milan).
    ca: String,
}

impl std::fmt::Debug for Given {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Given")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// What the home API server says of the token, and the pods it lists with it.
struct Answer {
    /// The user the token authenticates as.
    user: String,
    /// The pod the token is bound to (the user's extra `authentication.kubernetes.io/pod-name`).
    bound_to: Vec<String>,
    /// Its UID (the extra `authentication.kubernetes.io/pod-uid`).
    bound_uid: Vec<String>,
    /// The pods of [`NS`] listed.
    pods: Vec<String>,
}

/// Reads what the remote pod `pod` of milan was given, once all of it is there.
async fn given(milan: &Client, pod: &str) -> Result<Given, String> {
    let p = Api::<Pod>::namespaced(milan.clone(), NS)
        .get(pod)
        .await
        .map_err(|e| e.to_string())?;
    let spec = p.spec.ok_or("no spec")?;
    let host = spec
        .host_aliases
        .unwrap_or_default()
        .into_iter()
        .find(|a| {
            a.hostnames
                .as_ref()
                .is_some_and(|h| h.iter().any(|n| n == API_NAMES[2]))
        })
        .ok_or("no hostAlias for the API names")?
        .ip
        .parse::<Ipv4Addr>()
        .map_err(|e| e.to_string())?;
    // Every container dials the certificate's name (`HOST_ENV`, the address being an IP) at the
    // port, and every variable locating the API server (the provider kubelet's service links
    // too) points there.
    let containers: Vec<_> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .collect();
    let var = |c: &Container, n: &str| {
        c.env
            .iter()
            .flatten()
            .find(|e| e.name == n)
            .and_then(|e| e.value.clone())
    };
    let port = containers
        .first()
        .and_then(|c| var(c, PORT_ENV))
        .ok_or(format!("no {PORT_ENV}"))?;
    let port = port
        .parse::<u16>()
        .map_err(|e| format!("{PORT_ENV} {port:?}: {e}"))?;
    let home = HomeApi {
        host: host.to_string(),
        port,
    };
    for c in &containers {
        for (name, value) in api_env(&home) {
            let got = var(c, &name);
            if got.as_deref() != Some(value.as_str()) {
                return Err(format!(
                    "container {}: {name} {got:?}, not {value:?}",
                    c.name
                ));
            }
        }
    }
    // The projection's sources: the token Secret and the root CA's copy.
    let sources: Vec<_> = spec
        .volumes
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.projected)
        .flat_map(|p| p.sources.unwrap_or_default())
        .collect();
    let secret = sources
        .iter()
        .find_map(|s| s.secret.as_ref().map(|s| s.name.clone()))
        .ok_or("no token Secret projected")?;
    let cm = sources
        .iter()
        .find_map(|s| s.config_map.as_ref().map(|c| c.name.clone()))
        .ok_or("no root CA projected")?;
    if !cm.starts_with("kube-root-ca.crt.") {
        return Err(format!("the root CA projected is {cm}, not its copy"));
    }
    let s = Api::<Secret>::namespaced(milan.clone(), NS)
        .get(&secret)
        .await
        .map_err(|e| format!("{secret}: {e}"))?;
    let token = s
        .data
        .and_then(|d| d.get(TOKEN_KEY).map(|t| t.0.clone()))
        .ok_or(format!("{secret} holds no token"))?;
    let ca = Api::<ConfigMap>::namespaced(milan.clone(), NS)
        .get(&cm)
        .await
        .map_err(|e| format!("{cm}: {e}"))?
        .data
        .and_then(|d| d.get("ca.crt").cloned())
        .ok_or(format!("{cm} holds no ca.crt"))?;
    Ok(Given {
        host,
        port,
        token: String::from_utf8(token).map_err(|e| e.to_string())?,
        ca,
    })
}

/// Asks the home API server who the token is and lists the pods of [`NS`] with it, as `g`
/// says, from the network namespace `netns` (milan's client pod's). Blocking: a thread of its
/// own in that namespace.
fn ask_from(netns: &NetnsName, g: &Given) -> Result<Answer, String> {
    let g = g.clone();
    let ns = Netns::open(netns).map_err(|e| e.to_string())?;
    ns.run(move || -> Result<Answer, String> {
        // A runtime of this thread: its sockets are made in the pod's namespace.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async move {
            // The address the pod's hostAliases give, checked as the name the certificate holds.
            let server = format!("https://{}:{}", g.host, g.port);
            let mut cfg = account::config(&server, g.ca.as_bytes(), &g.token)
                .await
                .map_err(|e| e.to_string())?;
            cfg.tls_server_name = Some(API_NAMES[2].to_owned());
            cfg.connect_timeout = Some(Duration::from_secs(5));
            cfg.read_timeout = Some(Duration::from_secs(10));
            let c = Client::try_from(cfg).map_err(|e| e.to_string())?;
            let review = Api::<SelfSubjectReview>::all(c.clone())
                .create(&PostParams::default(), &SelfSubjectReview::default())
                .await
                .map_err(|e| format!("SelfSubjectReview: {e}"))?;
            let info = review
                .status
                .and_then(|s| s.user_info)
                .ok_or("SelfSubjectReview: no user")?;
            let pods = Api::<Pod>::namespaced(c, NS)
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let mut extra = info.extra.unwrap_or_default();
            Ok(Answer {
                user: info.username.unwrap_or_default(),
                bound_to: extra
                    .remove("authentication.kubernetes.io/pod-name")
                    .unwrap_or_default(),
                bound_uid: extra
                    .remove("authentication.kubernetes.io/pod-uid")
                    .unwrap_or_default(),
                pods: pods
                    .items
                    .into_iter()
                    .filter_map(|p| p.metadata.name)
                    .collect(),
            })
        })
    })
    .map_err(|e| e.to_string())?
}

/// The check on home pod `pod` (offloaded to milan): the token is the pod's (its
/// ServiceAccount, bound to it) and lists the pods of its namespace; the Role it needs is
/// removed after. Returns the address and port the pod was given and how many pods it listed.
pub(crate) async fn token_lists_home_pods(
    k: &K8sLab,
    rome: &Client,
    milan: &Client,
    milan_id: &str,
    pod: &str,
) -> (Ipv4Addr, u16, usize) {
    // The home ServiceAccount may list pods in its namespace.
    account::grant_pod_list(rome, NS, "default")
        .await
        .expect("granting the pod list");
    let uid = Api::<Pod>::namespaced(rome.clone(), NS)
        .get(pod)
        .await
        .expect("the home pod")
        .metadata
        .uid;

    let g = until(
        60,
        "the remote pod's token, root CA and API address",
        || given(milan, pod),
    )
    .await;
    // The address is rome's IPAM's answer for the node rome's API server is published at.
    let rome_c = k.lab.topology.cluster("rome").unwrap();
    let published = api_node(rome_c).lan_addr.addr();
    assert_eq!(
        g.host.to_string(),
        map_ip(k, milan_id, &published.to_string()),
        "the remote pod's API address is milan's view of {published}"
    );
    let server = &k.set.get("rome").unwrap().server;
    assert!(
        server.ends_with(&format!(":{}", g.port)),
        "the remote pod's port is rome's API server's ({server})"
    );
    // rome's gateway runs the translation once its operator has read the IPAM again.
    let netns = k.lab.pod_netns("milan", CLIENT_POD);
    let answer = until(
        60,
        "rome's pods listed from milan with the pod's token",
        || {
            let (netns, g) = (netns.clone(), g.clone());
            async move {
                tokio::task::spawn_blocking(move || ask_from(&netns, &g))
                    .await
                    .map_err(|e| e.to_string())?
            }
        },
    )
    .await;
    // The pod's own token: its home ServiceAccount, bound to the home pod.
    assert_eq!(answer.user, format!("system:serviceaccount:{NS}:default"));
    assert_eq!(answer.bound_to, [pod], "the token is bound to the home pod");
    assert_eq!(
        answer.bound_uid,
        Vec::from_iter(uid),
        "the token is bound to this home pod (its UID)"
    );
    assert!(
        answer.pods.iter().any(|n| n == pod),
        "the token lists its own home pod {pod}: {:?}",
        answer.pods
    );
    account::revoke_pod_list(rome, NS)
        .await
        .expect("removing the pod list");
    (g.host, g.port, answer.pods.len())
}
