//! The `reload` block of every daemon's `/status`: what runs, what was refused, what failed to
//! apply and whether the config file can be read, each naming the file text by its [`digest`].
//! A wire type: the daemons write it (`liqo-daemon`), the operators, the lab and liqoctl read it.
//!
//! A writer computes the digest of the text it wrote and waits until `applied.digest` equals it
//! (done) or `refused.digest` equals it (then `refused.field` and `refused.problem` say why).

use serde::{Deserialize, Serialize};

/// FNV-1a (64 bits) of the exact file text, as 16 lowercase hex digits.
pub fn digest(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The reload state of a daemon, serialized under the key `reload` of its `/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadStatus {
    /// The config file.
    pub source: String,
    /// What runs.
    pub applied: Option<Applied>,
    /// The file's text was refused (the running state is kept); not retried until it changes.
    pub refused: Option<Refused>,
    /// The latest apply failed: of the file's text, or of the running text converged again
    /// (after a failure, or on the periodic resync). Until an apply succeeds the state may be
    /// neither config's, and it is retried every tick; cleared only by a successful apply.
    pub apply_error: Option<Failed>,
    /// The file cannot be read (missing, a directory, not UTF-8, ...).
    pub read_error: Option<String>,
}

/// The text that runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// Its [`digest`].
    pub digest: String,
    /// Texts applied since start (the first one included).
    pub count: u64,
    /// How long the apply that made it run took, in microseconds (0 for the text the daemon
    /// started with: its start-up did more than apply it). A resync of the same text does not
    /// change it.
    #[serde(default)]
    pub micros: u64,
}

/// A refused text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refused {
    /// Its [`digest`].
    pub digest: String,
    /// The path of the bad field (`peers[1].remotePodCIDR`; `<file>` for the whole document).
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

/// A text whose apply failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failed {
    /// Its [`digest`].
    pub digest: String,
    /// The error and its causes, on one line.
    pub error: String,
    /// Attempts so far.
    pub attempts: u64,
}

impl ReloadStatus {
    /// What is wrong, on one line (the unreadable file, the refusal, the failed apply; joined by
    /// `; ` when several hold), or `None` when the file's text runs.
    pub fn problem(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(e) = &self.read_error {
            parts.push(format!("cannot read the config file: {e}"));
        }
        if let Some(r) = &self.refused {
            parts.push(format!(
                "configuration {} refused (running state kept): {}: {}",
                r.digest, r.field, r.problem
            ));
        }
        if let Some(f) = &self.apply_error {
            parts.push(format!(
                "applying configuration {} failed ({} attempt{}, retrying): {}",
                f.digest,
                f.attempts,
                if f.attempts == 1 { "" } else { "s" },
                f.error
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// Lines for people: the file and what runs, then each problem.
    pub fn render(&self) -> String {
        let mut out = match &self.applied {
            Some(a) => format!(
                "config {}: running {} (applied {} time{}{})\n",
                self.source,
                a.digest,
                a.count,
                if a.count == 1 { "" } else { "s" },
                if a.micros > 0 {
                    format!("; the last apply took {:.1} ms", a.micros as f64 / 1000.0)
                } else {
                    String::new()
                }
            ),
            None => format!("config {}: nothing applied yet\n", self.source),
        };
        if let Some(e) = &self.read_error {
            out.push_str(&format!("  UNREADABLE: {e}\n"));
        }
        if let Some(r) = &self.refused {
            out.push_str(&format!(
                "  REFUSED {} (running state kept): {}: {}\n",
                r.digest, r.field, r.problem
            ));
        }
        if let Some(f) = &self.apply_error {
            out.push_str(&format!(
                "  APPLY FAILED {} ({} attempts, retrying): {}\n",
                f.digest, f.attempts, f.error
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_fnv1a_64() {
        // The published FNV-1a test vectors.
        assert_eq!(digest(""), "cbf29ce484222325");
        assert_eq!(digest("a"), "af63dc4c8601ec8c");
        assert_eq!(digest("foobar"), "85944171f73967e8");
        assert_ne!(digest("a\n"), digest("a"));
    }

    #[test]
    fn json_shape_is_camel_case() {
        let s = ReloadStatus {
            source: "/etc/x.yaml".into(),
            applied: Some(Applied {
                digest: digest("a"),
                count: 2,
                micros: 1234,
            }),
            refused: Some(Refused {
                digest: digest("b"),
                field: "peers[0].id".into(),
                problem: "bad".into(),
            }),
            apply_error: Some(Failed {
                digest: digest("c"),
                error: "no".into(),
                attempts: 3,
            }),
            read_error: None,
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["applied"]["count"], 2);
        assert_eq!(v["applied"]["micros"], 1234);
        assert_eq!(v["refused"]["field"], "peers[0].id");
        assert_eq!(v["applyError"]["attempts"], 3);
        assert!(v["readError"].is_null());
        assert_eq!(
            serde_json::from_value::<ReloadStatus>(v).unwrap(),
            s,
            "round trip"
        );
        let p = s.problem().unwrap();
        assert!(
            p.contains("peers[0].id: bad") && p.contains("3 attempts"),
            "{p}"
        );
        assert!(!p.contains('\n'));
        assert_eq!(ReloadStatus::default().problem(), None);
        assert!(s.render().contains("REFUSED"), "{}", s.render());
        assert!(
            s.render()
                .contains("(applied 2 times; the last apply took 1.2 ms)"),
            "{}",
            s.render()
        );
        // A status from a daemon that did not report apply times yet still reads.
        let old: Applied =
            serde_json::from_str(r#"{"digest":"0123456789abcdef","count":3}"#).unwrap();
        assert_eq!(old.micros, 0);
    }
}
