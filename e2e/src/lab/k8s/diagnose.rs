//! What a lab's clusters show when something did not come up in time ([`K8sLab::diagnose`]):
//! the peerings, the network objects, Liqo's pods with their restarts, the warning events and,
//! on a lab from the chart, the last lines of every Liqo container's log (and of the previous
//! run of a restarted one). Read-only: it never changes the lab.

use super::K8sLab;

/// The last lines of each container's log printed.
const TAIL: &str = "--tail=25";

impl K8sLab {
    /// The report above for `clusters`; a command that fails is named with its error in the
    /// text (a diagnosis never hides what it could not read).
    pub fn diagnose(&self, clusters: &[&str]) -> String {
        let mut out = String::new();
        for c in clusters {
            let mut run = |args: &[&str]| {
                out.push_str(&format!("\n== kubectl --context {c} {}\n", args.join(" ")));
                match self.tool("kubectl", c, args) {
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

#[cfg(test)]
mod tests {
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
