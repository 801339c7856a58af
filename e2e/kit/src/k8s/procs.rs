//! The processes of a cluster, through [`dataplane::supervisor`]: started detached (own process
//! group, output to a log file), recorded by pid, stopped with SIGTERM in order and SIGKILL
//! after a grace period; and finding them again without a state file.

use std::{
    ffi::{OsStr, OsString},
    fs,
    net::TcpListener,
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

pub use dataplane::supervisor::Proc;
use dataplane::supervisor::{self, Spec, Stopped};

use super::error::K8sError;
use crate::programs;

/// A free TCP port on 127.0.0.1, released before use, for a process started next to listen on.
///
/// Picked at random below the kernel's ephemeral range (`ip_local_port_range`): a port the
/// kernel hands out (what `bind(0)` gives) is also what every outgoing connection takes, so on a
/// busy machine (clusters' clients connecting all the time) another socket could take it
/// between our release and the process's bind. Ports below that range are only ever taken on
/// purpose. Falls back to the kernel's pick when no such port is free. A port is handed out
/// once per process: the tests of a binary start clusters at the same time, and two of them
/// picking the same port before either binds it would collide.
pub fn free_port() -> Result<u16, K8sError> {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    for _ in 0..16 {
        let port = pick_port()?;
        if GIVEN.lock().unwrap_or_else(|p| p.into_inner()).insert(port) {
            return Ok(port);
        }
    }
    Err(K8sError::Spawn {
        what: "finding a free port".into(),
        source: std::io::Error::other("16 picks in a row were ports handed out already"),
    })
}

/// One free port (see [`free_port`]).
fn pick_port() -> Result<u16, K8sError> {
    let low = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const FLOOR: u16 = 10_000;
    if low > FLOOR + 1_000 {
        let span = u32::from(low - FLOOR);
        for _ in 0..64 {
            let mut b = [0u8; 4];
            if getrandom::fill(&mut b).is_err() {
                break;
            }
            let offset = u16::try_from(u32::from_le_bytes(b) % span).unwrap_or(0);
            let port = FLOOR + offset;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| K8sError::Spawn {
        what: "finding a free port".into(),
        source: e,
    })?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| K8sError::Spawn {
            what: "finding a free port".into(),
            source: e,
        })
}

/// The Go runtime settings of a cluster's programs (all written in Go), each applied unless the
/// caller's environment sets it. One processor each (`GOMAXPROCS=1`): a machine of 2 cores runs
/// dozens of them, and with two each, every one's scheduler spun looking for work on the other
/// core. A collection when the heap has grown fivefold (`GOGC=400`, 2 by default): memory is
/// plentiful, CPU is not. Measured on the end-to-end `k8s` binary alone (2 cores): 555 CPU-s and
/// 366 s without them, 415 CPU-s and 296 s with them; an idle cluster 3.1 -> 2.5 CPU-s a minute.
pub(crate) const GO_RUNTIME: [(&str, &str); 2] = [("GOMAXPROCS", "1"), ("GOGC", "400")];

/// Starts `program args`, detached, with stdout and stderr appended to `log`, with the Go
/// runtime settings of [`GO_RUNTIME`].
pub(crate) fn spawn(
    name: &str,
    program: &Path,
    args: &[String],
    log: &Path,
) -> Result<Proc, K8sError> {
    let mut spec = Spec::new(name, program, log).args(args);
    for (key, value) in GO_RUNTIME {
        if std::env::var_os(key).is_none() {
            spec = spec.env(key, value);
        }
    }
    Ok(spec.detached()?)
}

/// The last `n` lines of a log.
pub(crate) fn tail(log: &str, n: usize) -> String {
    supervisor::tail(Path::new(log), n)
}

/// Whether `pid` is still running (reaping it if it is our child).
pub(crate) fn alive(pid: u32) -> bool {
    supervisor::alive(pid)
}

/// Stops `procs` one after the other (SIGTERM, then SIGKILL after `grace`); returns how many
/// needed SIGKILL.
pub fn stop(procs: &[Proc], grace: Duration) -> usize {
    procs
        .iter()
        .filter(|p| matches!(supervisor::stop(p, grace), Stopped::Killed | Stopped::Stuck))
        .count()
}

/// How a running process was started: its program, arguments and environment (from
/// `/proc/<pid>/`), to start it again the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// The program, as it was given (the harness gives absolute paths).
    pub program: PathBuf,
    /// Its arguments (without the program).
    pub args: Vec<OsString>,
    /// Its whole environment.
    pub env: Vec<(OsString, OsString)>,
}

/// The command line of `pid` (`None` once it is gone or its environment cannot be read),
/// from [`dataplane::procs`]. Empty arguments are kept (`--flag ""` stays a pair).
pub fn command_line(pid: u32) -> Option<CommandLine> {
    let (args, environ) = dataplane::procs::Process::read(pid)?.read_exact().ok()?;
    let env = environ
        .into_iter()
        .filter_map(|kv| {
            let bytes = kv.as_bytes();
            let eq = bytes.iter().position(|b| *b == b'=')?;
            Some((
                OsStr::from_bytes(&bytes[..eq]).to_os_string(),
                OsStr::from_bytes(&bytes[eq + 1..]).to_os_string(),
            ))
        })
        .collect();
    let mut argv = args.into_iter();
    let program = PathBuf::from(argv.next()?);
    Some(CommandLine {
        program,
        args: argv.collect(),
        env,
    })
}

/// Sends SIGKILL to `p` (if it still runs its program) and waits up to `within` until it is
/// gone (reaped if it is our child); whether it is gone.
pub fn kill9(p: &Proc, within: Duration) -> bool {
    if !alive(p.pid) || !supervisor::is_ours(p.pid, &p.name) {
        return true;
    }
    if let Ok(raw) = i32::try_from(p.pid) {
        // ESRCH (it exited meanwhile) is what we want; the wait below sees any other failure.
        if let Err(e) = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(raw),
            nix::sys::signal::Signal::SIGKILL,
        ) {
            tracing::warn!(pid = p.pid, error = %e, "SIGKILL");
        }
    }
    let deadline = Instant::now() + within;
    while alive(p.pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The programs a cluster runs.
pub(crate) const COMPONENTS: &[&str] = &[
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
];

/// Whether `name` is a program of a cluster: one of [`COMPONENTS`], or of Liqo's
/// ([`programs::LIQO`]: its components and the virtual kubelet the controller manager starts
/// per peering, whose kubeconfig is under the cluster's directory too).
fn is_component(name: &str) -> bool {
    COMPONENTS.contains(&name) || programs::LIQO.contains(&name)
}

/// Every running component (see [`is_component`]) whose command line or `KUBECONFIG` mentions
/// `dir` (each component gets a path under its cluster's directory), named after its program.
pub(crate) fn using(dir: &Path) -> Vec<Proc> {
    let under = format!("{}/", dir.display());
    let found = dataplane::procs::find(|p| {
        // Only the components themselves: never a `kubectl --kubeconfig <dir>/...` or a
        // `tail -f <dir>/logs/...` someone runs alongside. A Liqo component may have the
        // directory only in its environment (KUBECONFIG).
        is_component(p.program())
            && (p.mentions(&under) || p.env("KUBECONFIG").is_some_and(|k| k.starts_with(&under)))
    });
    let found = match found {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, dir = %dir.display(), "cannot list /proc: no component of these clusters found");
            Vec::new()
        }
    };
    found
        .into_iter()
        // Reaped here if it is a child of ours that died (the supervisor's `alive`).
        .filter(|p| supervisor::alive(p.pid))
        .map(|p| Proc {
            name: p.program().to_owned(),
            pid: p.pid,
            log: String::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_port_is_handed_out_once_per_process() {
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..300 {
            let p = super::free_port().unwrap();
            assert!(seen.insert(p), "port {p} handed out twice");
        }
    }
}
