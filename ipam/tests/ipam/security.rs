//! `liqo-ipam serve` as a daemon an operator can expose: loopback by default, no exposed listener
//! without TLS and authentication, every call (reads included) refused without valid credentials
//! (bearer token, client certificate), `--tls-secret` refused beside the files it replaces, and a
//! clean stop on SIGTERM that keeps the state.

use crate::common;

use std::{net::TcpStream, path::Path};

use common::{Ca, Server, free_port, http_get, run_to_exit, secret, serve_spec};

const REMAP: [&str; 5] = ["remap", "--peer", "milan", "--pod-cidr", "10.200.0.0/16"];

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts that `args` run as `client` is refused with `Unauthenticated`.
fn refused(s: &Server, client: &[&str], args: &[&str]) {
    let out = s.cli_as(client, args);
    let err = stderr(&out);
    assert!(
        !out.status.success() && err.contains("(Unauthenticated)"),
        "{client:?} {args:?} must be refused as unauthenticated: {err}"
    );
}

#[test]
fn listens_on_loopback_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    // No --listen: the default address, 127.0.0.1:6000.
    let s = Server::start_with(&state, &[], "http://127.0.0.1:6000", &[]);
    s.ok(&REMAP);
    // Bound to 127.0.0.1 only: another loopback address (reachable if bound to 0.0.0.0)
    // is refused.
    let other = TcpStream::connect(("127.0.0.2", 6000));
    assert!(
        other.is_err(),
        "127.0.0.2:6000 accepted a connection: not bound to 127.0.0.1 only"
    );
    assert!(TcpStream::connect(("127.0.0.1", 6000)).is_ok());
}

#[test]
fn exposed_listener_without_tls_or_auth_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let ca = Ca::new("exposed test CA");
    let (cert, key) = ca.issue(dir.path(), "server", &["127.0.0.1"], true);
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let listen = format!("0.0.0.0:{}", free_port());
    let config = dir.path().join("ipam.yaml");
    std::fs::write(&config, format!("listen: {listen}\n")).unwrap();
    let config = config.to_str().unwrap();
    let empty = secret(dir.path(), "empty-token", "\n");
    let empty = empty.to_str().unwrap();
    for (args, want) in [
        (
            vec!["--listen", &listen],
            "add --tls-cert-file and --tls-key-file",
        ),
        (
            vec!["--config", config],
            "add --tls-cert-file and --tls-key-file",
        ),
        (
            vec![
                "--listen",
                &listen,
                "--tls-cert-file",
                cert,
                "--tls-key-file",
                key,
            ],
            "without authenticating callers: it is not a loopback address; add --token-file or --client-ca-file",
        ),
        (
            vec!["--listen", &listen, "--token-file", empty],
            "add --tls-cert-file",
        ),
        (
            vec!["--listen", "127.0.0.1:1", "--tls-cert-file", cert],
            "--tls-cert-file needs --tls-key-file",
        ),
        (
            vec![
                "--listen",
                &listen,
                "--tls-cert-file",
                cert,
                "--tls-key-file",
                key,
                "--token-file",
                empty,
            ],
            "is empty",
        ),
    ] {
        let (status, err) = run_to_exit(
            serve_spec(&state, &args)
                .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port())]),
        );
        assert!(
            !status.success() && err.contains(want),
            "{args:?}: want {want:?}, got {status}: {err}"
        );
    }
    assert!(
        !state.exists(),
        "a refused start touches no state before the TLS/auth check"
    );
}

#[test]
fn the_tls_secret_replaces_the_certificate_key_and_token_files() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let metrics = || format!("127.0.0.1:{}", free_port());
    // On the command line, clap refuses the mix naming both flags.
    for flag in ["--tls-cert-file", "--tls-key-file", "--token-file"] {
        let (status, err) = run_to_exit(
            serve_spec(&state, &["--tls-secret", "liqo-ipam-tls", flag, "/x"])
                .args(["--metrics-listen", &metrics()]),
        );
        assert!(
            !status.success() && err.contains("--tls-secret") && err.contains(flag),
            "{flag}: {status}: {err}"
        );
    }
    let (status, err) = run_to_exit(
        serve_spec(&state, &["--tls-names", "ipam.example.com"])
            .args(["--metrics-listen", &metrics()]),
    );
    assert!(
        !status.success() && err.contains("--tls-secret"),
        "{status}: {err}"
    );
    // Through the config file, the server refuses it before reaching any API server.
    let config = dir.path().join("ipam.yaml");
    std::fs::write(&config, "tlsSecret: liqo-ipam-tls\n").unwrap();
    let (status, err) = run_to_exit(
        serve_spec(
            &state,
            &["--config", config.to_str().unwrap(), "--token-file", "/x"],
        )
        .args(["--metrics-listen", &metrics()])
        .env("KUBECONFIG", "/nonexistent"),
    );
    assert!(
        !status.success() && err.contains("--tls-secret cannot be used with --token-file"),
        "{status}: {err}"
    );
    assert!(!state.exists(), "a refused start touches no state");
}

/// Lists as JSON with the right credentials.
fn list(s: &Server) -> String {
    s.ok(&["list", "-o", "json"])
}

#[test]
fn tls_with_a_token_refuses_calls_without_the_right_token() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let state = d.join("state.json");
    let ca = Ca::new("token test CA");
    let ca_file = ca.write(d, "ca");
    let (cert, key) = ca.issue(d, "server", &["127.0.0.1", "localhost"], true);
    let token = secret(d, "token", "c0rrect-Horse.battery\n");
    let wrong = secret(d, "wrong", "c0rrect-Horse.batterz\n");
    let port = free_port();
    let p = |p: &Path| p.to_str().unwrap().to_owned();
    let (ca_file, cert, key, token, wrong) = (p(&ca_file), p(&cert), p(&key), p(&token), p(&wrong));
    // Exposed (0.0.0.0) is fine with TLS and a token.
    let listen = format!("0.0.0.0:{port}");
    let s = Server::start_with(
        &state,
        &[
            "--listen",
            &listen,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--token-file",
            &token,
        ],
        &format!("https://127.0.0.1:{port}"),
        &["--ca-file", &ca_file, "--token-file", &token],
    );
    let before = list(&s);
    for client in [
        vec!["--ca-file", &ca_file],
        vec!["--ca-file", &ca_file, "--token-file", &wrong],
    ] {
        for args in [
            &["list"][..],
            &REMAP,
            &["reserved", "add", "10.99.0.0/16"],
            &["pool", "add", "100.64.0.0/10"],
            &["map-ip", "--peer", "milan", "--ip", "10.200.0.1"],
        ] {
            refused(&s, &client, args);
        }
    }
    // The token given through the environment works like the flag; a wrong one is refused.
    let env = |file: &str| {
        std::process::Command::new(common::BIN)
            .args(["list", "--server", &s.url, "--ca-file", &ca_file])
            .env("LIQO_IPAM_TOKEN_FILE", file)
            .output()
            .unwrap()
    };
    assert!(env(&token).status.success(), "{}", stderr(&env(&token)));
    assert!(stderr(&env(&wrong)).contains("(Unauthenticated)"));
    // Clear text to the TLS port, and TLS without trusting our CA, do not get through either.
    let raw = |server: &str| {
        std::process::Command::new(common::BIN)
            .args(["list", "--server", server, "--token-file", &token])
            .output()
            .unwrap()
    };
    let plain = raw(&format!("http://127.0.0.1:{port}"));
    assert!(!plain.status.success(), "clear text to a TLS port");
    let untrusted = raw(&s.url);
    assert!(
        !untrusted.status.success(),
        "a server certificate from an unknown CA"
    );
    assert_eq!(list(&s), before, "refused calls changed nothing");
    // The right token over TLS works.
    let out = s.ok(&REMAP);
    assert!(out.contains("peer milan"), "{out}");
    assert!(list(&s).contains("\"milan\""));
    let metrics = http_get(s.metrics);
    let refusals = metrics
        .lines()
        .find_map(|l| l.strip_prefix("liqo_ipam_unauthenticated_requests_total "))
        .unwrap_or_else(|| panic!("no refusal counter: {metrics}"));
    assert!(refusals.trim().parse::<u64>().unwrap() >= 11, "{refusals}");
    assert!(!metrics.contains("c0rrect"), "the token never shows");
    // Nor in the server's log (at debug level) or in what a refused client prints.
    let log = std::fs::read_to_string(d.join("liqo-ipam.log")).unwrap();
    assert!(log.contains("DEBUG"), "the server logged at debug level");
    assert!(!log.contains("c0rrect"), "the token is in the server's log");
    let refused_out = stderr(&env(&wrong));
    assert!(!refused_out.contains("c0rrect"), "{refused_out}");
}

#[test]
fn mutual_tls_refuses_callers_without_a_certificate_of_the_client_ca() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let state = d.join("state.json");
    let ca = Ca::new("mtls server CA");
    let client_ca = Ca::new("mtls client CA");
    let rogue_ca = Ca::new("rogue CA");
    let p = |p: std::path::PathBuf| p.to_str().unwrap().to_owned();
    let ca_file = p(ca.write(d, "ca"));
    let client_ca_file = p(client_ca.write(d, "client-ca"));
    let (cert, key) = ca.issue(d, "server", &["localhost"], true);
    let (ccert, ckey) = client_ca.issue(d, "controller", &["controller"], false);
    let (rcert, rkey) = rogue_ca.issue(d, "rogue", &["controller"], false);
    let (cert, key, ccert, ckey, rcert, rkey) =
        (p(cert), p(key), p(ccert), p(ckey), p(rcert), p(rkey));
    let port = free_port();
    let s = Server::start_with(
        &state,
        &[
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--client-ca-file",
            &client_ca_file,
        ],
        // The certificate names localhost only: the name is checked.
        &format!("https://localhost:{port}"),
        &[
            "--ca-file",
            &ca_file,
            "--client-cert-file",
            &ccert,
            "--client-key-file",
            &ckey,
        ],
    );
    let before = list(&s);
    for args in [&["list"][..], &REMAP] {
        refused(&s, &["--ca-file", &ca_file], args);
        let rogue = s.cli_as(
            &[
                "--ca-file",
                &ca_file,
                "--client-cert-file",
                &rcert,
                "--client-key-file",
                &rkey,
            ],
            args,
        );
        assert!(
            !rogue.status.success(),
            "a certificate of another CA: {args:?}"
        );
    }
    assert_eq!(list(&s), before, "refused calls changed nothing");
    assert!(s.ok(&REMAP).contains("peer milan"));
}

#[test]
fn sigterm_stops_cleanly_and_the_state_survives() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let port = free_port();
    let s = Server::start(&state, port, &[]);
    s.ok(&REMAP);
    let before = list(&s);
    let (status, took) = s.terminate();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}"
    );
    eprintln!("stopped {took:?} after SIGTERM");
    let s = Server::start(&state, port, &[]);
    assert_eq!(list(&s), before, "the remap done before SIGTERM is kept");
    let (status, _) = s.terminate();
    assert_eq!(status.code(), Some(0));
}
