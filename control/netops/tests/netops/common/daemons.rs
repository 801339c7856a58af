//! Fake daemons: each reads its config file on every `GET /status` and answers the status the
//! real daemon running it would (typed: `liqo_gateway_api::status::Status`, `liqo_overlay_api::status::Status`),
//! the file's digest applied (or refused with the field, as the daemon's validation says). The
//! gateway lists every peer of the file with a handshake 1 s ago. A frozen daemon keeps
//! answering what it answered when frozen (a daemon that has not reloaded yet).

use std::{
    io::{Read, Write},
    net::TcpListener,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use liqo_daemon::status::{Applied, Refused, ReloadStatus};

type Render = dyn Fn(&Path) -> String + Send + Sync;

/// A fake daemon serving `/status` on a loopback port.
pub(crate) struct Fake {
    /// Its status URL.
    pub(crate) url: String,
    frozen: Arc<Mutex<Option<String>>>,
    /// While set, every connection is closed unanswered (a dead daemon).
    dead: Arc<std::sync::atomic::AtomicBool>,
    render: Arc<Render>,
    config: PathBuf,
}

impl Fake {
    fn serve(config: PathBuf, render: Arc<Render>) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/status", listener.local_addr().unwrap());
        let frozen: Arc<Mutex<Option<String>>> = Arc::default();
        let dead: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let (f, r, c, d) = (frozen.clone(), render.clone(), config.clone(), dead.clone());
        // Runs until the test process ends.
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut s) = conn else { continue };
                if d.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let body = f.lock().unwrap().clone().unwrap_or_else(|| r(&c));
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                // A client that went away is no concern of the fake.
                let _ = s.write_all(answer.as_bytes());
            }
        });
        Fake {
            url,
            frozen,
            dead,
            render,
            config,
        }
    }

    /// A fake `liqo-gateway` running `config`.
    pub(crate) fn gateway(config: PathBuf) -> Fake {
        Fake::serve(config, Arc::new(gateway_status))
    }

    /// A fake `liqo-overlay` running `config`.
    pub(crate) fn overlay(config: PathBuf) -> Fake {
        Fake::serve(config, Arc::new(overlay_status))
    }

    /// Keeps answering what it answers now.
    pub(crate) fn freeze(&self) {
        let now = (self.render)(&self.config);
        *self.frozen.lock().unwrap() = Some(now);
    }

    /// Dies (`true`: every look fails) or comes back (`false`).
    pub(crate) fn set_dead(&self, dead: bool) {
        self.dead.store(dead, std::sync::atomic::Ordering::SeqCst);
    }

    /// Follows its file again.
    pub(crate) fn thaw(&self) {
        *self.frozen.lock().unwrap() = None;
    }
}

fn reload(path: &Path, text: &str, refused: Option<liqo_types::FieldError>) -> ReloadStatus {
    let digest = liqo_daemon::digest(text);
    match refused {
        None => ReloadStatus {
            source: path.display().to_string(),
            applied: Some(Applied {
                digest,
                count: 1,
                micros: 0,
            }),
            ..ReloadStatus::default()
        },
        Some(e) => ReloadStatus {
            source: path.display().to_string(),
            refused: Some(Refused {
                digest,
                field: e.field,
                problem: e.problem,
            }),
            ..ReloadStatus::default()
        },
    }
}

fn gateway_status(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let checked =
        liqo_gateway_api::config::File::parse(&text).and_then(|f| f.validate(None).map(|_| f));
    // As the real gateway: it runs the key its config names (once the key file holds it).
    let (peers, refused, key) = match checked {
        Ok(f) => (
            f.peers,
            None,
            f.public_key
                .map_or_else(|| "fake".to_owned(), |k| k.to_string()),
        ),
        Err(e) => (Vec::new(), Some(e), "fake".to_owned()),
    };
    let peers: Vec<serde_json::Value> = peers
        .iter()
        .map(|p| {
            serde_json::json!({"id": p.id, "publicKey": p.public_key.to_string(),
                "endpoint": p.endpoint.map(|e| e.to_string()), "handshakeAgeSecs": 1,
                "txPackets": 0, "txBytes": 0, "rxPackets": 0, "rxBytes": 0, "dropped": 0})
        })
        .collect();
    let s: liqo_gateway_api::status::Status = serde_json::from_value(serde_json::json!({
        "publicKey": key, "listenPort": 51840, "noRoute": 0, "peers": peers,
        "reload": reload(path, &text, refused),
    }))
    .unwrap();
    serde_json::to_string(&s).unwrap()
}

fn overlay_status(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let s = match liqo_overlay_api::config::File::parse(&text).and_then(|f| f.validate()) {
        Ok(cfg) => liqo_overlay_api::status::Status::new(&cfg, reload(path, &text, None)),
        Err(e) => liqo_overlay_api::status::Status {
            reload: reload(path, &text, Some(e)),
            ..liqo_overlay_api::status::Status::default()
        },
    };
    serde_json::to_string(&s).unwrap()
}
