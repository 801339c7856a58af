//! What the daemons' command-line tools print: the `status` subcommand (its `/status` as it is,
//! `-o json`, or rendered for people, `-o table`), and [`out`], every line a tool prints.

use serde::de::DeserializeOwned;

/// How a command prints what it fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people.
    Table,
    /// The JSON the daemon serves.
    Json,
}

/// `body` (a `/status` answer) in `format`: the JSON itself, or `render` of it decoded as `S`.
pub fn status<S: DeserializeOwned>(
    body: &str,
    format: Format,
    render: impl FnOnce(&S) -> String,
) -> Result<String, serde_json::Error> {
    match format {
        Format::Json => Ok(format!("{body}\n")),
        Format::Table => Ok(render(&serde_json::from_str(body)?)),
    }
}

/// Prints `text` and a newline on stdout. A closed stdout (EPIPE: `| head`) is the reader's
/// choice, not a failure of the command: the rest of the output is dropped quietly; another
/// write error is logged.
pub fn out(text: &str) {
    use std::io::Write as _;
    let mut o = std::io::stdout().lock();
    match writeln!(o, "{}", text.trim_end_matches('\n')).and_then(|()| o.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => tracing::error!(error = %e, "writing to stdout"),
        Ok(()) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_as_served_table_rendered_and_bad_json_refused() {
        let body = r#"{"peers":2}"#;
        let render = |v: &serde_json::Value| format!("{} peers\n", v["peers"]);
        assert_eq!(
            status(body, Format::Json, render).unwrap(),
            format!("{body}\n")
        );
        assert_eq!(status(body, Format::Table, render).unwrap(), "2 peers\n");
        assert!(status("{", Format::Table, render).is_err());
    }
}
