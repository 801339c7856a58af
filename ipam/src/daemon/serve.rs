//! [`serve`]: the daemon's start-up (settings, gRPC server, the store and the state, status
//! server), its run until a signal or a failure, and its clean stop.

use std::path::PathBuf;

use liqo_daemon::{Reload, server::StatusServer, source::ConfigFile, tasks::Tasks};
use tokio::sync::watch;

use super::{
    error::DaemonError,
    running::{Running, managed},
};
use crate::{
    Config,
    service::{Overrides, Service, ServiceError, server::Server},
    settings::{Settings, StoreChoice},
    store::{FileStore, Store, configmap::ConfigMapStore},
};

/// Resolves once `stop` turns true.
async fn stopped(mut stop: watch::Receiver<bool>) {
    // An error means the sender is gone, which only happens once we are stopping anyway.
    let _ = stop.wait_for(|s| *s).await;
}

/// Opens the store and the service from it. On the blocking pool: a ConfigMap store waits
/// for the API server.
async fn open(
    choice: &StoreChoice,
    config: Config,
    overrides: Overrides,
) -> Result<Service, DaemonError> {
    let open_err = |source| DaemonError::Open {
        state: choice.to_string(),
        source,
    };
    let c = choice.clone();
    let opened = tokio::task::spawn_blocking(move || {
        let store: Box<dyn Store + Send> = match c {
            StoreChoice::File(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|source| {
                        Box::new(DaemonError::StateDir {
                            dir: dir.to_owned(),
                            source,
                        })
                    })?;
                }
                Box::new(FileStore::new(path))
            }
            StoreChoice::ConfigMap(target) => Box::new(
                ConfigMapStore::connect(target).map_err(|e| Box::new(DaemonError::Store(e)))?,
            ),
        };
        // Boxed: the error is large, and this is the closure's result.
        Ok::<_, Box<DaemonError>>(Service::open(config, overrides, store))
    })
    .await;
    match opened {
        Ok(r) => r.map_err(|e| *e)?.map_err(open_err),
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => Err(open_err(ServiceError::Stopped)),
        },
    }
}

/// Runs `liqo-ipam serve` until SIGTERM or SIGINT (or a failure): `flags` are the settings
/// given on the command line, which win over those of the `config` file (watched while
/// running). Prints one line once serving.
pub async fn serve(flags: Settings, config: Option<PathBuf>) -> Result<(), DaemonError> {
    let shutdown = liqo_daemon::signal::shutdown().map_err(DaemonError::Signals)?;
    // Watch before the first read, so a change made meanwhile is seen.
    let source = config.map(ConfigFile::watch);
    let text = source.as_ref().map(ConfigFile::read).transpose()?;
    let file = match (&source, &text) {
        (Some(source), Some(text)) => {
            Settings::from_yaml(text).map_err(|e| DaemonError::ConfigFile {
                path: source.path().to_owned(),
                source: e,
            })?
        }
        _ => Settings::default(),
    };
    let settings = flags.clone().over(file);
    // Refuse an exposed, unauthenticated listener or unusable TLS or token files before
    // touching the state.
    let security = settings.security().map_err(DaemonError::Settings)?;
    let grpc = Server::bind(settings.listen(), &security).await?;
    let (config, overrides) = settings.config().map_err(DaemonError::Settings)?;
    let store = settings.store().map_err(DaemonError::Settings)?;
    for flag in settings.unused_store_flags() {
        tracing::warn!(
            flag,
            store = store.kind(),
            "ignored: this store does not use it"
        );
    }
    let service = open(&store, config, overrides).await?;
    let status_server = StatusServer::bind(settings.metrics_listen()).await?;

    let listen = grpc.local_addr();
    let scheme = if grpc.tls() { "https" } else { "http" };
    let token = security.token_file.is_some() || security.tls_secret.is_some();
    let auth = match (token, &security.client_ca_file) {
        (true, Some(_)) => "bearer token and client certificate required",
        (true, None) => "bearer token required",
        (false, Some(_)) => "client certificate required",
        (false, None) => "no authentication",
    };
    let tls_secret = security.tls_secret.as_ref().map(ToString::to_string);
    let metrics_listen = status_server.local_addr();
    let reload = source
        .as_ref()
        .zip(text)
        .map(|(s, t)| Reload::started(s, t));
    let view = reload.as_ref().map(Reload::view);
    let status = {
        let (service, view, kind, state, tls_secret) = (
            service.clone(),
            view.clone(),
            store.kind(),
            store.location(),
            tls_secret,
        );
        move || {
            let (peers, endpoints) = service.read(|i| (i.peers().count(), i.endpoints().count()));
            serde_json::json!({
                "listen": format!("{scheme}://{listen}"),
                "authentication": auth,
                "tlsSecret": tls_secret,
                "store": kind,
                "state": state,
                "peers": peers,
                "endpoints": endpoints,
                "reload": view.as_ref().map(|v| v.borrow().clone()),
            })
        }
    };
    let metrics = {
        let (m, view) = (service.metrics(), view);
        move || {
            let mut r = m.registry();
            if let Some(v) = &view {
                liqo_daemon::status::register_metrics(&v.borrow(), &mut r);
            }
            r
        }
    };
    let mut tasks = Tasks::new();
    tasks.spawn(
        "the /status and /metrics server",
        status_server.serve(status, metrics),
    );
    tracing::info!(%listen, scheme, auth, %metrics_listen, %store, "liqo-ipam serving");
    println!(
        "liqo-ipam serving gRPC on {scheme}://{listen} ({auth}), metrics on http://{metrics_listen}/metrics, state in {store}"
    );

    let (stop, stop_rx) = watch::channel(false);
    let grpc = grpc.run(&service, stopped(stop_rx));
    tokio::pin!(grpc);
    service.set_managed(managed(
        &flags,
        &settings,
        source.as_ref().map(ConfigFile::path),
    ));
    let mut daemon = Running {
        service: service.clone(),
        config: source.as_ref().map(|s| s.path().to_owned()),
        flags,
        running: settings,
    };
    let run = async {
        match (reload, source) {
            (Some(reload), Some(source)) => reload.run(&mut daemon, source, tasks, shutdown).await,
            _ => tasks.run(shutdown).await,
        }
    };
    // Until a signal, a failed task (the status server) or the gRPC server failing.
    let outcome = tokio::select! {
        r = run => r,
        r = &mut grpc => {
            r?;
            return Err(DaemonError::GrpcStopped);
        }
    };
    // Let the calls in flight finish (each finished change is saved already).
    stop.send_replace(true);
    let stopped = grpc.await;
    let signal = outcome?;
    stopped?;
    tracing::info!(%signal, "stopped");
    Ok(())
}
