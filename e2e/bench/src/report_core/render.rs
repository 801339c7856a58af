//! The report core for people: the header's lines, text tables, a [`Spread`] as
//! `median (min-max)`, one PASS or FAIL line per [`Target`], and the notes.

use super::{Header, Spread, Target};

/// A text table, columns two spaces apart: the first column left-aligned, the others
/// right-aligned (numbers) unless `all_left`.
fn table_aligned(rows: &[Vec<String>], all_left: bool) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            let sep = if c == 0 { "" } else { "  " };
            if c == 0 || all_left {
                line.push_str(&format!("{sep}{cell:<w$}", w = width[c]));
            } else {
                line.push_str(&format!("{sep}{cell:>w$}", w = width[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A table of figures: the first column left-aligned, the others right-aligned.
pub fn table(rows: &[Vec<String>]) -> String {
    table_aligned(rows, false)
}

fn left_table(rows: &[Vec<String>]) -> String {
    table_aligned(rows, true)
}

/// `median (min-max)` with `d` decimals, `-` for none.
pub fn spread(s: Option<Spread>, d: usize) -> String {
    s.map_or_else(
        || "-".into(),
        |s| format!("{:.d$} ({:.d$}-{:.d$})", s.median, s.min, s.max),
    )
}

/// The median with `decimals` decimals, `-` for none.
pub fn median(s: Option<Spread>, decimals: usize) -> String {
    s.map_or_else(|| "-".into(), |s| format!("{:.decimals$}", s.median))
}

/// The first lines of `liqo-bench <bench>`'s report: when, on what and what else (`run`: the
/// bench's own numbers), the command line, the bench's own `lines`, the tools with their
/// versions, what had to be installed, whether our binaries are debug builds, and the
/// background load at the start of every `test` (`test`, `round`, `timed run`).
pub fn header(bench: &str, h: &Header, run: &str, lines: &[String], test: &str) -> String {
    let mut out = format!(
        "liqo-bench {bench}: {}, {}, {run}\ncommand: {}\n",
        h.date,
        h.machine.describe(),
        h.command_line()
    );
    for l in lines {
        out.push_str(&format!("  {l}\n"));
    }
    if !h.tools.is_empty() {
        out.push_str("versions:\n");
        let rows: Vec<Vec<String>> = h
            .tools
            .iter()
            .map(|t| vec![format!("  {}", t.name), t.version.clone(), t.path.clone()])
            .collect();
        out.push_str(&left_table(&rows));
    }
    if !h.installs.is_empty() {
        out.push_str("installs:\n");
        let rows: Vec<Vec<String>> = h
            .installs
            .iter()
            .map(|i| {
                vec![
                    format!("  {}", i.what),
                    i.action.clone(),
                    format!("{:.1} s", i.secs),
                ]
            })
            .collect();
        out.push_str(&left_table(&rows));
    }
    if h.debug_build() {
        out.push_str("DEBUG builds: figures are not final\n");
    }
    out.push_str(&format!(
        "background CPU load at the start of a {test}: at most {:.0}% (waited {:.1} s for it to \
         drop)\n",
        h.load.max_pct, h.load.wait_secs
    ));
    out
}

/// `PASS  what: figure (target >= limit)`; FAIL when not met, also for a missing figure.
pub fn target_line(t: &Target) -> String {
    let value = |v: Option<f64>, missing: &str| match v {
        None => missing.to_owned(),
        Some(v) if t.unit.is_empty() => format!("{v:.3}"),
        Some(v) => format!("{v:.2} {}", t.unit),
    };
    format!(
        "{}  {}: {} (target {} {})",
        if t.holds() { "PASS" } else { "FAIL" },
        t.what,
        value(t.value, "not measured"),
        if t.at_most { "<=" } else { ">=" },
        value(t.limit, "unknown")
    )
}

/// One [`target_line`] per target under `title`, nothing without targets.
pub fn targets(title: &str, targets: &[Target]) -> String {
    if targets.is_empty() {
        return String::new();
    }
    let mut out = format!("{title}\n");
    for t in targets {
        out.push_str(&target_line(t));
        out.push('\n');
    }
    out
}

/// A whole report: its `header`, a blank line, its `body` (tables, targets) and the `notes`.
pub fn report(header: String, body: &str, report_notes: &[String]) -> String {
    format!("{header}\n{body}{}", notes(report_notes))
}

/// The notes under a report's tables, one `- ` line each (nothing if there are none).
pub fn notes(notes: &[String]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let mut out = "\nnotes:\n".to_owned();
    for n in notes {
        out.push_str(&format!("- {n}\n"));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report_core::tests::header as h;

    /// The first line of `text` that starts with `start`, its words one space apart.
    pub(crate) fn line(text: &str, start: &str) -> String {
        text.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no {start}: {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_header_has_the_machine_the_command_tools_installs_and_the_load() {
        let text = header(
            "tunnel",
            &h(),
            "5 repeats",
            &["bed: four namespaces".into()],
            "test",
        );
        let expected = "\
liqo-bench tunnel: 2026-11-21 18:04 UTC, kernel 6.18.44, 2 CPUs (AMD EPYC), 3.8 GiB of memory, 5 repeats
command: liqo-bench tunnel
  bed: four namespaces
versions:
  boringtun-cli  boringtun 0.7.1  /var/cache/liqo-lab/bench/bin/boringtun-cli
installs:
  boringtun-cli 0.7.1 (cargo install)  built  66.2 s
background CPU load at the start of a test: at most 3% (waited 0.0 s for it to drop)
";
        assert_eq!(text, expected, "\n{text}");
        let mut debug = h();
        debug.tools[0].path = "/src/target/debug/liqo-gateway".into();
        assert!(
            header("x", &debug, "", &[], "round")
                .contains("\nDEBUG builds: figures are not final\n")
        );
    }

    #[test]
    fn target_lines_say_pass_or_fail_with_the_figure_and_the_limit() {
        let ratio = Target::at_least(
            "one TCP stream, 100 peers / 1 peer",
            Some(1.0),
            Some(0.95),
            "",
        );
        assert_eq!(
            target_line(&ratio),
            "PASS  one TCP stream, 100 peers / 1 peer: 1.000 (target >= 0.950)"
        );
        let ms = Target::at_most("full apply", Some(60.0), Some(50.0), "ms");
        assert_eq!(
            target_line(&ms),
            "FAIL  full apply: 60.00 ms (target <= 50.00 ms)"
        );
        let missing = Target::at_most("Liqo seconds", None, None, "s");
        assert_eq!(
            target_line(&missing),
            "FAIL  Liqo seconds: not measured (target <= unknown)"
        );
        assert_eq!(targets("targets:", &[]), "");
        assert_eq!(
            targets("targets:", &[ms]),
            "targets:\nFAIL  full apply: 60.00 ms (target <= 50.00 ms)\n"
        );
    }
}
