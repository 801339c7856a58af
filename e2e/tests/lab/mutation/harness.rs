//! The mutation run's harness: a daemon started from its binary inside a test namespace, its
//! `/status` read typed, waits on the digest of the text written, and a dump of the kernel
//! state of the namespaces it owns (every command's exit status checked).

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use dataplane::{
    Netns,
    supervisor::{Attached, Spec},
};
use liqo_daemon::{ReloadStatus, digest};
use serde::de::DeserializeOwned;

/// A workspace binary (built next to this test's executable by `cargo test --workspace`).
pub fn bin(name: &str) -> PathBuf {
    e2e::lab::bin(name).unwrap_or_else(|e| panic!("{e}"))
}

/// A daemon process, killed on drop (its own SIGTERM teardown is exercised elsewhere; the
/// namespaces are removed by the caller's guard afterwards).
pub struct Proc(Attached);

impl Proc {
    /// Starts `program args` inside `ns` with output to a fresh `log`.
    pub fn spawn(name: &str, ns: &Netns, program: &Path, args: &[&str], log: PathBuf) -> Proc {
        let child = Spec::new(name, program, log)
            .args(args)
            .netns(ns)
            .truncate_log()
            .kill_on_drop()
            .attached()
            .expect("starting the daemon");
        Proc(child)
    }

    /// Panics with the log's end if the daemon exited.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.0.exited().expect("try_wait") {
            panic!(
                "{} exited ({status}); log:\n    {}",
                self.0.label,
                self.0.tail(20)
            );
        }
    }
}

/// `GET path` on `addr` inside `ns`, decoded.
pub fn get<T: DeserializeOwned>(ns: &Netns, addr: &str, path: &str) -> Result<T, String> {
    let addr = addr.parse().expect("address");
    let body = ns
        .run(move || liqo_daemon::localhttp::get(addr, path))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&body).map_err(|e| format!("decoding {path}: {e}: {body}"))
}

/// What a daemon did with a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It runs it.
    Applied,
    /// It refused it, naming this field, with this problem.
    Refused(String, String),
    /// Applying it failed (kernel), with this error.
    Failed(String),
}

/// Waits until the reload block (from `reload`) reports what the daemon did with `text`.
pub fn settle(
    what: &str,
    text: &str,
    mut reload: impl FnMut() -> Result<ReloadStatus, String>,
) -> Outcome {
    let d = digest(text);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = String::new();
    while Instant::now() < deadline {
        match reload() {
            Ok(r) => {
                if let Some(x) = r.refused.as_ref().filter(|x| x.digest == d) {
                    return Outcome::Refused(x.field.clone(), x.problem.clone());
                }
                if let Some(x) = r.apply_error.as_ref().filter(|x| x.digest == d) {
                    return Outcome::Failed(x.error.clone());
                }
                if r.applied.as_ref().is_some_and(|a| a.digest == d) && r.problem().is_none() {
                    return Outcome::Applied;
                }
                last = format!("{r:?}");
            }
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    panic!("{what}: no outcome for digest {d} within 10 s; last status: {last}");
}

/// Writes `text` to `path` atomically (the daemons never see half a file).
pub fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// The kernel state of `ns` a daemon may touch: addresses, links, rules, routes of every table,
/// neighbours, forwarding entries and the nftables ruleset, as the tools print them.
pub fn kernel_state(ns: &Netns) -> String {
    let cmds: [&[&str]; 7] = [
        &["ip", "-d", "-o", "link", "show"],
        &["ip", "-o", "addr", "show"],
        &["ip", "rule", "show"],
        &["ip", "route", "show", "table", "all"],
        &["ip", "neigh", "show", "nud", "permanent"],
        &["bridge", "fdb", "show"],
        &["nft", "list", "ruleset"],
    ];
    let mut out = String::new();
    for cmd in cmds {
        let o = ns
            .command(cmd[0])
            .args(&cmd[1..])
            .output()
            .unwrap_or_else(|e| panic!("{cmd:?} in {}: {e}", ns.name()));
        assert!(
            o.status.success(),
            "{cmd:?} in {} failed: {}",
            ns.name(),
            String::from_utf8_lossy(&o.stderr)
        );
        out.push_str(&format!("## {}\n", cmd.join(" ")));
        let text = String::from_utf8_lossy(&o.stdout);
        let mut lines: Vec<&str> = text.lines().collect();
        if cmd[1] == "rule" {
            // Rules of one priority with disjoint selectors match the same packets in any
            // order; the order they were added in is not state.
            lines.sort_unstable();
        }
        for line in lines {
            // The kernel's own IPv6 work (duplicate address detection, link-local routes and
            // multicast entries) and a link's operational state change on their own; the
            // daemons manage IPv4 only.
            if ["inet6", "fe80:", "ff00::", "::1", "33:33:"]
                .iter()
                .any(|x| line.contains(x))
            {
                continue;
            }
            let line = match line.find(" state ") {
                Some(i) => {
                    let rest = &line[i + 7..];
                    let end = rest.find(' ').unwrap_or(rest.len());
                    format!("{}{}", &line[..i], &rest[end..])
                }
                None => line.to_owned(),
            };
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// A tally of a mutation run, printed at the end.
#[derive(Debug, Default)]
pub struct Tally {
    /// Mutations tried.
    pub tried: usize,
    /// Refused naming the expected field.
    pub refused: usize,
    /// Failures, one line each.
    pub failures: Vec<String>,
}

impl Tally {
    /// Records one mutation's result: `before` and `after` are the states around it.
    pub fn record(
        &mut self,
        label: &str,
        expect: &str,
        outcome: &Outcome,
        before: &str,
        after: &str,
    ) {
        self.tried += 1;
        match outcome {
            Outcome::Refused(field, _) if names(field, expect) && before == after => {
                self.refused += 1;
            }
            o => self.failures.push(format!(
                "{label}: expected a refusal naming {expect}, got {o:?}{}",
                if before == after {
                    String::new()
                } else {
                    format!(" and the state CHANGED:\n{}", diff(before, after))
                }
            )),
        }
    }
}

/// Whether a refusal on `field` names `expect`: the field itself, or a part of it
/// (`peers[2]` for `peers[2].id`), never merely a longer name (`mtu` is not `mtuX`).
pub fn names(field: &str, expect: &str) -> bool {
    field == expect
        || field
            .strip_prefix(expect)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// The lines only in `a` (`-`) and only in `b` (`+`).
pub fn diff(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let gone = la
        .iter()
        .filter(|l| !lb.contains(l))
        .map(|l| format!("    - {l}"));
    let new = lb
        .iter()
        .filter(|l| !la.contains(l))
        .map(|l| format!("    + {l}"));
    gone.chain(new).collect::<Vec<_>>().join("\n")
}
