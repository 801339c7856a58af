//! A `liqo-ipam` service in the test process (memory store), on a loopback port.

use ipam::service::{
    Overrides, Service,
    client::{self, Client, ClientOptions},
    server::{Security, Server},
};

/// Its address (`http://127.0.0.1:<port>`) and a client of it; it serves until the test ends.
pub(crate) async fn serve(pod_cidr: &str) -> (String, Client) {
    let cfg = ipam::Config::new(pod_cidr.parse().unwrap(), "10.96.0.0/12".parse().unwrap());
    let service = Service::open(
        cfg,
        Overrides::default(),
        Box::new(ipam::store::MemStore::default()),
    )
    .unwrap();
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), &Security::default())
        .await
        .unwrap();
    let addr = format!("http://{}", server.local_addr());
    tokio::spawn(async move { server.run(&service, std::future::pending()).await });
    let c = client::connect(&ClientOptions::new(addr.clone()))
        .await
        .unwrap();
    (addr, c)
}
