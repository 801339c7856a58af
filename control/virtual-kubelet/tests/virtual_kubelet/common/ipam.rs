//! A home IPAM in the test process (the liqo-ipam service on a local port), with one provider
//! remapped and its view of us told.

use ipam::service::{
    client::ClientOptions,
    proto::{PeerInfo, RemapRequest, SetPeerViewRequest},
    server::{Security, Server},
};
use ipnet::Ipv4Net;

/// The running IPAM: its client options, an admin client, and its stop.
pub(crate) struct TestIpam {
    pub(crate) options: ClientOptions,
    pub(crate) admin: ipam::service::client::Client,
    /// The providers told so far, as the IPAM answered (how we see each).
    pub(crate) peers: Vec<PeerInfo>,
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<Result<(), ipam::service::server::ServeError>>,
}

impl TestIpam {
    /// An IPAM of `pods`, with `provider` (pods `provider_pods`) seeing our pods at `pod_view`
    /// and our external CIDR at `external_view`.
    pub(crate) async fn start(
        pods: Ipv4Net,
        provider: &str,
        provider_pods: Ipv4Net,
        pod_view: &str,
        external_view: &str,
    ) -> TestIpam {
        let cfg = ipam::Config::new(pods, "10.96.0.0/12".parse().unwrap());
        let service = ipam::service::Service::open(
            cfg,
            ipam::service::Overrides::default(),
            Box::new(ipam::store::MemStore::default()),
        )
        .unwrap();
        let server = Server::bind("127.0.0.1:0".parse().unwrap(), &Security::default())
            .await
            .unwrap();
        let options = ClientOptions::new(format!("http://{}", server.local_addr()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(async move {
            server
                .run(&service, async {
                    // Stopped by the test, or dropped with it: stop either way.
                    stopped.await.ok();
                })
                .await
        });
        let admin = ipam::service::client::connect(&options).await.unwrap();
        let mut ipam = TestIpam {
            options,
            admin,
            peers: Vec::new(),
            stop,
            serving,
        };
        ipam.add_provider(provider, provider_pods, pod_view, external_view)
            .await;
        ipam
    }

    /// Adds `provider` (pods `provider_pods`), seeing our pods at `pod_view` and our external
    /// CIDR at `external_view`; returns how we see it.
    pub(crate) async fn add_provider(
        &mut self,
        provider: &str,
        provider_pods: Ipv4Net,
        pod_view: &str,
        external_view: &str,
    ) -> PeerInfo {
        self.admin
            .remap(RemapRequest {
                cluster_id: provider.to_owned(),
                pod_cidr: provider_pods.to_string(),
                external_cidr: "10.202.0.0/16".into(),
            })
            .await
            .unwrap();
        let info = self
            .admin
            .set_peer_view(SetPeerViewRequest {
                cluster_id: provider.to_owned(),
                our_pod_view: pod_view.into(),
                our_external_view: external_view.into(),
            })
            .await
            .unwrap()
            .into_inner();
        self.peers.push(info.clone());
        info
    }

    /// Stops it.
    pub(crate) async fn stop(self) {
        self.stop.send(()).unwrap();
        self.serving.await.unwrap().unwrap();
    }
}

/// The `MapIp`/`UnmapEndpoint` request of `ip` exposed to `cluster`, held by `holder`.
pub(crate) fn endpoint(
    cluster: &str,
    ip: &str,
    holder: &str,
) -> ipam::service::proto::MapIpRequest {
    ipam::service::proto::MapIpRequest {
        cluster_id: cluster.to_owned(),
        ip: ip.to_owned(),
        direction: ipam::service::proto::Direction::Endpoint as i32,
        holder: holder.to_owned(),
    }
}
