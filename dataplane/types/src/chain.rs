//! [`chain`]: an error and its causes on one line, for a status field, a log line or an error
//! that crosses a process boundary as text.

use std::error::Error;

/// `e` and its causes, joined by `: ` (a cause whose text the message already ends with is not
/// said twice).
pub fn chain(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let next = s.to_string();
        if !out.ends_with(&next) {
            out.push_str(": ");
            out.push_str(&next);
        }
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn joins_causes_once() {
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(chain(&e), "outer: inner");
    }
}
