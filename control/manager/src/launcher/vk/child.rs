//! A virtual kubelet as a child process: the provider kubeconfig written privately, the
//! command line, the spawn (dying with us) and the wait.

use std::path::Path;

use liqo_types::chain;

use super::job::{Job, Settings};
use crate::identity;
use crate::launcher::Peer;
use control::api::discovery::ClusterIdentity;

pub(super) async fn run_child(
    job: &Job,
    binary: &Path,
    kubeconfig: Option<&Path>,
    state_dir: &Path,
) -> String {
    let secret = match identity::find(&job.client, &job.peer.namespace, &job.peer.cluster_id).await
    {
        Ok(Some(s)) => s,
        Ok(None) => return "no identity Secret for the peer".into(),
        Err(e) => return format!("the identity Secret: {}", chain(&e)),
    };
    let foreign_kubeconfig = match identity::kubeconfig(&secret) {
        Ok(k) => k,
        Err(e) => return format!("the identity Secret: {}", chain(&e)),
    };
    let dir = state_dir.join(job.peer.cluster_id.as_str());
    let file = dir.join("foreign.kubeconfig");
    if let Err(e) = write_private(&dir, &file, &foreign_kubeconfig) {
        return chain(&e);
    }
    let port = match job.port().await {
        Ok(p) => p,
        Err(e) => return chain(&e),
    };
    let args = child_args(
        &job.home,
        &job.foreign,
        &job.peer,
        &job.settings,
        &file,
        port,
    );
    let mut cmd = tokio::process::Command::new(binary);
    // The child dies with us (it reads our pid and asks the kernel), and when dropped.
    cmd.args(&args)
        .env("LIQO_VK_PARENT_PID", std::process::id().to_string())
        .kill_on_drop(true);
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return format!("spawning {}: {e}", binary.display()),
    };
    tracing::info!(peer = %job.peer.cluster_id, pid = ?child.id(), port, "virtual kubelet started");
    *job.child.lock().unwrap_or_else(|p| p.into_inner()) = child.id();
    let out = match child.wait().await {
        Ok(status) => format!("it exited ({status})"),
        Err(e) => format!("waiting for it: {e}"),
    };
    *job.child.lock().unwrap_or_else(|p| p.into_inner()) = None;
    out
}

/// The child's command line.
pub fn child_args(
    home: &ClusterIdentity,
    foreign: &ClusterIdentity,
    peer: &Peer,
    s: &Settings,
    foreign_kubeconfig: &std::path::Path,
    port: u16,
) -> Vec<String> {
    let mut a: Vec<String> = [
        ("--foreign-cluster-id", foreign.cluster_id.to_string()),
        ("--foreign-cluster-name", foreign.cluster_name.to_string()),
        ("--home-cluster-id", home.cluster_id.to_string()),
        ("--home-cluster-name", home.cluster_name.to_string()),
        ("--tenant-namespace", peer.namespace.clone()),
        ("--resource-offer", peer.offer.clone()),
        (
            "--foreign-kubeconfig",
            foreign_kubeconfig.display().to_string(),
        ),
        ("--node-ip", s.node_ip.to_string()),
        ("--listen-port", port.to_string()),
        ("--pod-reflection-workers", s.pod_workers.to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_owned(), v])
    .collect();
    a.extend(s.reflection.args());
    if let Some(n) = s.worker_threads {
        a.extend(["--worker-threads".into(), n.to_string()]);
    }
    if s.apiserver_support {
        a.push("--enable-apiserver-support".into());
    }
    if let Some(api) = &s.home_api {
        a.extend(["--home-api-server".into(), api.to_string()]);
    }
    if let Some(ca) = &s.client_ca {
        a.extend(["--client-ca-file".into(), ca.display().to_string()]);
    }
    if let Some(ipam) = &s.ipam {
        // Its default: the network is Liqo's when an IPAM is given.
        if !s.liqo_network {
            a.extend(["--liqo-network".into(), "false".into()]);
        }
        a.extend(["--ipam-server".into(), ipam.server.clone()]);
        if let Some(f) = &ipam.ca_file {
            a.extend(["--ipam-ca-file".into(), f.display().to_string()]);
        }
        if let Some(f) = &ipam.token_file {
            a.extend(["--ipam-token-file".into(), f.display().to_string()]);
        }
    }
    a
}

/// Why a provider kubeconfig could not be written.
#[derive(Debug, thiserror::Error)]
pub(super) enum PrivateFileError {
    /// A file system call failed.
    #[error("{what} {}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The directory is not private to us.
    #[error("{} must be a directory of uid {uid} with mode 0700 (it holds private keys)", dir.display())]
    NotPrivate {
        /// The directory.
        dir: std::path::PathBuf,
        /// Our uid.
        uid: u32,
    },
    /// The kubeconfig does not encode.
    #[error("the kubeconfig")]
    Encode(#[source] serde_json::Error),
}

/// Writes `value` as JSON (which every kubeconfig reader takes) to `file` in `dir`: the
/// directory made 0700 and required to be ours, the file 0600, written to a fresh temporary
/// (never through a link someone left there) and renamed.
pub(super) fn write_private(
    dir: &std::path::Path,
    file: &std::path::Path,
    value: &impl serde::Serialize,
) -> Result<(), PrivateFileError> {
    use std::{
        io::Write,
        os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt},
    };
    let io = |what: &'static str, path: &std::path::Path| {
        let path = path.to_owned();
        move |source| PrivateFileError::Io { what, path, source }
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io("creating", dir))?;
    let meta = std::fs::symlink_metadata(dir).map_err(io("reading", dir))?;
    let me = std::fs::metadata("/proc/self")
        .map_err(io("reading", std::path::Path::new("/proc/self")))?
        .uid();
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(PrivateFileError::NotPrivate {
            dir: dir.to_owned(),
            uid: me,
        });
    }
    let text = serde_json::to_vec(value).map_err(PrivateFileError::Encode)?;
    let tmp = file.with_extension("tmp");
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("removing", &tmp)(e)),
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("writing", &tmp))?;
    f.write_all(&text).map_err(io("writing", &tmp))?;
    std::fs::rename(&tmp, file).map_err(io("writing", file))
}
