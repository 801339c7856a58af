//! The report core every bench's report is built on, defined once: the [`Header`] (when, the
//! command line, the [`Machine`], the [`Tool`]s with their versions and the [`Install`]s, the
//! background [`Load`]), [`Spread`] (median and range of samples), [`ratio`] and [`Target`];
//! [`render`] lays them out for people. Pure but for [`Header::now`], [`Machine::read`] and
//! [`Tool::probe`], which read the machine. A family's own fields stay in its report, beside the
//! header.

mod machine;
pub mod render;
mod spread;
mod target;
mod tools;

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use machine::{Machine, cpu_model, mem_total_kib};
pub use spread::{Spread, ratio};
pub use target::Target;
pub use tools::{Install, Tool, liqo_tools};

use crate::parse::utc_date;

/// How and on what a run was done, whatever the bench.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// When it started (UTC).
    pub date: String,
    /// The command line that ran it, program first.
    pub command: Vec<String>,
    /// The machine.
    pub machine: Machine,
    /// The tools and our binaries that took part, with their versions.
    pub tools: Vec<Tool>,
    /// What was installed (or found installed) before measuring, and how long it took.
    pub installs: Vec<Install>,
    /// The background CPU load seen before each test.
    pub load: Load,
}

impl Header {
    /// The header of a run starting now on this machine, by this process's command line; no
    /// tools, installs or load yet.
    pub fn now() -> Header {
        Header {
            date: utc_date(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
            ),
            command: std::env::args().collect(),
            machine: Machine::read(),
            tools: Vec::new(),
            installs: Vec::new(),
            load: Load::default(),
        }
    }

    /// Whether one of our binaries that took part is a debug build (its figures are not final).
    pub fn debug_build(&self) -> bool {
        self.tools.iter().any(Tool::is_debug_build)
    }

    /// The note a report gives when [`Header::debug_build`] (none otherwise).
    pub fn debug_note(&self) -> Option<String> {
        self.debug_build().then(|| {
            "our binaries are DEBUG builds: the figures are not final (build with --release \
             and set LIQO_BIN_DIR to target/release)"
                .to_owned()
        })
    }

    /// The command line as a shell would take it (arguments with spaces quoted).
    pub fn command_line(&self) -> String {
        self.command
            .iter()
            .map(|a| {
                if a.is_empty() || a.contains(char::is_whitespace) {
                    format!("'{a}'")
                } else {
                    a.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Background CPU load (other users of the machine) seen when the tests started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Load {
    /// The highest load at the start of a test, percent.
    pub max_pct: f64,
    /// Time spent waiting for it to drop, seconds.
    pub wait_secs: f64,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A header as a run on a 2-CPU machine would have it, with one tool and one install.
    pub(crate) fn header() -> Header {
        Header {
            date: "2026-11-21 18:04 UTC".into(),
            command: vec!["liqo-bench".into(), "tunnel".into()],
            machine: Machine {
                kernel: "6.18.44".into(),
                cpus: 2,
                cpu_model: "AMD EPYC".into(),
                memory_mib: 3902,
            },
            tools: vec![Tool {
                name: "boringtun-cli".into(),
                path: "/var/cache/liqo-lab/bench/bin/boringtun-cli".into(),
                version: "boringtun 0.7.1".into(),
            }],
            installs: vec![Install {
                what: "boringtun-cli 0.7.1 (cargo install)".into(),
                action: "built".into(),
                secs: 66.25,
            }],
            load: Load {
                max_pct: 3.0,
                wait_secs: 0.0,
            },
        }
    }

    #[test]
    fn now_is_this_process_on_this_machine_and_debug_builds_are_seen() {
        let h = Header::now();
        assert!(h.date.ends_with(" UTC"), "{h:?}");
        assert!(!h.command.is_empty() && h.machine.cpus >= 1, "{h:?}");
        let mut h = header();
        h.command.push("--variants".into());
        h.command.push("plain ours".into());
        assert_eq!(
            h.command_line(),
            "liqo-bench tunnel --variants 'plain ours'"
        );
        assert!(!h.debug_build());
        h.tools[0].path = "/src/target/debug/liqo-gateway".into();
        assert!(h.debug_build());
    }
}
