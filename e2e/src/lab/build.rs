//! `up`: builds the namespaces, links, addresses and routes of a topology.

use std::collections::HashMap;

use dataplane::{
    IfName, Netlink, Netns, NetnsName,
    addr::AddressSpec,
    link::{LinkKind, LinkSpec},
    nft,
    route::RouteSpec,
    sysctl,
};
use ipnet::{IpNet, Ipv4Net};

use super::{
    Lab, LabError, Prefix,
    names::{self, LAN, WAN},
    services, state,
    wan::{nat_lan_node, nat_lan_router},
};
use crate::topology::{Cluster, Topology};

/// Builds the lab `topology` under `prefix`. Refuses if a lab with this prefix exists. On any
/// failure, everything created so far is removed before the error is returned.
pub async fn up(prefix: Prefix, topology: Topology) -> Result<Lab, LabError> {
    up_with(prefix, topology, true).await
}

/// [`up`], with the per-cluster services (IPAM, gateway, overlay agents) started or not: the
/// Kubernetes mode ([`super::k8s`]) starts its own.
pub(crate) async fn up_with(
    prefix: Prefix,
    topology: Topology,
    services: bool,
) -> Result<Lab, LabError> {
    let existing = state::namespaces(&prefix)?;
    if !existing.is_empty() || state::exists(&prefix) {
        return Err(LabError::AlreadyUp {
            prefix,
            namespaces: existing.len(),
        });
    }
    let lab = Lab { prefix, topology };
    let built = Builder::default().build(&lab, services).await;
    match built.and_then(|()| state::save(&lab)) {
        Ok(()) => Ok(lab),
        Err(e) => {
            if let Err(cleanup) = state::down(&lab.prefix) {
                tracing::error!(error = %cleanup, "cleaning up after a failed up");
            }
            Err(e)
        }
    }
}

/// Masquerade everything leaving through `oif`.
fn masquerade(oif: &str) -> nft::Ruleset {
    masquerade_table("lab_router", oif, None)
}

/// Table `table` masquerading what leaves through `oif`, except (when given) what leaves
/// from address `keep` (which keeps its address and port).
pub(crate) fn masquerade_table(
    table: &str,
    oif: &str,
    keep: Option<std::net::Ipv4Addr>,
) -> nft::Ruleset {
    let mut rs = nft::Ruleset::new(nft::Family::Ip, table.parse().expect("a literal name"));
    let mut rules: Vec<nft::Rule> = keep
        .map(|a| {
            nft::Rule::new(vec![
                nft::Expr::Oif(ifname(oif)),
                nft::Expr::Prefix(
                    nft::Field::Saddr,
                    IpNet::V4(Ipv4Net::new(a, 32).expect("a /32")),
                ),
                nft::Expr::Accept,
            ])
        })
        .into_iter()
        .collect();
    rules.push(nft::Rule::new(vec![
        nft::Expr::Oif(ifname(oif)),
        nft::Expr::Masquerade,
    ]));
    rs.chains.push(nft::Chain {
        name: "postrouting".parse().expect("literal"),
        base: Some(nft::BaseChain {
            kind: nft::ChainKind::Nat,
            hook: nft::Hook::Postrouting,
            priority: 100,
            policy: nft::Policy::Accept,
        }),
        rules,
    });
    rs
}

fn ifname(s: &str) -> IfName {
    s.parse().expect("lab interface names are valid")
}

fn fail<E: std::error::Error + Send + Sync + 'static>(
    what: impl Into<String>,
) -> impl FnOnce(E) -> LabError {
    let what = what.into();
    move |e| LabError::Build {
        what,
        source: Box::new(e),
    }
}

/// Namespaces and their netlink connections, opened once.
#[derive(Default)]
struct Builder {
    ns: HashMap<NetnsName, (Netns, Netlink)>,
}

impl Builder {
    async fn create(&mut self, name: NetnsName) -> Result<(), LabError> {
        let ns = Netns::create(&name)?;
        let nl = Netlink::connect_in(&ns).map_err(fail(format!("netlink in {name}")))?;
        nl.set_up(&ifname("lo"), true)
            .await
            .map_err(fail(format!("lo in {name}")))?;
        self.ns.insert(name, (ns, nl));
        Ok(())
    }

    fn nl(&self, name: &NetnsName) -> &Netlink {
        &self.ns[name].1
    }

    async fn build(mut self, lab: &Lab, services: bool) -> Result<(), LabError> {
        let p = &lab.prefix;
        let topo: &Topology = &lab.topology;
        let wan = names::netns(p, &[WAN]);
        self.create(wan.clone()).await?;
        for c in &topo.clusters {
            self.create(names::netns(p, &[c.name.as_str(), LAN]))
                .await?;
            if c.behind_nat {
                self.create(names::netns(p, &[c.name.as_str(), "nat"]))
                    .await?;
            }
            for n in &c.nodes {
                self.create(names::netns(p, &[c.name.as_str(), n.name.as_str()]))
                    .await?;
                for pod in &n.pods {
                    self.create(names::netns(p, &[c.name.as_str(), &pod.name]))
                        .await?;
                }
            }
        }
        self.bridge(&wan, "br0", None).await?;
        for c in &topo.clusters {
            self.cluster(p, c, &wan, topo.wan_cidr).await?;
        }
        // The per-cluster services, once every namespace and link exists.
        for c in topo.clusters.iter().filter(|_| services) {
            services::start(lab, c).await?;
        }
        Ok(())
    }

    async fn bridge(
        &self,
        ns: &NetnsName,
        name: &str,
        addr: Option<Ipv4Net>,
    ) -> Result<(), LabError> {
        let nl = self.nl(ns);
        let spec = LinkSpec {
            name: ifname(name),
            kind: LinkKind::Bridge,
            mtu: None,
            controller: None,
            up: true,
        };
        nl.add_link(&spec)
            .await
            .map_err(fail(format!("bridge {name} in {ns}")))?;
        if let Some(a) = addr {
            let a = AddressSpec {
                link: ifname(name),
                addr: IpNet::V4(a),
            };
            nl.add_address(&a)
                .await
                .map_err(fail(format!("address {} on {name} in {ns}", a.addr)))?;
        }
        Ok(())
    }

    /// A veth from `port` (enslaved to `bridge`) in `from` to `eth` in `to`, with `addr` on `eth`.
    async fn plug(
        &self,
        from: &NetnsName,
        port: &str,
        bridge: &str,
        to: &NetnsName,
        eth: &str,
        addr: Ipv4Net,
    ) -> Result<(), LabError> {
        self.wire(from, port, Some(bridge), None, to, eth, addr)
            .await
    }

    /// A veth from `port` in `from` (enslaved to `bridge`, or addressed with `port_addr`) to
    /// `eth` in `to`, with `addr` on `eth`.
    #[expect(
        clippy::too_many_arguments,
        reason = "both ends of a veth, spelled out"
    )]
    async fn wire(
        &self,
        from: &NetnsName,
        port: &str,
        bridge: Option<&str>,
        port_addr: Option<Ipv4Net>,
        to: &NetnsName,
        eth: &str,
        addr: Ipv4Net,
    ) -> Result<(), LabError> {
        let what = format!("veth {from}/{port} -> {to}/{eth}");
        let spec = LinkSpec {
            name: ifname(port),
            kind: LinkKind::Veth {
                peer: ifname(eth),
                peer_netns: Some(to.clone()),
            },
            mtu: None,
            controller: bridge.map(ifname),
            up: true,
        };
        self.nl(from)
            .add_link(&spec)
            .await
            .map_err(fail(what.clone()))?;
        if let Some(a) = port_addr {
            let a = AddressSpec {
                link: ifname(port),
                addr: IpNet::V4(a),
            };
            self.nl(from)
                .add_address(&a)
                .await
                .map_err(fail(what.clone()))?;
        }
        let nl = self.nl(to);
        nl.set_up(&ifname(eth), true)
            .await
            .map_err(fail(what.clone()))?;
        nl.add_address(&AddressSpec {
            link: ifname(eth),
            addr: IpNet::V4(addr),
        })
        .await
        .map_err(fail(what))
    }

    async fn cluster(
        &self,
        p: &Prefix,
        c: &Cluster,
        wan: &NetnsName,
        wan_cidr: Ipv4Net,
    ) -> Result<(), LabError> {
        let cname = c.name.as_str();
        let lan = names::netns(p, &[cname, LAN]);
        self.bridge(&lan, "br0", None).await?;
        for n in &c.nodes {
            let node = names::netns(p, &[cname, n.name.as_str()]);
            self.plug(&lan, n.name.as_str(), "br0", &node, "eth0", n.lan_addr)
                .await?;
            self.bridge(&node, "cni0", Some(n.bridge_addr)).await?;
            // Strict reverse-path filtering, as many distributions ship it: the overlay must
            // keep every path symmetric.
            self.ns[&node]
                .0
                .run(|| {
                    sysctl::set("net.ipv4.ip_forward", "1")?;
                    sysctl::set("net.ipv4.conf.all.rp_filter", "1")
                })?
                .map_err(fail(format!("ip_forward and rp_filter in {node}")))?;
            for (k, pod) in n.pods.iter().enumerate() {
                let pns = names::netns(p, &[cname, &pod.name]);
                self.plug(&node, &format!("p{k}"), "cni0", &pns, "eth0", pod.addr)
                    .await?;
                let default = RouteSpec {
                    via: Some(n.bridge_addr.addr().into()),
                    ..RouteSpec::to("0.0.0.0/0".parse().expect("literal"))
                };
                self.nl(&pns)
                    .add_route(&default)
                    .await
                    .map_err(fail(format!("default route in {pns}")))?;
            }
            for other in c.nodes.iter().filter(|o| o.name != n.name) {
                let r = RouteSpec {
                    via: Some(other.lan_addr.addr().into()),
                    ..RouteSpec::to(IpNet::V4(other.pod_slice))
                };
                self.nl(&node)
                    .add_route(&r)
                    .await
                    .map_err(fail(format!("route {r} in {node}")))?;
            }
        }
        let gw = names::netns(p, &[cname, c.gateway().name.as_str()]);
        if !c.behind_nat {
            return self.plug(wan, cname, "br0", &gw, "wan0", c.wan_addr).await;
        }
        // Behind a masquerading router: the router holds the WAN address.
        let router = names::netns(p, &[cname, "nat"]);
        self.plug(wan, cname, "br0", &router, "wan0", c.wan_addr)
            .await?;
        let (lan_router, lan_node) = (nat_lan_router(), nat_lan_node());
        self.wire(
            &router,
            "lan0",
            None,
            Some(lan_router),
            &gw,
            "wan0",
            lan_node,
        )
        .await?;
        let to_wan = RouteSpec {
            via: Some(lan_router.addr().into()),
            ..RouteSpec::to(IpNet::V4(wan_cidr))
        };
        self.nl(&gw)
            .add_route(&to_wan)
            .await
            .map_err(fail(format!("route to the WAN in {gw}")))?;
        self.ns[&router]
            .0
            .run(|| sysctl::set("net.ipv4.ip_forward", "1"))?
            .map_err(fail(format!("ip_forward in {router}")))?;
        nft::apply(Some(&self.ns[&router].0), &masquerade("wan0"))
            .map_err(fail(format!("NAT in {router}")))
    }
}
