//! The overlay agent never gets stuck (needs root): the real `liqo-overlay` on a node of a small
//! lab (a gateway node with its own agent, a pod on the node under test, a remote range behind
//! the gateway node, strict reverse-path filters).
//!
//! - Node addresses that cannot carry the overlay (every class: unspecified, broadcast,
//!   multicast, loopback, link-local, reserved and the overlay's own range, "this network",
//!   IPv6), for this node and for the gateway node: each refused naming `nodes[i].address`, the
//!   kernel state unchanged, and the good file applied again afterwards.
//! - A config that validates never leaves the agent unable to apply the next good one: after
//!   each of a series of valid but unusual files (node set changes, gateway changes, device,
//!   VNI, port, MTU and tunnel MTU changes, no remote ranges, many remote ranges, files the
//!   kernel refuses), the good file applies, the kernel state is the original one again and
//!   the pod reaches the remote range.
//!
//! The kernel state compared is the node's rules, IPv4 routes of every table, permanent
//! neighbours, forwarding entries, links (with details) and IPv4 addresses, each read with
//! `ip`/`bridge` whose exit status is checked (IPv6 is off on the nodes).

use crate::common;

use std::{path::PathBuf, thread, time::Duration};

use common::{Agent, Dir, add, eventually, prefix, wait_status, write};
use dataplane::{
    Netns,
    netns::require_root,
    supervisor::Spec,
    testing::{Spaces, route, wire},
};
use liqo_daemon::digest;
use overlay::status::Status;

const NODES: &str = "nodes:\n  - {name: n0, address: 172.18.0.1, podCIDR: 10.200.0.0/24}\n  - {name: n1, address: 172.18.0.2, podCIDR: 10.200.1.0/24}\n  - {name: n2, address: 172.18.0.3, podCIDR: 10.200.2.0/24}\n";

/// The good file of node `me` (as the lab writes them: the underlay interface named).
fn good(me: &str) -> String {
    format!(
        "node: {me}\ngateway: n0\nremoteCIDRs: [10.71.0.0/16]\nunderlayInterface: eth0\n{NODES}"
    )
}

/// `program args` in `ns`: its output, once it succeeded.
fn run(ns: &Netns, program: &str, args: &[&str]) -> String {
    let o = ns.command(program).args(args).output().unwrap();
    assert!(
        o.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Everything of the node's kernel state the agent could touch, one section per command, lines
/// sorted and interface indices dropped (a device recreated with the same settings is the same).
fn kernel(ns: &Netns) -> String {
    let sections: [(&str, &[&str]); 6] = [
        ("ip", &["rule"]),
        ("ip", &["-4", "route", "show", "table", "all"]),
        ("ip", &["neigh", "show", "nud", "permanent"]),
        ("bridge", &["fdb", "show"]),
        ("ip", &["-d", "link", "show"]),
        ("ip", &["-4", "addr", "show"]),
    ];
    let mut out = String::new();
    for (program, args) in sections {
        let text = run(ns, program, args);
        // `ip link`/`ip addr` number their records: "7: liqo.vxlan: <...>" -> "liqo.vxlan: <...>".
        let mut records: Vec<String> = Vec::new();
        for line in text.lines() {
            let unnumbered = line
                .split_once(": ")
                .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            match unnumbered {
                Some((_, rest)) => records.push(rest.to_owned()),
                None if line.starts_with(' ') && !records.is_empty() => {
                    let last = records.last_mut().expect("checked");
                    last.push('\n');
                    last.push_str(line);
                }
                None => records.push(line.to_owned()),
            }
        }
        records.sort();
        out += &format!("== {program} {}\n{}\n", args.join(" "), records.join("\n"));
    }
    out
}

/// The lines of `b` not in `a` and of `a` not in `b`, for failure messages.
fn diff(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let gone = la
        .iter()
        .filter(|l| !lb.contains(l))
        .map(|l| format!("- {l}"));
    let new = lb
        .iter()
        .filter(|l| !la.contains(l))
        .map(|l| format!("+ {l}"));
    gone.chain(new).collect::<Vec<_>>().join("\n")
}

fn ping(ns: &Netns, ip: &str) -> bool {
    let o = ns
        .command("ping")
        .args(["-c1", "-W1", "-q", ip])
        .output()
        .unwrap();
    // 0: answered, 1: no answer, 2 with "unreachable": no route (the pod lost its link);
    // anything else is ping failing to run.
    let unreachable = String::from_utf8_lossy(&o.stderr).contains("Network is unreachable");
    assert!(
        matches!(o.status.code(), Some(0 | 1)) || unreachable,
        "ping: {o:?}"
    );
    o.status.success()
}

fn applied(s: &Status, text: &str) -> bool {
    s.reload
        .applied
        .as_ref()
        .is_some_and(|a| a.digest == digest(text))
}

/// The lab: a LAN, gateway node n0 (its own agent, the remote range 10.71.0.2 behind it), node
/// n1 with a pod (10.200.1.2), strict reverse-path filters on both nodes.
struct Lab {
    n1: Netns,
    pod: Netns,
    dir: Dir,
    path: PathBuf,
    log: PathBuf,
    gateway_agent: Agent,
    _spaces: Spaces,
}

async fn lab() -> Lab {
    let p = prefix("r");
    let mut s = Spaces::new();
    let lan = common::lan(&mut s, &p).await;
    let mut nodes = Vec::new();
    for i in 0..2 {
        let n = common::node(&mut s, &p, &lan, i).await;
        n.run(|| {
            dataplane::sysctl::set("net.ipv4.conf.all.rp_filter", "1").unwrap();
            dataplane::sysctl::set("net.ipv4.conf.eth0.rp_filter", "1").unwrap();
            // The overlay is IPv4; without IPv6 no link-local address, route or multicast
            // entry (which vary with a recreated device's first MAC) blurs the comparison.
            dataplane::sysctl::set("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
            dataplane::sysctl::set("net.ipv6.conf.default.disable_ipv6", "1").unwrap();
        })
        .unwrap();
        nodes.push(n);
    }
    route(&nodes[0], "10.200.1.0/24", "172.18.0.2").await;
    route(&nodes[1], "10.200.0.0/24", "172.18.0.1").await;
    let pod = add(&mut s, format!("{p}-n1-p0")).await;
    wire(
        &nodes[1],
        "p0",
        "10.200.1.1/24",
        None,
        &pod,
        "eth0",
        "10.200.1.2/24",
    )
    .await;
    route(&pod, "0.0.0.0/0", "10.200.1.1").await;
    common::remote(&mut s, &p, &nodes[0]).await;

    let dir = Dir(std::env::temp_dir().join(&p));
    std::fs::create_dir_all(&dir.0).unwrap();
    let gateway_path = dir.0.join("n0.yaml");
    write(&gateway_path, &good("n0"));
    let gateway_log = dir.0.join("n0.log");
    let gateway_agent = Agent::start(&nodes[0], &gateway_path, &gateway_log);
    wait_status(&nodes[0], "the gateway node's agent started", |s| {
        applied(s, &good("n0"))
    });
    let path = dir.0.join("n1.yaml");
    let log = dir.0.join("n1.log");
    let n1 = nodes.pop().expect("two nodes");
    Lab {
        n1,
        pod,
        path,
        log,
        dir,
        gateway_agent,
        _spaces: s,
    }
}

/// Files that do not validate: (file, the field named).
fn unusable_addresses() -> Vec<(String, String)> {
    let classes = [
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.1",
        "239.255.255.250",
        "127.0.0.1",
        "127.1.2.3",
        "169.254.100.2",
        "169.254.1.1",
        "240.18.0.2",
        "255.0.0.1",
        "0.0.0.1",
        "::1",
        "fe80::1",
    ];
    let mut out = Vec::new();
    for (i, own) in [(0, "172.18.0.1"), (1, "172.18.0.2")] {
        for bad in classes {
            let text = good("n1").replace(&format!("address: {own},"), &format!("address: {bad},"));
            assert_ne!(text, good("n1"));
            out.push((text, format!("nodes[{i}].address")));
        }
    }
    out
}

#[tokio::test]
async fn unusable_node_addresses_are_refused_and_the_good_file_applies_again() {
    require_root();
    let mut lab = lab().await;
    let good = good("n1");
    write(&lab.path, &good);
    let mut agent = Agent::start(&lab.n1, &lab.path, &lab.log);
    wait_status(&lab.n1, "started", |s| applied(s, &good));
    assert!(
        eventually(10, || ping(&lab.pod, "10.71.0.2")),
        "the pod reaches the remote range"
    );
    let original = kernel(&lab.n1);
    assert!(
        original.contains("10.71.0.0/16 via 240.18.0.1 dev liqo.vxlan"),
        "{original}"
    );
    for (round, (bad, field)) in unusable_addresses().into_iter().enumerate() {
        write(&lab.path, &bad);
        let st = wait_status(&lab.n1, &format!("{field} refused in\n{bad}"), |s| {
            s.reload
                .refused
                .as_ref()
                .is_some_and(|r| r.digest == digest(&bad))
        });
        let refused = st.reload.refused.as_ref().unwrap();
        assert_eq!(refused.field, field, "{bad}\n{refused:?}");
        assert!(applied(&st, &good) || round > 0, "{st:?}");
        assert_eq!(st.reload.apply_error, None, "{st:?}");
        let now = kernel(&lab.n1);
        assert!(
            now == original,
            "the kernel changed after refusing\n{bad}:\n{}",
            diff(&original, &now)
        );
        // The good file again (a new text, so that it is really applied).
        let again = format!("{good}# round {round}\n");
        write(&lab.path, &again);
        let st = wait_status(&lab.n1, "the good file applied again", |s| {
            applied(s, &again)
        });
        assert_eq!(st.reload.problem(), None, "{st:?}");
        let now = kernel(&lab.n1);
        assert!(now == original, "{}", diff(&original, &now));
        assert!(ping(&lab.pod, "10.71.0.2"), "after round {round}");
    }
    agent.stop();
    lab.gateway_agent.stop();
    drop(lab.dir);
}

/// What a valid but unusual file must leave in the kernel, besides being reported applied.
enum Expect {
    /// Applied, and the kernel state shows every one of these.
    Applied(&'static [&'static str]),
    /// The kernel refuses it: reported as an apply error naming this, and rolled back.
    ApplyFails(&'static str),
}

type Case = (&'static str, String, Expect);

/// Valid but unusual files for n1.
fn unusual() -> Vec<Case> {
    let g = good("n1");
    let n2 = "  - {name: n2, address: 172.18.0.3, podCIDR: 10.200.2.0/24}\n";
    let many: Vec<String> = (0..64).map(|i| format!("10.80.{i}.0/24")).collect();
    vec![
        (
            "a node leaves",
            g.replace(n2, ""),
            Expect::Applied(&["240.18.0.1 dev liqo.vxlan lladdr"]),
        ),
        (
            "a node joins",
            format!("{g}  - {{name: n3, address: 172.18.0.4, podCIDR: 10.200.3.0/24}}\n"),
            Expect::Applied(&["240.18.0.4 dev liqo.vxlan lladdr", "dst 172.18.0.4"]),
        ),
        (
            "this node alone, as its own gateway",
            "node: n1\ngateway: n1\nremoteCIDRs: [10.71.0.0/16]\nunderlayInterface: eth0\nnodes:\n  - {name: n1, address: 172.18.0.2, podCIDR: 10.200.1.0/24}\n".into(),
            Expect::Applied(&["iif liqo.host"]),
        ),
        (
            "the gateway moves to another node",
            g.replace("gateway: n0", "gateway: n2"),
            Expect::Applied(&["10.71.0.0/16 via 240.18.0.3 dev liqo.vxlan"]),
        ),
        (
            "the gateway moves here",
            g.replace("gateway: n0", "gateway: n1"),
            Expect::Applied(&[
                "iif liqo.host",
                "10.200.0.0/24 via 240.18.0.1 dev liqo.vxlan",
            ]),
        ),
        (
            "this node's address changes",
            g.replace("172.18.0.2,", "172.18.0.42,"),
            Expect::Applied(&["inet 240.18.0.42/8", "link/ether 02:4c:51:12:00:2a"]),
        ),
        (
            "the gateway node's address changes",
            g.replace("172.18.0.1,", "172.18.0.41,"),
            Expect::Applied(&[
                "10.71.0.0/16 via 240.18.0.41 dev liqo.vxlan",
                "dst 172.18.0.41",
            ]),
        ),
        (
            "another device name",
            format!("{g}device: liqo.vx2\n"),
            Expect::Applied(&[
                "liqo.vx2: <",
                "10.71.0.0/16 via 240.18.0.1 dev liqo.vx2",
            ]),
        ),
        (
            "another VNI",
            format!("{g}vni: 77\n"),
            Expect::Applied(&["vxlan id 77 "]),
        ),
        (
            "another port",
            format!("{g}port: 4999\n"),
            Expect::Applied(&["dstport 4999 "]),
        ),
        (
            "device, VNI and port at once",
            format!("{g}device: liqo.vx3\nvni: 16777215\nport: 1\n"),
            Expect::Applied(&["liqo.vx3: <", "vxlan id 16777215 ", "dstport 1 "]),
        ),
        (
            "the smallest MTU",
            format!("{g}mtu: 576\n"),
            Expect::Applied(&["liqo.vxlan: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 576 ", "onlink mtu 576"]),
        ),
        (
            "a small tunnel MTU",
            format!("{g}tunnelMTU: 1280\n"),
            Expect::Applied(&["onlink mtu 1280"]),
        ),
        (
            "no remote ranges",
            g.replace("remoteCIDRs: [10.71.0.0/16]", "remoteCIDRs: []"),
            Expect::Applied(&["240.18.0.1 dev liqo.vxlan lladdr"]),
        ),
        (
            "many remote ranges",
            g.replace(
                "remoteCIDRs: [10.71.0.0/16]",
                &format!("remoteCIDRs: [10.71.0.0/16, {}]", many.join(", ")),
            ),
            Expect::Applied(&[
                "from all lookup 18952",
                "10.80.63.0/24 via 240.18.0.1",
                "10.80.0.0/24 via 240.18.0.1",
            ]),
        ),
        (
            "no underlay interface",
            g.replace("underlayInterface: eth0\n", ""),
            Expect::Applied(&["10.71.0.0/16 via 240.18.0.1 dev liqo.vxlan"]),
        ),
        (
            "an MTU larger than the underlay allows",
            format!("{g}mtu: 9000\n"),
            Expect::ApplyFails("mtu"),
        ),
    ]
}

/// Whether the case changes the VXLAN device's source address or underlay interface, which the
/// agent does not converge yet (see the ignored test).
fn changes_identity(what: &str) -> bool {
    what == "this node's address changes" || what == "no underlay interface"
}

/// Valid files the agent cannot cope with yet (see the test using them).
fn not_converged() -> Vec<Case> {
    let g = good("n1");
    vec![
        (
            "this node's address changes (the VXLAN source)",
            g.replace("172.18.0.2,", "172.18.0.42,"),
            Expect::Applied(&["local 172.18.0.42 "]),
        ),
        (
            "an underlay interface that does not exist",
            g.replace("underlayInterface: eth0", "underlayInterface: nope0"),
            Expect::ApplyFails("nope0"),
        ),
        (
            "the device named like another link (the pod's veth)",
            format!("{g}device: p0\n"),
            Expect::ApplyFails("p0"),
        ),
    ]
}

/// Writes each case, checks it took effect (or failed and was rolled back), then writes the good
/// file again (a new text, so that it is really applied) and checks the original state and
/// traffic are back. `cold`: the agent is restarted on each case's file first, so the good file
/// has to converge from what a fresh start built. Returns what went wrong.
fn series(lab: &Lab, agent: &mut Agent, cases: Vec<Case>, cold: bool) -> Vec<String> {
    let good = good("n1");
    let original = kernel(&lab.n1);
    let mut failures = Vec::new();
    for (what, text, expect) in cases {
        assert!(
            overlay::config::File::parse(&text)
                .and_then(|f| f.validate())
                .is_ok(),
            "{what}: the file must validate\n{text}"
        );
        let before = kernel(&lab.n1);
        write(&lab.path, &text);
        if cold {
            agent.stop();
            *agent = Agent::start(&lab.n1, &lab.path, &lab.log);
        }
        match expect {
            Expect::Applied(marks) => {
                let st = wait_status(&lab.n1, &format!("{what}: applied"), |s| {
                    applied(s, &text) || s.reload.problem().is_some()
                });
                let now = kernel(&lab.n1);
                let missing: Vec<&&str> = marks.iter().filter(|m| !now.contains(**m)).collect();
                if !applied(&st, &text) {
                    failures.push(format!("{what}: not applied: {:?}", st.reload.problem()));
                } else if !missing.is_empty() {
                    failures.push(format!(
                        "{what}: reported applied, but the kernel lacks {missing:?}:\n{}",
                        diff(&original, &now)
                    ));
                }
            }
            Expect::ApplyFails(mention) => {
                let st = wait_status(&lab.n1, &format!("{what}: fails to apply"), |s| {
                    s.reload
                        .apply_error
                        .as_ref()
                        .is_some_and(|f| f.digest == digest(&text))
                        || applied(s, &text)
                        || s.reload.refused.is_some()
                        || (cold && s.reload.applied.is_none())
                });
                match &st.reload.apply_error {
                    Some(f) if f.error.contains(mention) => {}
                    _ => failures.push(format!(
                        "{what}: expected a kernel error naming {mention:?}, got {:?}",
                        st.reload
                    )),
                }
                let now = kernel(&lab.n1);
                if !cold && now != before {
                    failures.push(format!(
                        "{what}: the failed change was not rolled back:\n{}",
                        diff(&before, &now)
                    ));
                }
            }
        }
        let again = format!("{good}# after {what}\n");
        write(&lab.path, &again);
        let st = wait_status(&lab.n1, &format!("after {what}: the good file"), |s| {
            applied(s, &again)
                || s.reload
                    .apply_error
                    .as_ref()
                    .is_some_and(|f| f.digest == digest(&again) && f.attempts >= 3)
        });
        if !applied(&st, &again) || st.reload.problem().is_some() {
            failures.push(format!(
                "after {what}: the good file does not apply: {:?}",
                st.reload
            ));
            // Nothing further would mean anything.
            break;
        }
        let now = kernel(&lab.n1);
        if now != original {
            failures.push(format!(
                "after {what}: the good file left another state than it built at first:\n{}",
                diff(&original, &now)
            ));
        }
        if !eventually(5, || ping(&lab.pod, "10.71.0.2")) {
            failures.push(format!(
                "after {what}: the pod no longer reaches the remote range"
            ));
        }
    }
    failures
}

/// The lab with the agent under test started on the good file, its traffic flowing.
async fn started() -> (Lab, Agent) {
    let lab = lab().await;
    let good = good("n1");
    write(&lab.path, &good);
    let agent = Agent::start(&lab.n1, &lab.path, &lab.log);
    wait_status(&lab.n1, "started", |s| applied(s, &good));
    assert!(
        eventually(10, || ping(&lab.pod, "10.71.0.2")),
        "the pod reaches the remote range"
    );
    (lab, agent)
}

#[tokio::test]
async fn after_any_valid_file_the_good_one_applies_again() {
    require_root();
    let (mut lab, mut agent) = started().await;
    let failures = series(&lab, &mut agent, unusual(), false);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The same from a fresh start on each file (restarts skip the kernel's refusal: a start
    // that fails is the daemon's exit, not a state to recover from).
    let cases = unusual()
        .into_iter()
        .filter(|(what, _, e)| matches!(e, Expect::Applied(_)) && !changes_identity(what))
        .collect();
    let failures = series(&lab, &mut agent, cases, true);
    assert!(
        failures.is_empty(),
        "cold starts:\n{}",
        failures.join("\n\n")
    );
    agent.stop();
    lab.gateway_agent.stop();
    drop(lab.dir);
}

/// Valid files the agent applies today without converging to them, or by destroying a link it
/// does not own: the VXLAN device is recreated only when its VNI or port changes (not its
/// source address or underlay interface), so an agent started with a wrong own address keeps
/// sending from it after the good file is applied (traffic stays broken); and any existing link
/// with the device's name is deleted and replaced, whatever it is (here the pod's veth, which
/// the good file cannot bring back). The fix belongs in `overlay::agent::apply` and the VXLAN
/// identity that `dataplane` reads back; see issue 11, defect 1.
#[tokio::test]
async fn valid_files_converge_and_never_take_over_another_link() {
    require_root();
    let (mut lab, mut agent) = started().await;
    let mut failures = series(&lab, &mut agent, not_converged(), false);
    let cold = not_converged()
        .into_iter()
        .chain(
            unusual()
                .into_iter()
                .filter(|(what, ..)| changes_identity(what)),
        )
        .filter(|(_, _, e)| matches!(e, Expect::Applied(_)))
        .collect();
    failures.extend(series(&lab, &mut agent, cold, true));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    agent.stop();
    lab.gateway_agent.stop();
    drop(lab.dir);
}

/// A reload that changes nothing of the device keeps its neighbours: the kernel flushes a
/// device's neighbours (permanent ones included) whenever its hardware address is set, even to
/// the same value, so an agent that sets it on every apply drops traffic to the overlay until
/// it re-adds them, on every reload.
#[tokio::test]
async fn a_reload_keeps_the_neighbours_in_place() {
    require_root();
    let (mut lab, mut agent) = started().await;
    let events = lab.dir.0.join("monitor.log");
    let mut monitor = Spec::new("ip", "ip", &events)
        .args(["-o", "monitor", "neigh"])
        .netns(&lab.n1)
        .kill_on_drop()
        .attached()
        .expect("starting ip monitor");
    // Let the monitor subscribe before the change.
    thread::sleep(Duration::from_millis(300));
    let text = format!(
        "{}remoteCIDRs: [10.71.0.0/16, 10.90.0.0/16]\n",
        good("n1").replace("remoteCIDRs: [10.71.0.0/16]\n", "")
    );
    write(&lab.path, &text);
    wait_status(&lab.n1, "a remote range added", |s| applied(s, &text));
    thread::sleep(Duration::from_millis(300));
    monitor.kill().expect("stopping ip monitor");
    let events = std::fs::read_to_string(&events).unwrap();
    let deleted: Vec<&str> = events
        .lines()
        .filter(|l| l.starts_with("Deleted") && l.contains("liqo.vxlan"))
        .collect();
    assert!(
        deleted.is_empty(),
        "neighbours flushed by a reload:\n{}",
        deleted.join("\n")
    );
    agent.stop();
    lab.gateway_agent.stop();
    drop(lab.dir);
}
