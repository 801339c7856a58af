//! The plumbing that lets a pod's command line run as a local process (pure): the parts of an
//! argument that name the pod network (`0.0.0.0:<container port>`, a Service's `host:port`) or
//! the pod's filesystem (a volume's mount path) are replaced by their local equivalents, and
//! `$(VAR)` references are expanded as the kubelet does. Everything else is the chart's,
//! verbatim.

use std::collections::BTreeMap;

/// What an argument's plumbing is replaced with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plumbing {
    /// The container's environment, resolved (for `$(VAR)`).
    pub env: BTreeMap<String, String>,
    /// Each volume's mount path and the local directory holding its files.
    pub mounts: Vec<(String, String)>,
    /// Container ports served on `0.0.0.0:<port>` and the loopback port they get.
    pub listens: BTreeMap<u16, u16>,
    /// Service addresses (every name a pod may use, and the Service's port) and the loopback
    /// port of the process behind them.
    pub services: BTreeMap<(String, u16), u16>,
    /// Ports the pod's containers use on their shared loopback (`127.0.0.1:<port>`) and the
    /// host's loopback port each gets.
    pub loopbacks: BTreeMap<u16, u16>,
}

impl Plumbing {
    /// `arg` with its plumbing replaced.
    pub fn arg(&self, arg: &str) -> String {
        let mut out = expand(arg, &self.env);
        // Longest mount path first: a nested mount wins over its parent.
        let mut mounts: Vec<&(String, String)> = self.mounts.iter().collect();
        mounts.sort_by_key(|(m, _)| std::cmp::Reverse(m.len()));
        for (mount, local) in mounts {
            out = replace_bounded(&out, mount, local, |next| next.is_none_or(|c| c == '/'));
        }
        for (port, local) in &self.listens {
            out = replace_bounded(
                &out,
                &format!("0.0.0.0:{port}"),
                &format!("127.0.0.1:{local}"),
                |next| next.is_none_or(|c| !c.is_ascii_digit()),
            );
        }
        for (port, local) in &self.loopbacks {
            out = replace_bounded(
                &out,
                &format!("127.0.0.1:{port}"),
                &format!("127.0.0.1:{local}"),
                |next| next.is_none_or(|c| !c.is_ascii_digit()),
            );
        }
        for ((host, port), local) in &self.services {
            out = replace_host_port(&out, host, *port, *local);
        }
        out
    }
}

/// Replaces each occurrence of `from` whose next character passes `ends` by `to`.
fn replace_bounded(s: &str, from: &str, to: &str, ends: impl Fn(Option<char>) -> bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(from) {
        let after = &rest[i + from.len()..];
        out.push_str(&rest[..i]);
        out.push_str(if ends(after.chars().next()) { to } else { from });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `host:port` → `host:local` where `host` starts the argument, its value (after `=`) or a
/// URL's authority (after `//`), and the port is whole.
fn replace_host_port(s: &str, host: &str, port: u16, local: u16) -> String {
    let from = format!("{host}:{port}");
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut before: Option<char> = None;
    while let Some(i) = rest.find(&from) {
        let prev = rest[..i].chars().next_back().or(before);
        let after = &rest[i + from.len()..];
        let starts = matches!(prev, None | Some('=' | '/' | ','));
        let whole = after.chars().next().is_none_or(|c| !c.is_ascii_digit());
        out.push_str(&rest[..i]);
        if starts && whole {
            out.push_str(&format!("{host}:{local}"));
        } else {
            out.push_str(&from);
        }
        before = from.chars().next_back();
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The ports `args` use on the pod's loopback (`127.0.0.1:<port>`).
pub(super) fn loopback_ports<S: AsRef<str>>(args: &[S]) -> std::collections::BTreeSet<u16> {
    let mut out = std::collections::BTreeSet::new();
    for a in args {
        let mut rest = a.as_ref();
        while let Some(i) = rest.find("127.0.0.1:") {
            rest = &rest[i + "127.0.0.1:".len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(p) = digits.parse() {
                out.insert(p);
            }
        }
    }
    out
}

/// Kubernetes' expansion of `$(VAR)` in a command line: a defined variable is replaced, `$$`
/// is a literal `$`, an undefined reference stays as written.
pub(super) fn expand(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some((name, tail)) = after
            .strip_prefix('(')
            .and_then(|r| r.split_once(')'))
            .filter(|(name, _)| env.contains_key(*name))
        {
            out.push_str(&env[name]);
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The names a pod of namespace `ns` reaches Service `svc` of `ns` by.
pub(super) fn service_names(svc: &str, ns: &str) -> [String; 4] {
    [
        svc.to_owned(),
        format!("{svc}.{ns}"),
        format!("{svc}.{ns}.svc"),
        format!("{svc}.{ns}.svc.cluster.local"),
    ]
}

/// A hosts file sending `localhost` and every one of `names` to 127.0.0.1.
pub(super) fn hosts<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    let mut out = String::from("127.0.0.1 localhost\n");
    for n in names {
        out.push_str(&format!("127.0.0.1 {n}\n"));
    }
    out
}

/// The program an image runs, by the project's naming (`<registry>/<prefix>/<program>:<tag>`,
/// or `@<digest>`).
pub(super) fn program_of(image: &str) -> Option<&str> {
    let last = image.rsplit('/').next()?;
    let name = last.split(['@', ':']).next()?;
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plumbing() -> Plumbing {
        Plumbing {
            env: [("POD_IP".to_owned(), "127.0.0.1".to_owned())].into(),
            mounts: vec![
                ("/etc/liqo/ipam".into(), "/tmp/c/pods/m/ipam".into()),
                ("/etc/liqo".into(), "/tmp/c/pods/m/all".into()),
            ],
            listens: [(9443, 31001), (6000, 31002)].into(),
            services: service_names("liqo-ipam", "liqo")
                .into_iter()
                .map(|n| ((n, 6000), 31002))
                .collect(),
            loopbacks: [(9110, 31003)].into(),
        }
    }

    #[test]
    fn only_the_plumbing_of_an_argument_changes() {
        let p = plumbing();
        let cases = [
            (
                "--webhook-listen=0.0.0.0:9443",
                "--webhook-listen=127.0.0.1:31001",
            ),
            (
                "--metrics-listen=0.0.0.0:94430",
                "--metrics-listen=0.0.0.0:94430",
            ),
            (
                "--ipam-address=https://liqo-ipam.liqo:6000",
                "--ipam-address=https://liqo-ipam.liqo:31002",
            ),
            (
                "--ipam-address=https://other-liqo-ipam.liqo:6000",
                "--ipam-address=https://other-liqo-ipam.liqo:6000",
            ),
            (
                "--ipam-address=https://liqo-ipam.liqo:60001",
                "--ipam-address=https://liqo-ipam.liqo:60001",
            ),
            (
                "--ipam-ca-file=/etc/liqo/ipam/ca.crt",
                "--ipam-ca-file=/tmp/c/pods/m/ipam/ca.crt",
            ),
            (
                "--ca=/etc/liqo/kube-root-ca/ca.crt",
                "--ca=/tmp/c/pods/m/all/kube-root-ca/ca.crt",
            ),
            (
                "--ipam-ca-file=/etc/liqo/ipamx/ca.crt",
                "--ipam-ca-file=/tmp/c/pods/m/all/ipamx/ca.crt",
            ),
            (
                "--virtual-kubelet-node-ip=$(POD_IP)",
                "--virtual-kubelet-node-ip=127.0.0.1",
            ),
            (
                "--resource-sharing-percentage=30",
                "--resource-sharing-percentage=30",
            ),
            ("serve", "serve"),
            (
                "--metrics-listen=127.0.0.1:9110",
                "--metrics-listen=127.0.0.1:31003",
            ),
            (
                "--status-url=http://127.0.0.1:91100/x",
                "--status-url=http://127.0.0.1:91100/x",
            ),
        ];
        for (arg, want) in cases {
            assert_eq!(p.arg(arg), want, "{arg}");
        }
    }

    #[test]
    fn loopback_ports_are_found() {
        let ports = loopback_ports(&[
            "--a=127.0.0.1:9110",
            "http://127.0.0.1:9107/status",
            "127.0.0.1:x",
        ]);
        assert_eq!(ports.into_iter().collect::<Vec<_>>(), [9107, 9110]);
    }

    #[test]
    fn expansion_follows_kubernetes() {
        let env: BTreeMap<String, String> = [("A".to_owned(), "x".to_owned())].into();
        assert_eq!(expand("$(A)-$(A)", &env), "x-x");
        assert_eq!(expand("$$(A)", &env), "$(A)");
        assert_eq!(expand("$(B) $ $(A", &env), "$(B) $ $(A");
    }

    #[test]
    fn names_hosts_and_programs() {
        let names = service_names("liqo-ipam", "liqo");
        assert_eq!(names[3], "liqo-ipam.liqo.svc.cluster.local");
        let h = hosts(names.iter());
        assert!(h.starts_with("127.0.0.1 localhost\n"), "{h}");
        assert!(h.contains("127.0.0.1 liqo-ipam.liqo\n"), "{h}");
        assert_eq!(
            program_of("ghcr.io/liqo-rs/liqo-ipam:0.1.0"),
            Some("liqo-ipam")
        );
        assert_eq!(
            program_of("reg:5000/x/liqo-auth@sha256:ab"),
            Some("liqo-auth")
        );
        assert_eq!(program_of("liqo-proxy"), Some("liqo-proxy"));
        assert_eq!(program_of("ghcr.io/x/"), None);
    }
}
