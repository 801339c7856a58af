use std::{
    os::unix::fs::PermissionsExt,
    sync::{Arc, Mutex},
};

use liqo_daemon::status::{Applied, Refused, ReloadStatus};
use liqo_peering::{Gateway, Overlay, Peering, Peerings, plan};
use liqo_types::{OverlayNode, PeerView};

use super::*;

fn reload(text: &str, refused: bool) -> ReloadStatus {
    let digest = crate::files::digest(text);
    ReloadStatus {
        source: "f".into(),
        applied: (!refused).then(|| Applied {
            digest: digest.clone(),
            count: 1,
            micros: 0,
        }),
        refused: refused.then(|| Refused {
            digest,
            field: "remoteCIDRs[0]".into(),
            problem: "overlaps".into(),
        }),
        ..ReloadStatus::default()
    }
}

fn plan() -> OverlayPlan {
    let n = |name: &str, a: &str, p: &str| OverlayNode {
        name: name.into(),
        address: a.parse().unwrap(),
        pod_cidr: p.parse().unwrap(),
    };
    let nodes = [
        n("n0", "172.18.0.1", "10.200.0.0/24"),
        n("n1", "172.18.0.2", "10.200.1.0/24"),
    ];
    plan::overlay(&"rome".parse().unwrap(), &nodes, "n0", &peerings()).unwrap()
}

fn peerings() -> Peerings {
    let c = |s: &str| s.parse().unwrap();
    Peerings::from([(
        "milan".parse().unwrap(),
        Peering {
            view: PeerView {
                remote_pods: c("10.71.0.0/16"),
                remote_external: c("10.72.0.0/16"),
                local_pods_at_peer: c("10.50.0.0/16"),
                local_external_at_peer: c("10.51.0.0/16"),
            },
            public_key: PublicKey([1; 32]),
            endpoint: None,
        },
    )])
}

#[tokio::test]
async fn the_overlay_sink_writes_every_agents_file_and_waits_for_its_digest() {
    let dir = tempfile::tempdir().unwrap();
    let files: BTreeMap<String, PathBuf> = ["n0", "n1"]
        .iter()
        .map(|n| (n.to_string(), dir.path().join(format!("{n}.yaml"))))
        .collect();
    let paths = files.clone();
    let refuse = Arc::new(Mutex::new(false));
    let r = refuse.clone();
    let mut sink = FileOverlay {
        base: liqo_overlay_api::config::File {
            underlay_interface: Some("eth0".into()),
            ..Default::default()
        },
        files,
        // A fake agent: it runs whatever its file holds (or refuses it).
        status: move |node: &str| {
            let text = std::fs::read_to_string(&paths[node])?;
            Ok::<_, std::io::Error>(liqo_overlay_api::status::Status {
                node: node.into(),
                reload: reload(&text, *r.lock().unwrap()),
                ..Default::default()
            })
        },
        secs: 1,
    };
    let p = plan();
    sink.write(&p).await.unwrap();
    let f = liqo_overlay_api::config::File::parse(
        &std::fs::read_to_string(dir.path().join("n1.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(f, overlay_file(&sink.base, &p.per_node()[1]));
    assert_eq!(f.underlay_interface.as_deref(), Some("eth0"));
    sink.wait_applied(&p).await.unwrap();
    *refuse.lock().unwrap() = true;
    let e = sink.wait_applied(&p).await.unwrap_err();
    assert!(
        liqo_types::chain(&e).contains("remoteCIDRs[0]: overlaps"),
        "{}",
        liqo_types::chain(&e)
    );
    // A plan not written yet: the agents run another text.
    *refuse.lock().unwrap() = false;
    let e = sink.wait_applied(&p.with_gateway("n1")).await.unwrap_err();
    assert!(matches!(e, SinkError::Timeout { .. }), "{e}");
}

/// A fake host: its gateway runs its file and has a session with every peer in it.
#[derive(Clone)]
struct Host {
    config: PathBuf,
    calls: Arc<Mutex<Vec<String>>>,
}

impl GatewayHost for Host {
    fn status(&mut self) -> Result<liqo_gateway_api::status::Status, HostError> {
        let text = std::fs::read_to_string(&self.config)?;
        let f = liqo_gateway_api::config::File::parse(&text)?;
        let peers: Vec<serde_json::Value> = f
            .peers
            .iter()
            .map(|p| {
                serde_json::json!({"id": p.id, "publicKey": "k", "endpoint": null,
                "handshakeAgeSecs": 1, "txPackets": 0, "txBytes": 0, "rxPackets": 0,
                "rxBytes": 0, "dropped": 0})
            })
            .collect();
        serde_json::from_value(serde_json::json!({"publicKey": "k", "listenPort": 1,
            "noRoute": 0, "peers": peers, "reload": reload(&text, false)}))
        .map_err(HostError::from)
    }
    async fn external(&mut self) -> Result<Option<(Cidr, Vec<EndpointMapping>)>, HostError> {
        Ok(Some(("10.70.0.0/16".parse().unwrap(), Vec::new())))
    }
    async fn stop(&mut self) -> Result<(), HostError> {
        self.calls.lock().unwrap().push("stop".into());
        Ok(())
    }
    async fn start(&mut self, node: &str) -> Result<(), HostError> {
        self.calls.lock().unwrap().push(format!("start {node}"));
        if node == "broken" {
            return Err(std::io::Error::other("no such node").into());
        }
        Ok(())
    }
}

#[tokio::test]
async fn the_gateway_sink_writes_the_peers_over_the_base_and_waits_on_the_status() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gw.yaml");
    let host = Host {
        config: config.clone(),
        calls: Arc::default(),
    };
    let mut sink = FileGateway {
        base: liqo_gateway_api::config::File::parse("localPodCIDR: 10.200.0.0/16\n").unwrap(),
        config: config.clone(),
        key_file: dir.path().join("k/private.key"),
        host: host.clone(),
        handshake_secs: 1,
        reload_secs: 1,
        written: None,
    };
    let key = sink.public_key().await.unwrap();
    let mode = std::fs::metadata(dir.path().join("k/private.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(sink.public_key().await.unwrap(), key, "the same key again");
    let milan: ClusterId = "milan".parse().unwrap();
    let peers = plan::gateway_peers(&peerings());
    sink.write(&peers).await.unwrap();
    let f =
        liqo_gateway_api::config::File::parse(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(f.peers, peers);
    assert_eq!(f.local_pod_cidr, sink.base.local_pod_cidr);
    assert_eq!(f.local_external_cidr.unwrap().to_string(), "10.70.0.0/16");
    assert!(f.validate(None).is_ok(), "the gateway accepts it");
    sink.wait_handshaken(&milan).await.unwrap();
    assert!(matches!(
        sink.wait_gone(&milan).await,
        Err(SinkError::Timeout { .. })
    ));
    sink.write(&[]).await.unwrap();
    sink.wait_gone(&milan).await.unwrap();
    sink.stop().await.unwrap();
    sink.start("n1").await.unwrap();
    assert_eq!(*host.calls.lock().unwrap(), ["stop", "start n1"]);

    // The host's own error is kept whole, as the source.
    let e = sink.start("broken").await.unwrap_err();
    assert!(matches!(e, SinkError::Host { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "the gateway's host, starting the gateway on broken"
    );
    let source = std::error::Error::source(&e).expect("a source");
    assert_eq!(source.to_string(), "no such node");
    assert!(
        source.downcast_ref::<std::io::Error>().is_some(),
        "{source:?}"
    );
}
