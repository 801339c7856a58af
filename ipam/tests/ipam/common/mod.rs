//! A running `liqo-ipam serve` driven through its own CLI, and test certificates.

use std::{
    net::TcpListener,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Output},
    thread,
    time::{Duration, Instant},
};

use dataplane::supervisor::{Attached, Spec};

pub(crate) mod k8s;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_liqo-ipam");

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `liqo-ipam serve` with the state file and pod CIDR every test needs, plus `args`; its
/// output goes to `liqo-ipam.log` next to the state file.
pub(crate) fn serve_spec(state: &Path, args: &[&str]) -> Spec {
    Spec::new("liqo-ipam", BIN, state.with_file_name("liqo-ipam.log"))
        .args([
            "serve",
            "--state",
            state.to_str().unwrap(),
            "--pod-cidr",
            "10.200.0.0/16",
        ])
        .args(args)
        .env_remove("LIQO_IPAM_SERVER")
        // Everything it logs, so that the tests see what it never logs (the token).
        .env("RUST_LOG", "debug")
        .kill_on_drop()
}

/// Runs `spec` to its end with a fresh log, killing it (and failing) if it is still running
/// after 20 s; its exit status and its output (stdout and stderr).
pub(crate) fn run_to_exit(spec: Spec) -> (ExitStatus, String) {
    let mut child = spec.truncate_log().attached().expect("starting liqo-ipam");
    match child.wait_exit(Duration::from_secs(20)).unwrap() {
        Some(status) => (status, child.tail(usize::MAX)),
        None => panic!("still running after 20 s: {}", child.tail(20)),
    }
}

/// A running `liqo-ipam serve`, killed with SIGKILL on drop.
pub(crate) struct Server {
    child: Attached,
    pub(crate) url: String,
    pub(crate) metrics: u16,
    /// Connection flags given to every `cli` call (`--server` and credentials).
    client: Vec<String>,
}

impl Server {
    /// Serves plain gRPC on 127.0.0.1:`port`.
    pub(crate) fn start(state: &Path, port: u16, extra: &[&str]) -> Server {
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec!["--listen", &listen];
        args.extend_from_slice(extra);
        Server::start_with(state, &args, &format!("http://127.0.0.1:{port}"), &[])
    }

    /// Serves with `args` (which include `--listen` unless the default is meant); `url` and
    /// `client` are how every `cli` call connects.
    pub(crate) fn start_with(state: &Path, args: &[&str], url: &str, client: &[&str]) -> Server {
        let metrics = free_port();
        let ml = format!("127.0.0.1:{metrics}");
        let child = serve_spec(state, &["--metrics-listen", &ml])
            .args(args)
            .attached()
            .expect("starting liqo-ipam serve");
        let mut s = Server {
            child,
            url: url.to_owned(),
            metrics,
            client: client.iter().map(|&c| c.to_owned()).collect(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = s.cli(&["list"]);
            if out.status.success() {
                break;
            }
            if let Some(status) = s.child.exited().unwrap() {
                panic!(
                    "liqo-ipam serve exited with {status}:\n    {}",
                    s.child.tail(20)
                );
            }
            assert!(
                Instant::now() < deadline,
                "liqo-ipam did not come up: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            thread::sleep(Duration::from_millis(50));
        }
        s
    }

    /// Runs a client subcommand with this server's connection flags.
    pub(crate) fn cli(&self, args: &[&str]) -> Output {
        let client: Vec<&str> = self.client.iter().map(String::as_str).collect();
        self.cli_as(&client, args)
    }

    /// Runs a client subcommand with `client` as the credentials instead.
    pub(crate) fn cli_as(&self, client: &[&str], args: &[&str]) -> Output {
        let (cmd, rest) = args.split_first().unwrap();
        Command::new(BIN)
            .arg(cmd)
            .args(["--server", &self.url])
            .args(client)
            .args(rest)
            .env_remove("LIQO_IPAM_TOKEN_FILE")
            .output()
            .unwrap()
    }

    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Kills it with SIGKILL and reaps it.
    pub(crate) fn kill9(mut self) {
        self.child.kill().unwrap();
    }

    /// Sends SIGTERM and waits for the exit (failing after 10 s, when it is killed); its exit
    /// status and how long it took.
    pub(crate) fn terminate(mut self) -> (ExitStatus, Duration) {
        let exit = self.child.stop(Duration::from_secs(10)).unwrap();
        assert!(
            !exit.killed,
            "still running 10 s after SIGTERM:\n    {}",
            self.child.tail(20)
        );
        (exit.status, exit.after)
    }
}

/// Writes `text` to `dir/name` with mode 0600 and returns the path.
pub(crate) fn secret(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// A test CA that issues server and client certificates.
pub(crate) struct Ca {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Ca {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        Ca {
            issuer: rcgen::CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    /// Writes the CA certificate to `dir/<name>.pem`.
    pub(crate) fn write(&self, dir: &Path, name: &str) -> PathBuf {
        secret(dir, &format!("{name}.pem"), &self.issuer.pem())
    }

    /// Issues a certificate for `names` (server or client) and writes `dir/<name>.pem` and
    /// `dir/<name>.key`; returns both paths.
    pub(crate) fn issue(
        &self,
        dir: &Path,
        name: &str,
        names: &[&str],
        server: bool,
    ) -> (PathBuf, PathBuf) {
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|&n| n.to_owned()).collect::<Vec<_>>())
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (
            secret(dir, &format!("{name}.pem"), &cert.pem()),
            secret(dir, &format!("{name}.key"), &key.serialize_pem()),
        )
    }
}

/// GET http://127.0.0.1:port/metrics with a plain TCP exchange (no HTTP client dependency).
pub(crate) fn http_get(port: u16) -> String {
    get(port, "/metrics")
}

/// GET http://127.0.0.1:port`path`: the whole response, head included.
pub(crate) fn get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    out
}

/// The JSON body of GET `/status`.
pub(crate) fn status(port: u16) -> serde_json::Value {
    let out = get(port, "/status");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let body = out.split("\r\n\r\n").nth(1).unwrap();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Polls `f` every 50 ms until it returns `Some`, failing after 20 s with `what`.
pub(crate) fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(50));
    }
}
