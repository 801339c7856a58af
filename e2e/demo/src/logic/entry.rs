//! `/append`'s entry check and the line an entry becomes in the data directory's log (no I/O).

use super::target::query_param;
use crate::error::Error;

/// The longest entry, in characters (not bytes).
pub(crate) const MAX_CHARS: usize = 200;

/// The `entry` query parameter, percent-decoded (`+` is a space), checked: 1 to [`MAX_CHARS`]
/// characters, no control character (a newline would split the log's lines).
pub(crate) fn check_entry(query: &str) -> Result<String, Error> {
    let entry = match query_param(query, "entry") {
        None => return Err(Error::MissingEntry),
        Some(Err(reason)) => {
            return Err(Error::BadEntry {
                entry: query.to_owned(),
                reason,
            });
        }
        Some(Ok(entry)) => entry,
    };
    let bad = |reason: String| Error::BadEntry {
        entry: entry.clone(),
        reason,
    };
    let chars = entry.chars().count();
    if !(1..=MAX_CHARS).contains(&chars) {
        return Err(bad(format!(
            "an entry is 1 to {MAX_CHARS} characters, this one has {chars}"
        )));
    }
    if let Some((i, c)) = entry.chars().enumerate().find(|(_, c)| c.is_control()) {
        return Err(bad(format!(
            "an entry holds no control character (newline, tab, …), character {} is U+{:04X}",
            i + 1,
            u32::from(c)
        )));
    }
    Ok(entry)
}

/// The line an entry becomes (without its newline): `<entry> pod=<pod> cluster=<cluster>`.
pub(crate) fn line(entry: &str, pod: &str, cluster: &str) -> String {
    format!("{entry} pod={pod} cluster={cluster}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(query: &str) -> (String, String) {
        match check_entry(query) {
            Err(Error::BadEntry { entry, reason }) => (entry, reason),
            other => panic!("{query}: {other:?}"),
        }
    }

    #[test]
    fn an_entry_is_decoded_and_kept_as_it_is() {
        assert_eq!(check_entry("entry=hello").unwrap(), "hello");
        assert_eq!(check_entry("entry=a%20b+c").unwrap(), "a b c");
        assert_eq!(check_entry("x=1&entry=caf%C3%A9&entry=2").unwrap(), "café");
        // 200 characters, 400 bytes: the rule counts characters.
        let longest = "é".repeat(MAX_CHARS);
        assert_eq!(check_entry(&format!("entry={longest}")).unwrap(), longest);
    }

    #[test]
    fn a_missing_empty_long_or_multi_line_entry_is_refused_naming_it_and_the_rule() {
        assert!(matches!(check_entry(""), Err(Error::MissingEntry)));
        assert!(matches!(check_entry("other=1"), Err(Error::MissingEntry)));
        assert_eq!(
            reason("entry="),
            (
                String::new(),
                "an entry is 1 to 200 characters, this one has 0".into()
            )
        );
        let long = "x".repeat(MAX_CHARS + 1);
        let (entry, why) = reason(&format!("entry={long}"));
        assert_eq!(entry, long);
        assert_eq!(why, "an entry is 1 to 200 characters, this one has 201");
        let (entry, why) = reason("entry=one%0Atwo");
        assert_eq!(entry, "one\ntwo");
        assert!(why.ends_with("character 4 is U+000A"), "{why}");
        assert!(reason("entry=a%09b").1.ends_with("U+0009"));
        assert!(reason("entry=%7F").1.ends_with("U+007F"));
        let (entry, why) = reason("entry=%zz");
        assert_eq!(entry, "entry=%zz");
        assert!(why.contains("bad percent escape"), "{why}");
    }

    #[test]
    fn the_line_names_the_pod_and_the_cluster() {
        assert_eq!(line("a b", "db-0", "milan"), "a b pod=db-0 cluster=milan");
    }
}
