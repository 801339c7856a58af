//! The kernel state the gateway owns, and its life cycle: start (create or adopt), apply a new
//! configuration as a minimal diff, and shut down (remove everything).
//!
//! Everything is idempotent so that a restart after `kill -9` converges to the same state with
//! no duplicates: existing links and addresses are adopted, routes and rules are reconciled
//! against what the kernel reports (one dump and one batch per namespace; a later change is the
//! batch of the routes that differ from those the last apply left), and the NAT table is
//! replaced whole, or changed element by element when only peers changed since the gateway's
//! last apply ([`nft::Session`]). Applying the running configuration again (the reload loop's
//! resync) restores routes, rules and NAT changed behind the gateway's back (the NAT session
//! notices any nftables change in the namespace and replaces the table). A failed start removes
//! what it created; a failed change is rolled back, and a failed rollback is part of the error.
//! Every apply reads the private key file again (`rotate`): a new key is switched to by the
//! apply's last step, which cannot fail, so a rolled-back apply leaves the old key running.

use std::{
    net::Ipv4Addr,
    sync::{Arc, Mutex, PoisonError},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use dataplane::{
    Netlink, Netns,
    link::{LinkKind, LinkSpec},
    nft, steer, sysctl,
    tun::{self, TunOptions},
};
use ipnet::IpNet;
use liqo_daemon::{ApplyError, tasks::BoxError};

mod error;
mod kernel;
mod rotate;

pub use error::GatewayError;
pub use rotate::Desired;

/// Most lanes (TUN queues, UDP sockets, pairs of data threads) a gateway gets, one per CPU.
pub const MAX_LANES: usize = 16;
use kernel::{Planned, ensure_address, remove, routes, rules, undone};
use rotate::{desired, fixed};

use crate::{
    config::{Config, ConfigError},
    keys::{PrivateKey, PublicKey, rotation::KeyChange},
    plan,
    wg::Device,
};

/// A running gateway.
pub struct Gateway {
    cfg: Config,
    host: Netlink,
    gw: Netlink,
    device: Arc<Device>,
    threads: Vec<JoinHandle<()>>,
    /// The NAT table of the gateway namespace, and what was applied to it last.
    nat: Arc<Mutex<nft::Session>>,
    /// The routes and rules the last converge left in the kernel, if it succeeded.
    planned: Option<Planned>,
    /// Whether the host rule an older gateway put at [`plan::OLD_HOST_RULE_PRIORITY`] was
    /// removed (once per process).
    old_rule_gone: bool,
}

impl Gateway {
    /// Creates (or adopts) the namespace, links, tunnel, routes, rules and NAT of `cfg`, and
    /// starts the data path. Must run inside a tokio runtime, in the host namespace. If a step
    /// fails, what was created is removed again (the namespace, the veth pair with its routes
    /// and rules, the tunnel), and a failure to remove it is part of the error. The key file is
    /// created if missing, unless `publicKey` is set (a new key could not be that one); a key
    /// that is not the one `publicKey` names is refused.
    pub async fn start(cfg: Config) -> Result<Gateway, GatewayError> {
        let path = &cfg.private_key_file;
        let key = match cfg.public_key {
            Some(_) => PrivateKey::load(path)?,
            None => PrivateKey::load_or_create(path)?,
        };
        crate::keys::rotation::expected_key(path, &key, cfg.public_key)?;
        let public = key.public();
        if let Some(p) = cfg.peers.values().find(|p| p.public_key == public) {
            return Err(ConfigError {
                field: format!("peers[id={}].publicKey", p.id),
                problem: "is this gateway's own public key".into(),
            }
            .into());
        }
        let host = Netlink::connect()?;
        let mut g = match Gateway::create(&cfg, key, &host).await {
            Ok(g) => g,
            Err(e) => return Err(undone(e, remove(&host, &cfg).await)),
        };
        if let Err(e) = g.converge(&cfg).await {
            return Err(undone(e, g.shutdown().await));
        }
        if let Err(e) = g.liberal_tcp() {
            return Err(undone(e, g.shutdown().await));
        }
        tracing::info!(namespace = %g.cfg.namespace, port = g.cfg.listen_port, peers = g.cfg.peers.len(), "gateway up");
        Ok(g)
    }

    /// Conntrack in the gateway namespace (loaded by the NAT table) accepts out-of-window TCP
    /// segments (loss, reordering, a peer's conntrack lost), as kube-proxy has it: the filter's
    /// drop of untranslatable packets then hits only what conntrack cannot place at all.
    fn liberal_tcp(&self) -> Result<(), GatewayError> {
        Netns::open(&self.cfg.namespace)?
            .run(|| sysctl::set("net.netfilter.nf_conntrack_tcp_be_liberal", "1"))??;
        Ok(())
    }

    /// The namespace, links, addresses and tunnel of `cfg`, and the data path running.
    async fn create(
        cfg: &Config,
        key: PrivateKey,
        host: &Netlink,
    ) -> Result<Gateway, GatewayError> {
        let gw_ns = match Netns::open(&cfg.namespace) {
            Ok(ns) => ns,
            Err(dataplane::netns::Error::NotFound(_)) => Netns::create(&cfg.namespace)?,
            // An entry left unmounted by a crash while it was being created: start over.
            Err(dataplane::netns::Error::NotANamespace(_)) => {
                Netns::delete(&cfg.namespace)?;
                Netns::create(&cfg.namespace)?
            }
            Err(e) => return Err(e.into()),
        };
        let gw = Netlink::connect_in(&gw_ns)?;
        let nat = Arc::new(Mutex::new(nft::Session::open(Some(&gw_ns))?));
        gw.set_up(&"lo".parse().expect("lo"), true).await?;
        if host.link(&cfg.host_link).await?.is_none() {
            host.add_link(&LinkSpec {
                name: cfg.host_link.clone(),
                kind: LinkKind::Veth {
                    peer: cfg.gateway_link.clone(),
                    peer_netns: Some(cfg.namespace.clone()),
                },
                mtu: None,
                controller: None,
                up: true,
            })
            .await?;
        }
        host.set_up(&cfg.host_link, true).await?;
        gw.set_up(&cfg.gateway_link, true).await?;
        ensure_address(host, &cfg.host_link, IpNet::V4(cfg.host_addr())).await?;
        ensure_address(&gw, &cfg.gateway_link, IpNet::V4(cfg.gateway_addr())).await?;
        gw_ns.run(|| sysctl::set("net.ipv4.ip_forward", "1"))??;

        // One lane (TUN queue and UDP socket) per CPU, each carrying what its CPU sends and
        // receives (see `wg::lanes`); one lane if the kernel will not steer packets by CPU
        // (no CAP_BPF, an old kernel): lanes picked by flow would wake threads on other CPUs.
        let mut lanes = crate::wg::lanes_for(crate::wg::cpus_allowed(), MAX_LANES);
        let steering = if lanes > 1 {
            match steer::TunSteering::load() {
                Ok(p) => Some(p),
                Err(e) => {
                    tracing::warn!(error = %liqo_types::chain(&e), "packets cannot follow their CPU; one lane");
                    lanes = 1;
                    None
                }
            }
        } else {
            None
        };
        let tun_name = cfg.tun.clone();
        let queues = gw_ns.run(move || {
            (0..lanes)
                .map(|i| {
                    tun::create(
                        &tun_name,
                        TunOptions {
                            multi_queue: lanes > 1,
                            vnet_hdr: true,
                            // Another process's device of that name is refused, not joined.
                            exclusive: i == 0,
                        },
                    )
                })
                .collect::<Result<Vec<_>, _>>()
        })??;
        gw.set_mtu(&cfg.tun, cfg.mtu).await?;
        gw.set_up(&cfg.tun, true).await?;
        let bind = |source| GatewayError::Bind {
            port: cfg.listen_port,
            source,
        };
        // Every interface: the WireGuard port is what the peers reach (through NATs and load
        // balancers), and WireGuard authenticates every packet on it; nothing else listens here.
        let udp = steer::bind_udp_group((Ipv4Addr::UNSPECIFIED, cfg.listen_port).into(), lanes)?;
        let device =
            Device::new(key, queues.into_iter().zip(udp).collect(), steering).map_err(bind)?;
        tracing::info!(lanes, "data path");
        device.set_peers(&cfg.peers);
        device.set_busy_poll(Duration::from_micros(cfg.busy_poll_micros.into()));
        device.set_pin_when_idle(cfg.pin_when_idle);
        device.set_idle_class(cfg.idle_class);
        let threads = device.start().map_err(|e| {
            // The threads that did start end with the device.
            device.stop();
            bind(e)
        })?;
        Ok(Gateway {
            cfg: cfg.clone(),
            host: host.clone(),
            gw,
            device,
            threads,
            nat,
            planned: None,
            old_rule_gone: false,
        })
    }

    /// Routes, rules and NAT for `cfg`, each a minimal diff, all three at once: the routes and
    /// the rule of each namespace are one batch each, and the NAT (on a thread of its own) is
    /// one transaction, of elements only when only peers changed since the last apply
    /// ([`nft::Session`]).
    ///
    /// Routes and rules that differ from those the last converge left are changed from those
    /// (a peer added or removed: its routes, without reading a table of a thousand); the same
    /// again (the resync), or anything after a failure, is reconciled against what the kernel
    /// reports (one dump per table), which repairs what changed behind our back.
    async fn converge(&mut self, cfg: &Config) -> Result<(), GatewayError> {
        let start = Instant::now();
        // The NAT first: its transaction takes longest, and it runs while the routes are planned.
        let (nat, rs) = (Arc::clone(&self.nat), plan::nat(cfg));
        let job = tokio::task::spawn_blocking(move || {
            nat.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .apply(&rs)
        });
        let nat = async {
            match job.await {
                Ok(how) => Ok((how?, start.elapsed())),
                // A blocking task is never cancelled: it failed only by panicking.
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        };
        let want = Planned::of(cfg);
        let last = self.planned.take().filter(|l| *l != want);
        let (gw, host, last) = (&self.gw, &self.host, last.as_ref());
        let old_rule_gone = self.old_rule_gone;
        let gateway = async {
            let table = plan::GATEWAY_TABLE;
            routes(gw, table, last.map(|l| &l.gateway[..]), &want.gateway).await?;
            rules(
                gw,
                table,
                last.map(|l| &l.gateway_rules[..]),
                &want.gateway_rules,
            )
            .await?;
            Ok::<_, GatewayError>(start.elapsed())
        };
        let host = async {
            let table = plan::HOST_TABLE;
            if !old_rule_gone {
                // The rule of an older gateway, at the table's own priority (before the
                // overlay's), left by one killed on this node: once per process.
                host.reconcile_rules(plan::OLD_HOST_RULE_PRIORITY, &[])
                    .await?;
            }
            routes(host, table, last.map(|l| &l.host[..]), &want.host).await?;
            rules(
                host,
                plan::HOST_RULE_PRIORITY,
                last.map(|l| &l.host_rules[..]),
                &want.host_rules,
            )
            .await?;
            Ok(start.elapsed())
        };
        let (gateway, host, (nat, nat_took)) = tokio::try_join!(gateway, host, nat)?;
        tracing::debug!(
            routes_micros = gateway.max(host).as_micros(),
            routes_read = last.is_none(),
            nat_micros = nat_took.as_micros(),
            ?nat,
            "kernel state converged"
        );
        self.planned = Some(want);
        self.old_rule_gone = true;
        Ok(())
    }

    /// Validates `text` for this running gateway: every field, the fields that cannot change
    /// while running, the key file as it is now (against `publicKey`, if set), and no peer with
    /// the public key that will run.
    pub fn prepare(&self, text: &str) -> Result<Desired, ConfigError> {
        desired(text, &self.cfg, self.device.public_key())
    }

    /// Applies a new configuration ([`Gateway::prepare`] made it from a file's text). Fields
    /// that need a restart are refused, naming the field; peers whose identity did not change
    /// keep their sessions, unless our key changes: then every session is made anew with it.
    pub async fn apply(&mut self, next: Desired) -> Result<(), GatewayError> {
        fixed(&self.cfg, &next.cfg)?;
        let Desired { cfg, key } = next;
        // Applied step by step; if a step fails, everything goes back to the previous
        // configuration (and key: it is switched last, by a step that cannot fail) so that the
        // running state is never a mix of the two.
        if let Err(e) = self.switch(&cfg, key).await {
            let old = self.cfg.clone();
            return Err(undone(e, self.switch(&old, KeyChange::Keep).await));
        }
        self.cfg = cfg;
        Ok(())
    }

    /// The kernel first, then the peer table (with the new key, if it changes): a peer shown in
    /// the status (or handshaking) has its routes, rules and NAT in place, and a peer gone from
    /// the status has none left.
    async fn switch(&mut self, cfg: &Config, key: KeyChange) -> Result<(), GatewayError> {
        self.gw.set_mtu(&cfg.tun, cfg.mtu).await?;
        self.converge(cfg).await?;
        match key {
            KeyChange::Keep => self.device.set_peers(&cfg.peers),
            KeyChange::Switch(key) => {
                let new = key.public();
                let old = self.device.set_key(key, &cfg.peers);
                tracing::info!(old_public_key = %old, new_public_key = %new, peers = cfg.peers.len(), "key rotated");
            }
        }
        self.device
            .set_busy_poll(Duration::from_micros(cfg.busy_poll_micros.into()));
        self.device.set_pin_when_idle(cfg.pin_when_idle);
        self.device.set_idle_class(cfg.idle_class);
        Ok(())
    }

    /// Whether every data-path thread is still running (a thread that died, for example on a
    /// panic, leaves the tunnel dead: the daemon must exit so its supervisor restarts it).
    pub fn healthy(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }

    /// The public key running now (it changes with a key switch).
    pub fn public_key(&self) -> PublicKey {
        self.device.public_key()
    }

    /// The data path.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Stops the data path and removes everything the gateway created: host rules and routes,
    /// the veth pair, the tunnel and the namespace (with its NAT table).
    pub async fn shutdown(self) -> Result<(), GatewayError> {
        self.device.stop();
        for t in self.threads {
            if t.join().is_err() {
                // Its panic was logged when it happened; removing what we created matters more.
                tracing::error!("a data-path thread had panicked");
            }
        }
        drop(self.device);
        remove(&self.host, &self.cfg).await?;
        tracing::info!(namespace = %self.cfg.namespace, "gateway removed");
        Ok(())
    }
}

/// The reload loop drives the gateway: a file's text is validated against the key file as it is
/// now (and the key that will run), a field that needs a restart is refused, and a kernel error
/// (after the rollback) is retried.
impl liqo_daemon::Daemon for Gateway {
    type Config = Desired;

    fn parse(&self, text: &str) -> Result<Desired, ConfigError> {
        self.prepare(text)
    }

    async fn apply(&mut self, next: Desired) -> Result<(), ApplyError> {
        let (peers, again) = (next.cfg.peers.len(), next.cfg == self.cfg);
        match Gateway::apply(self, next).await {
            // The resync: converged to what was already in force.
            Ok(()) if again => Ok(()),
            Ok(()) => {
                tracing::info!(peers, "gateway configuration applied");
                Ok(())
            }
            Err(GatewayError::Config(e)) => Err(ApplyError::Refused(e)),
            Err(e) => Err(ApplyError::failed(e)),
        }
    }

    fn health(&self) -> Result<(), BoxError> {
        if self.healthy() {
            Ok(())
        } else {
            Err("a data-path thread stopped; exiting so that the gateway is restarted".into())
        }
    }
}
