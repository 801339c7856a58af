//! `liqo-auth`: the cluster's auth service (see the `liqo_auth` crate). Serves HTTPS (a
//! self-signed certificate made at start; `--plain-http` for plain) until SIGINT or SIGTERM;
//! ready when `GET /ids` answers 200. Prometheus metrics on `--metrics-listen`.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::Context;
use base64::Engine;
use clap::Parser;
use liqo_auth::{metrics::Metrics, server};

/// The Liqo auth service: issues peering identities to clusters presenting this cluster's token.
#[derive(Debug, Parser)]
#[command(name = "liqo-auth", version)]
struct Args {
    /// Address to serve on. Loopback by default: to be reached by peers, give the address
    /// (e.g. `0.0.0.0:8443`, as the chart does); every identity request is then checked
    /// against this cluster's auth token, over TLS.
    #[arg(long, default_value = "127.0.0.1:8443")]
    listen: SocketAddr,
    /// The Liqo namespace.
    #[arg(short = 'n', long, default_value = control::consts::objects::LIQO_NAMESPACE)]
    namespace: String,
    /// The apiserver URL given to peers (default: the server of this process's kube config).
    #[arg(long)]
    api_server_url: Option<String>,
    /// The apiserver CA (PEM) given to peers (default: the CA of this process's kube config).
    #[arg(long)]
    api_server_ca_file: Option<PathBuf>,
    /// Serve plain HTTP instead of HTTPS (loopback only: tokens would cross the network in
    /// clear).
    #[arg(long)]
    plain_http: bool,
    /// Extra names or addresses of the service's certificate (repeatable).
    #[arg(long = "tls-san")]
    tls_sans: Vec<String>,
    /// Address of the Prometheus metrics endpoint (`/metrics`); none when absent.
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
}

/// Refuses plain HTTP on an address other hosts can reach: the tokens of the identity requests
/// would cross the network in clear.
fn check_listen(listen: SocketAddr, plain_http: bool) -> Result<(), String> {
    if plain_http && !listen.ip().is_loopback() {
        return Err(format!(
            "--plain-http with --listen {listen}: plain HTTP is served on loopback only (the \
             peers' tokens would cross the network in clear); drop --plain-http to serve HTTPS"
        ));
    }
    Ok(())
}

/// DER certificates as PEM.
fn pem(ders: &[Vec<u8>]) -> Vec<u8> {
    let mut out = String::new();
    for der in ders {
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out.into_bytes()
}

/// Completes on SIGINT (`interrupt`) or SIGTERM (`terminate`). When listening for SIGINT fails,
/// the failure is logged and only SIGTERM stops the service (never a stop reported as clean
/// without a signal).
async fn shutdown(
    interrupt: impl Future<Output = std::io::Result<()>>,
    terminate: impl Future<Output = ()>,
) {
    tokio::pin!(terminate);
    tokio::select! {
        result = interrupt => match result {
            Ok(()) => tracing::info!("SIGINT: stopping"),
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGINT; stopping on SIGTERM only");
                terminate.await;
            }
        },
        () = &mut terminate => {}
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The daemons' logging: stderr, RUST_LOG (default info), colours only on a terminal.
    liqo_daemon::logging::init();
    let args = Args::parse();
    check_listen(args.listen, args.plain_http).map_err(anyhow::Error::msg)?;
    let kube_config = kube::Config::infer()
        .await
        .context("no kube config (KUBECONFIG, ~/.kube/config or in-cluster)")?;
    let api_server_url = args.api_server_url.clone().unwrap_or_else(|| {
        kube_config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_owned()
    });
    let api_server_ca = match (&args.api_server_ca_file, &kube_config.root_cert_file) {
        (Some(path), _) | (None, Some(path)) => {
            Some(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)
        }
        (None, None) => kube_config.root_cert.as_deref().map(pem),
    };
    let client = kube::Client::try_from(kube_config).context("building the kube client")?;

    let metrics = Metrics::default();
    if let Some(addr) = args.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} for metrics"))?;
        let m = metrics.clone();
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let m = m.clone();
                async move { m.encode() }
            }),
        );
        tracing::info!("metrics on http://{addr}/metrics");
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the metrics server stopped");
            }
        });
    }

    let mut config =
        server::Config::new(args.listen, args.namespace, api_server_url, api_server_ca);
    config.plain_http = args.plain_http;
    config.tls_sans = args.tls_sans;
    config.metrics = metrics;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    let terminate = async move {
        term.recv().await;
        tracing::info!("SIGTERM: stopping");
    };
    server::serve(config, client, shutdown(tokio::signal::ctrl_c(), terminate))
        .await
        .map_err(|e| anyhow::anyhow!(liqo_types::chain::chain(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_by_default_and_plain_http_only_there() {
        let args = Args::try_parse_from(["liqo-auth"]).unwrap();
        assert!(args.listen.ip().is_loopback(), "{}", args.listen);
        assert!(check_listen(args.listen, true).is_ok());
        let any: SocketAddr = "0.0.0.0:8443".parse().unwrap();
        assert!(check_listen(any, false).is_ok(), "HTTPS anywhere");
        let e = check_listen(any, true).unwrap_err();
        assert!(
            e.contains("--listen 0.0.0.0:8443") && e.contains("--plain-http"),
            "{e}"
        );
        let v6: SocketAddr = "[::1]:8443".parse().unwrap();
        assert!(check_listen(v6, true).is_ok());
    }

    #[tokio::test]
    async fn a_failed_sigint_listener_does_not_stop_the_service() {
        let failed = async { Err(std::io::Error::other("no signal handling")) };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let terminate = async move {
            // A dropped sender counts as SIGTERM too.
            let _ = rx.await;
        };
        let stop = tokio::spawn(shutdown(failed, terminate));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(!stop.is_finished(), "stopped without a signal");
        tx.send(()).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), stop)
            .await
            .unwrap()
            .unwrap();
    }
}
