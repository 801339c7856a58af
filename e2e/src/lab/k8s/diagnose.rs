//! What a lab's clusters show when something did not come up in time ([`K8sLab::diagnose`]):
//! the peerings, the network objects, Liqo's pods with their restarts, the warning events and,
//! on a lab from the chart, the last lines of every Liqo container's log (and of the previous
//! run of a restarted one); with real nodes, the API server's refused dials into the lab (its
//! egress proxy's log: the API server only says "502"). Read-only: it never changes the lab.

use super::K8sLab;

/// The last lines of each container's log printed.
const TAIL: &str = "--tail=25";

impl K8sLab {
    /// The report above for `clusters`; a command that fails is named with its error in the
    /// text (a diagnosis never hides what it could not read).
    pub fn diagnose(&self, clusters: &[&str]) -> String {
        let mut out = self.gist(clusters);
        for c in clusters {
            let mut run = |args: &[&str]| {
                out.push_str(&format!("\n== kubectl --context {c} {}\n", args.join(" ")));
                let args: Vec<&str> = args.iter().copied().chain([REQUEST_TIMEOUT]).collect();
                match self.tool("kubectl", c, &args) {
                    Ok(o) => {
                        out.push_str(&String::from_utf8_lossy(&o.stdout));
                        out.push_str(&String::from_utf8_lossy(&o.stderr));
                    }
                    Err(e) => out.push_str(&format!("(not run: {e})\n")),
                }
            };
            run(&["get", "foreignclusters", "-o", "wide"]);
            run(&["get", "networkconfigs,tunnelendpoints", "-A", "-o", "wide"]);
            run(&["-n", "liqo", "get", "pods", "-o", "wide"]);
            run(&[
                "get",
                "events",
                "-A",
                "--field-selector=type=Warning",
                "--sort-by=.lastTimestamp",
            ]);
            if !super::is_chart(&self.lab.prefix) {
                continue;
            }
            for (pod, container, restarts) in self.liqo_containers(c) {
                let mut args = vec!["-n", "liqo", "logs", pod.as_str(), "-c", container.as_str()];
                args.push(TAIL);
                run(&args);
                if restarts > 0 {
                    args.push("--previous");
                    run(&args);
                }
            }
        }
        out
    }

    /// The short of it, first (a CI summary keeps a panic's first lines): per cluster, the
    /// Liqo containers that restarted (chart labs), the API server's refused dials into the
    /// lab and the last warnings.
    fn gist(&self, clusters: &[&str]) -> String {
        let mut out = String::new();
        for c in clusters {
            if super::is_chart(&self.lab.prefix) {
                let restarted: Vec<String> = self
                    .liqo_containers(c)
                    .into_iter()
                    .filter(|(_, _, n)| *n > 0)
                    .map(|(pod, container, n)| format!("{pod}/{container} {n}x"))
                    .collect();
                out.push_str(&format!(
                    "== {c}: Liqo containers restarted: {}\n",
                    if restarted.is_empty() {
                        "none".to_owned()
                    } else {
                        restarted.join(", ")
                    }
                ));
            }
            out.push_str(&self.egress_failures(c));
            let warnings = self.tool_ok(
                "kubectl",
                c,
                &[
                    "get",
                    "events",
                    "-A",
                    "--field-selector=type=Warning",
                    // Not .lastTimestamp: events written through events.k8s.io (the
                    // scheduler's) have none, and kubectl sorts them first.
                    "--sort-by=.metadata.creationTimestamp",
                    "--no-headers",
                    "-o",
                    "custom-columns=AT:.metadata.creationTimestamp,OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message",
                    REQUEST_TIMEOUT,
                ],
            );
            match warnings {
                Ok(text) => {
                    let last = last_lines(&text, WARNINGS);
                    if !last.is_empty() {
                        out.push_str(&format!("== {c}: the last warnings\n{last}\n"));
                    }
                }
                Err(e) => out.push_str(&format!("== {c}: warnings unread: {e}\n")),
            }
        }
        out
    }

    /// The last dials the API server's egress proxy of `cluster` refused, with why (none
    /// without real nodes: there is no such proxy).
    fn egress_failures(&self, cluster: &str) -> String {
        let Some(c) = self.lab.topology.cluster(cluster) else {
            return String::new();
        };
        let node = super::relay::api_node(c).name.as_str();
        let log = super::fabric::Paths::of(&self.lab, c).log("relay", node);
        let Ok(text) = std::fs::read_to_string(&log) else {
            return String::new();
        };
        let failed = egress_lines(&text);
        if failed.is_empty() {
            return String::new();
        }
        format!(
            "\n== the API server's dials into {cluster} refused ({})\n{}\n",
            log.display(),
            failed.join("\n")
        )
    }

    /// Every container of Liqo's pods on `cluster`, with its restarts (none when they cannot
    /// be listed: the pods' listing above says why).
    fn liqo_containers(&self, cluster: &str) -> Vec<(String, String, u32)> {
        let Ok(text) = self.tool_ok(
            "kubectl",
            cluster,
            &[
                "-n",
                "liqo",
                "get",
                "pods",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}{range .status.containerStatuses[*]}{' '}{.name}={.restartCount}{end}{'\\n'}{end}",
                REQUEST_TIMEOUT,
            ],
        ) else {
            return Vec::new();
        };
        parse_containers(&text)
    }
}

/// Lines `pod c1=N c2=M` into (pod, container, restarts).
fn parse_containers(text: &str) -> Vec<(String, String, u32)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(pod) = words.next() else { continue };
        for w in words {
            if let Some((c, n)) = w.split_once('=') {
                out.push((pod.to_owned(), c.to_owned(), n.parse().unwrap_or(0)));
            }
        }
    }
    out
}

/// The last [`EGRESS_LINES`] lines of a relay's log that say an egress dial failed.
fn egress_lines(log: &str) -> Vec<&str> {
    let failed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(super::egress::DIAL_FAILED))
        .collect();
    failed[failed.len().saturating_sub(EGRESS_LINES)..].to_vec()
}

/// A test's guard: dropped during a panic (whatever assertion failed), it prints the
/// diagnosis of its clusters, so the lab's state is in the test's output next to the panic.
/// Made after the lab's teardown guard, it is dropped before it (while the lab still runs);
/// drop it before tearing the lab down explicitly.
///
/// The panic's message and place are printed again after the diagnosis: a CI summary that
/// keeps an output's head and tail would otherwise lose them in the middle, between the test's
/// own lines and a diagnosis of hundreds.
pub struct DiagnoseOnPanic<'a> {
    lab: &'a K8sLab,
    clusters: &'a [&'a str],
}

impl<'a> DiagnoseOnPanic<'a> {
    /// The guard of `clusters` of `lab`.
    pub fn new(lab: &'a K8sLab, clusters: &'a [&'a str]) -> Self {
        remember_panics();
        // A panic caught earlier on this thread is not this test's.
        LAST_PANIC.take();
        DiagnoseOnPanic { lab, clusters }
    }
}

impl Drop for DiagnoseOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let why = LAST_PANIC
                .take()
                .unwrap_or_else(|| "(its message was not recorded)".to_owned());
            eprintln!(
                "== the lab when the test failed\n{}\n== the test failed: {why}",
                self.lab.diagnose(self.clusters)
            );
        }
    }
}

thread_local! {
    /// The place and message of the last panic on this thread (a test's own thread). A panic
    /// passed on by `resume_unwind` does not run the hook: its text stays unrecorded.
    static LAST_PANIC: std::cell::Cell<Option<String>> = const { std::cell::Cell::new(None) };
    /// How many panics this thread's hook recorded.
    static RECORDED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Installs, once per process, a panic hook that records each panic's place and message in
/// [`LAST_PANIC`] before the hook that was there (libtest's capture prints it as before).
fn remember_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            LAST_PANIC.set(Some(panic_text(info)));
            RECORDED.set(RECORDED.get() + 1);
            before(info);
        }));
    });
}

/// "at file:line:col: message", the message cut at 2,000 characters.
fn panic_text(info: &std::panic::PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic without a text message)".to_owned());
    let at = info
        .location()
        .map(|l| format!("at {}:{}:{}: ", l.file(), l.line(), l.column()))
        .unwrap_or_default();
    format!("{at}{}", message.chars().take(2000).collect::<String>())
}

/// The last `n` non-empty lines of `text`, each cut at 300 characters.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.chars().take(300).collect())
        .collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A diagnosis never waits long for an API server that accepts and does not answer.
const REQUEST_TIMEOUT: &str = "--request-timeout=20s";

/// How many warnings the gist shows per cluster.
const WARNINGS: usize = 6;

/// How many refused egress dials are shown.
const EGRESS_LINES: usize = 10;

#[cfg(test)]
mod tests {
    #[test]
    fn a_panic_is_remembered_with_its_place_and_message() {
        super::remember_panics();
        let line = line!() + 1;
        let r = std::panic::catch_unwind(|| panic!("the claim {} is not bound", "data"));
        assert!(r.is_err());
        let why = super::LAST_PANIC.take().expect("recorded");
        assert!(why.starts_with(&format!("at {}:{line}:", file!())), "{why}");
        assert!(why.ends_with(": the claim data is not bound"), "{why}");
        // A second guard installs no second hook: one panic, one record.
        super::remember_panics();
        let before = super::RECORDED.get();
        assert!(std::panic::catch_unwind(|| panic!("plain")).is_err());
        assert_eq!(super::RECORDED.get(), before + 1);
        let why = super::LAST_PANIC.take().unwrap_or_default();
        assert!(why.ends_with(": plain"), "{why}");
    }

    #[test]
    fn the_last_lines_are_kept_cut() {
        let long = "x".repeat(400);
        let text = format!("a\n\nb\n{long}\n");
        assert_eq!(super::last_lines(&text, 2), format!("b\n{}", &long[..300]));
        assert_eq!(super::last_lines("", 3), "");
    }

    #[test]
    fn the_last_refused_dials_are_kept() {
        let mut log = String::from("starting\n");
        for i in 0..12 {
            log.push_str(&format!(
                "WARN an egress dial failed to=10.0.0.{i} why=refused\n"
            ));
            log.push_str("INFO other\n");
        }
        let got = super::egress_lines(&log);
        assert_eq!(got.len(), super::EGRESS_LINES);
        assert!(got[0].contains("10.0.0.2 "), "{got:?}");
        assert!(got[9].contains("10.0.0.11 "), "{got:?}");
        assert!(super::egress_lines("nothing\n").is_empty());
    }

    #[test]
    fn containers_and_restarts_are_read_per_pod() {
        let got = super::parse_containers(
            "liqo-gateway-1 gateway=0 gateway-operator=2\nliqo-ipam-2 ipam=0\n\n",
        );
        assert_eq!(
            got,
            vec![
                ("liqo-gateway-1".into(), "gateway".into(), 0),
                ("liqo-gateway-1".into(), "gateway-operator".into(), 2),
                ("liqo-ipam-2".into(), "ipam".into(), 0),
            ]
        );
    }
}
