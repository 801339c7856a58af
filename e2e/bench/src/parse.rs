//! Pure parsers for what the bench reads: `/proc/<pid>/stat`, `/proc/stat`, `/proc/net/dev`,
//! a `--version` line and a date; iperf3's JSON, ping's summary and `/proc/net/tcp` are the
//! lab's ([`e2e::lab::speed::parse`]), re-exported here.

pub use e2e::lab::speed::parse::{Iperf, Ping, iperf3_json, ping_summary, tcp_listening};

/// A line or table of `/proc` that does not parse, named with the text at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcError {
    /// A `/proc/<pid>/stat` line without the command name's `)`.
    #[error("no command name in {line:?}")]
    NoCommandName {
        /// The line.
        line: String,
    },
    /// A `/proc/<pid>/stat` line without a numeric field `field` (1-based).
    #[error("no field {field} in {line:?}")]
    NoField {
        /// The field's number.
        field: usize,
        /// The line.
        line: String,
    },
    /// `/proc/stat` without its `cpu ` line.
    #[error("no aggregate cpu line in /proc/stat")]
    NoCpuLine,
    /// A `/proc/stat` cpu line with a counter that is not a number.
    #[error("bad /proc/stat line {line:?}")]
    BadStatLine {
        /// The line.
        line: String,
    },
    /// A `/proc/stat` cpu line with fewer than 5 counters.
    #[error("short /proc/stat line {line:?}")]
    ShortStatLine {
        /// The line.
        line: String,
    },
    /// `/proc/pressure/cpu` without its `some` line.
    #[error("no `some` line in /proc/pressure/cpu")]
    NoPressureLine,
    /// A `/proc/pressure/cpu` `some` line without a numeric `total=`.
    #[error("no total in /proc/pressure/cpu line {line:?}")]
    BadPressureLine {
        /// The line.
        line: String,
    },
    /// A `/proc/net/dev` line without the transmitted bytes.
    #[error("short /proc/net/dev line {line:?}")]
    ShortNetDevLine {
        /// The line.
        line: String,
    },
    /// `/proc/net/dev` without the interface.
    #[error("no interface {iface} in /proc/net/dev")]
    NoInterface {
        /// The interface.
        iface: String,
    },
}

/// user + system CPU ticks of a process (all its threads) from a `/proc/<pid>/stat` line. The
/// command name (field 2) is in parentheses and may itself hold spaces and parentheses, so the
/// fields are counted from after the last `)`.
pub fn proc_pid_ticks(line: &str) -> Result<u64, ProcError> {
    let rest = line
        .rfind(')')
        .map(|i| &line[i + 1..])
        .ok_or_else(|| ProcError::NoCommandName { line: line.into() })?;
    // After the name: state (field 3), ppid (4), ... utime (14), stime (15).
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Result<u64, ProcError> {
        fields
            .get(n - 3)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ProcError::NoField {
                field: n,
                line: line.into(),
            })
    };
    Ok(field(14)? + field(15)?)
}

/// Busy and total jiffies of all CPUs from the first line of `/proc/stat`
/// (`cpu user nice system idle iowait irq softirq steal ...`); idle and iowait are not busy.
pub fn proc_stat_busy(text: &str) -> Result<(u64, u64), ProcError> {
    let line = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .ok_or(ProcError::NoCpuLine)?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|s| {
            s.parse()
                .map_err(|_| ProcError::BadStatLine { line: line.into() })
        })
        .collect::<Result<_, _>>()?;
    if v.len() < 5 {
        return Err(ProcError::ShortStatLine { line: line.into() });
    }
    let total: u64 = v.iter().sum();
    Ok((total - v[3] - v[4], total))
}

/// Microseconds some task waited for a CPU since boot: the `some` line's `total` in
/// `/proc/pressure/cpu` (the kernel's pressure stall information).
pub fn cpu_pressure_us(text: &str) -> Result<u64, ProcError> {
    let line = text
        .lines()
        .find(|l| l.starts_with("some "))
        .ok_or(ProcError::NoPressureLine)?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| ProcError::BadPressureLine { line: line.into() })
}

/// Received and transmitted bytes of `iface` in a `/proc/net/dev` table.
pub fn net_dev_bytes(text: &str, iface: &str) -> Result<(u64, u64), ProcError> {
    for line in text.lines() {
        let Some((name, counters)) = line.split_once(':') else {
            continue;
        };
        if name.trim() != iface {
            continue;
        }
        let v: Vec<u64> = counters
            .split_whitespace()
            .map(|s| s.parse().unwrap_or(0))
            .collect();
        return match (v.first(), v.get(8)) {
            (Some(rx), Some(tx)) => Ok((*rx, *tx)),
            _ => Err(ProcError::ShortNetDevLine { line: line.into() }),
        };
    }
    Err(ProcError::NoInterface {
        iface: iface.into(),
    })
}

/// The first non-empty line of a `--version` output, trimmed.
pub fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_owned()
}

/// `YYYY-MM-DD HH:MM UTC` for seconds since the Unix epoch.
pub fn utc_date(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX);
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_stat_ticks_survive_odd_command_names() {
        let tail = "S 1 1234 1234 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 3 0 12345 1000000 500";
        assert_eq!(
            proc_pid_ticks(&format!("4242 (wireguard-go) {tail}")).unwrap(),
            325
        );
        // A name with spaces and parentheses: only the last ')' ends it.
        assert_eq!(
            proc_pid_ticks(&format!("4242 (a) b (c)) {tail}")).unwrap(),
            325
        );
        assert!(proc_pid_ticks("4242 (x) S 1").is_err());
        assert!(proc_pid_ticks("garbage").is_err());
    }

    #[test]
    fn proc_stat_busy_excludes_idle_and_iowait() {
        let text = "cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\n";
        assert_eq!(proc_stat_busy(text).unwrap(), (160, 980));
        assert!(proc_stat_busy("intr 1 2 3").is_err());
    }

    #[test]
    fn cpu_pressure_is_the_some_lines_total() {
        let text = "some avg10=22.80 avg60=69.55 avg300=71.62 total=24232680065\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(cpu_pressure_us(text).unwrap(), 24_232_680_065);
        assert!(cpu_pressure_us("full total=3").is_err());
        assert!(cpu_pressure_us("some avg10=1.0 total=x").is_err());
    }

    #[test]
    fn net_dev_counters_by_interface() {
        let text = "Inter-|   Receive                            |  Transmit\n \
            face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
            lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n  \
            wanA:123456789 1000    0    0    0     0          0         0 987654321 2000    0    0    0     0       0          0\n";
        assert_eq!(
            net_dev_bytes(text, "wanA").unwrap(),
            (123_456_789, 987_654_321)
        );
        assert!(net_dev_bytes(text, "wan").is_err());
    }

    #[test]
    fn dates_and_version_lines() {
        assert_eq!(utc_date(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_date(951_827_696), "2000-02-29 12:34 UTC");
        assert_eq!(utc_date(1_798_761_599), "2026-12-31 23:59 UTC");
        assert_eq!(
            first_line("\nwireguard-go v0.0.20220316\n\nUserspace WireGuard"),
            "wireguard-go v0.0.20220316"
        );
    }
}
