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
    /// `arg` with its plumbing replaced (each part only where it starts the argument, its
    /// value after `=`, a list item after `,` or, for an address, a URL's authority after
    /// `//`, and only when whole).
    pub fn arg(&self, arg: &str) -> String {
        let mut out = expand(arg, &self.env);
        // Longest mount path first: a nested mount wins over its parent.
        let mut mounts: Vec<&(String, String)> = self.mounts.iter().collect();
        mounts.sort_by_key(|(m, _)| std::cmp::Reverse(m.len()));
        for (mount, local) in mounts {
            out = replace(&out, mount, local, value_start, |c| {
                c.is_none_or(|c| c == '/')
            });
        }
        let addresses = self
            .listens
            .iter()
            .map(|(p, l)| (format!("0.0.0.0:{p}"), format!("127.0.0.1:{l}")))
            .chain(
                self.loopbacks
                    .iter()
                    .map(|(p, l)| (format!("127.0.0.1:{p}"), format!("127.0.0.1:{l}"))),
            )
            .chain(
                self.services
                    .iter()
                    .map(|((h, p), l)| (format!("{h}:{p}"), format!("{h}:{l}"))),
            );
        for (from, to) in addresses {
            out = replace(&out, &from, &to, address_start, port_end);
        }
        out
    }
}

/// Where a path may start: the argument, its value, a list item.
fn value_start(prev: Option<char>) -> bool {
    matches!(prev, None | Some('=' | ','))
}

/// Where an address may start: as a path, or a URL's authority.
fn address_start(prev: Option<char>) -> bool {
    value_start(prev) || prev == Some('/')
}

/// A port ends where no digit follows.
fn port_end(next: Option<char>) -> bool {
    next.is_none_or(|c| !c.is_ascii_digit())
}

/// Replaces each occurrence of `from` in `s` whose previous character passes `starts` and
/// next character passes `ends` by `to`, in one pass (a replacement is never read again by
/// this call).
fn replace(
    s: &str,
    from: &str,
    to: &str,
    starts: impl Fn(Option<char>) -> bool,
    ends: impl Fn(Option<char>) -> bool,
) -> String {
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    while let Some(i) = s[at..].find(from) {
        let i = at + i;
        let prev = s[..i].chars().next_back();
        let next = s[i + from.len()..].chars().next();
        out.push_str(&s[at..i]);
        if starts(prev) && ends(next) {
            out.push_str(to);
        } else {
            out.push_str(from);
        }
        at = i + from.len();
    }
    out.push_str(&s[at..]);
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
            ("--listen=10.0.0.0:9443", "--listen=10.0.0.0:9443"),
            ("--file=/x/etc/liqo/ipam/a", "--file=/x/etc/liqo/ipam/a"),
            (
                "--files=/etc/liqo/ipam/a,/etc/liqo/b",
                "--files=/tmp/c/pods/m/ipam/a,/tmp/c/pods/m/all/b",
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
