//! Pure parsers for what the bench reads: iperf3's JSON, ping's summary, `/proc/<pid>/stat`,
//! `/proc/stat`, `/proc/net/dev` and `/proc/net/tcp`.

use std::net::Ipv4Addr;

/// What one iperf3 client run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Iperf {
    /// Goodput at the receiver, bit/s (`end.sum_received.bits_per_second`).
    pub bits_per_second: f64,
    /// TCP retransmissions at the sender (`end.sum_sent.retransmits`), when reported.
    pub retransmits: Option<u64>,
    /// Bytes delivered to the receiver and over how many seconds (`end.sum_received`).
    pub received: Option<(u64, f64)>,
    /// Bytes sent and over how many seconds (`end.sum_sent`).
    pub sent: Option<(u64, f64)>,
}

impl Iperf {
    /// Datagrams of `len` bytes delivered per second (UDP).
    pub fn received_pps(&self, len: u32) -> Option<f64> {
        per_second(self.received, len)
    }

    /// Datagrams of `len` bytes sent per second (UDP: the rate actually offered).
    pub fn sent_pps(&self, len: u32) -> Option<f64> {
        per_second(self.sent, len)
    }
}

fn per_second(bytes_secs: Option<(u64, f64)>, len: u32) -> Option<f64> {
    let (bytes, secs) = bytes_secs?;
    (secs > 0.0 && len > 0).then(|| bytes as f64 / f64::from(len) / secs)
}

/// Parses the output of `iperf3 -c ... -J`. An `error` in the document is returned as the error.
pub fn iperf3_json(text: &str) -> Result<Iperf, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        let head: String = text.trim().chars().take(200).collect();
        format!("iperf3 printed no JSON ({e}): {head:?}")
    })?;
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        return Err(format!("iperf3: {err}"));
    }
    let end = &v["end"];
    let bits_per_second = end["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or("iperf3 JSON has no end.sum_received.bits_per_second")?;
    let total = |sum: &serde_json::Value| Some((sum["bytes"].as_u64()?, sum["seconds"].as_f64()?));
    Ok(Iperf {
        bits_per_second,
        retransmits: end["sum_sent"]["retransmits"].as_u64(),
        received: total(&end["sum_received"]),
        sent: total(&end["sum_sent"]),
    })
}

/// What one `ping -q` run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ping {
    /// Echo requests sent.
    pub transmitted: u64,
    /// Replies received.
    pub received: u64,
    /// Average round-trip time, microseconds.
    pub avg_us: f64,
}

/// Parses the summary of iputils `ping -q`:
/// `200 packets transmitted, 200 received, 0% packet loss, time 1043ms` and
/// `rtt min/avg/max/mdev = 0.031/0.052/0.270/0.021 ms`.
pub fn ping_summary(text: &str) -> Result<Ping, String> {
    let counts = text
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .ok_or_else(|| format!("no ping summary in {:?}", text.trim()))?;
    let number_before = |word: &str| -> Option<u64> {
        counts
            .split(',')
            .find(|part| part.contains(word))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let transmitted = number_before("transmitted").ok_or("bad ping transmitted count")?;
    let received = number_before("received").ok_or("bad ping received count")?;
    if received == 0 {
        return Err(format!("ping: 0 of {transmitted} replies"));
    }
    let rtt = text
        .lines()
        .find_map(|l| {
            let (names, values) = l.split_once('=')?;
            (names.contains("min/avg/max")).then_some(values)
        })
        .ok_or("no rtt line in the ping summary")?;
    let avg_ms: f64 = rtt
        .split('/')
        .nth(1)
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| format!("bad rtt line {:?}", rtt.trim()))?;
    Ok(Ping {
        transmitted,
        received,
        avg_us: avg_ms * 1000.0,
    })
}

/// user + system CPU ticks of a process (all its threads) from a `/proc/<pid>/stat` line. The
/// command name (field 2) is in parentheses and may itself hold spaces and parentheses, so the
/// fields are counted from after the last `)`.
pub fn proc_pid_ticks(line: &str) -> Result<u64, String> {
    let rest = line
        .rfind(')')
        .map(|i| &line[i + 1..])
        .ok_or_else(|| format!("no command name in {line:?}"))?;
    // After the name: state (field 3), ppid (4), ... utime (14), stime (15).
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Result<u64, String> {
        fields
            .get(n - 3)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("no field {n} in {line:?}"))
    };
    Ok(field(14)? + field(15)?)
}

/// Busy and total jiffies of all CPUs from the first line of `/proc/stat`
/// (`cpu user nice system idle iowait irq softirq steal ...`); idle and iowait are not busy.
pub fn proc_stat_busy(text: &str) -> Result<(u64, u64), String> {
    let line = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .ok_or("no aggregate cpu line in /proc/stat")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|s| {
            s.parse()
                .map_err(|_| format!("bad /proc/stat line {line:?}"))
        })
        .collect::<Result<_, _>>()?;
    if v.len() < 5 {
        return Err(format!("short /proc/stat line {line:?}"));
    }
    let total: u64 = v.iter().sum();
    Ok((total - v[3] - v[4], total))
}

/// Received and transmitted bytes of `iface` in a `/proc/net/dev` table.
pub fn net_dev_bytes(text: &str, iface: &str) -> Result<(u64, u64), String> {
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
            _ => Err(format!("short /proc/net/dev line {line:?}")),
        };
    }
    Err(format!("no interface {iface} in /proc/net/dev"))
}

/// Whether a `/proc/net/tcp` table has a socket listening on `addr:port`.
pub fn tcp_listening(text: &str, addr: Ipv4Addr, port: u16) -> bool {
    // The address is the in-memory (network order) u32 printed in hex: little-endian on x86.
    let want_le = format!("{:08X}:{port:04X}", u32::from_le_bytes(addr.octets()));
    let want_be = format!("{:08X}:{port:04X}", u32::from_be_bytes(addr.octets()));
    let any = format!("00000000:{port:04X}");
    text.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[3] == "0A" && [&want_le, &want_be, &any].contains(&&f[1].to_string())
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

    const IPERF_OK: &str = r#"{"start":{"connected":[]},"intervals":[],
        "end":{"streams":[],
          "sum_sent":{"start":0,"end":5.0,"seconds":5.0,"bytes":1750000000,"bits_per_second":2.8e9,"retransmits":17,"sender":true},
          "sum_received":{"start":0,"end":5.0,"seconds":5.0,"bytes":1745000000,"bits_per_second":2791234567.5,"sender":true},
          "cpu_utilization_percent":{"host_total":40.1}}}"#;

    #[test]
    fn iperf3_received_rate_and_retransmits() {
        let r = iperf3_json(IPERF_OK).unwrap();
        assert_eq!(r.bits_per_second, 2_791_234_567.5);
        assert_eq!(r.retransmits, Some(17));
        let no_retr = IPERF_OK.replace(r#""retransmits":17,"#, "");
        assert_eq!(iperf3_json(&no_retr).unwrap().retransmits, None);
        assert_eq!(r.received, Some((1_745_000_000, 5.0)));
        assert_eq!(r.sent, Some((1_750_000_000, 5.0)));
    }

    #[test]
    fn iperf3_udp_packets_per_second_at_both_ends() {
        // iperf3 3.12 -u -l 64: the receiver's bytes are what arrived.
        let text = r#"{"end":{
          "sum_sent":{"start":0,"end":2.0,"seconds":2.0,"bytes":24800000,"bits_per_second":99200000,"packets":387500,"lost_packets":0,"sender":true},
          "sum_received":{"start":0,"end":2.0,"seconds":2.0,"bytes":16051200,"bits_per_second":64204800,"packets":387500,"lost_packets":136700,"sender":false}}}"#;
        let r = iperf3_json(text).unwrap();
        assert_eq!(r.received_pps(64), Some(125_400.0));
        assert_eq!(r.sent_pps(64), Some(193_750.0));
        assert_eq!(r.received_pps(0), None);
        let no_time = text.replace(
            r#""seconds":2.0,"bytes":16051200"#,
            r#""seconds":0,"bytes":16051200"#,
        );
        assert_eq!(iperf3_json(&no_time).unwrap().received_pps(64), None);
    }

    #[test]
    fn iperf3_errors_are_reported() {
        let e = iperf3_json(
            r#"{"start":{},"intervals":[],"end":{},"error":"unable to connect to server: Connection refused"}"#,
        )
        .unwrap_err();
        assert_eq!(e, "iperf3: unable to connect to server: Connection refused");
        assert!(iperf3_json("").unwrap_err().contains("no JSON"));
        assert!(
            iperf3_json(r#"{"end":{}}"#)
                .unwrap_err()
                .contains("sum_received")
        );
    }

    #[test]
    fn ping_summary_average_in_microseconds() {
        let out = "PING 10.201.2.2 (10.201.2.2) 56(84) bytes of data.\n\n\
                   --- 10.201.2.2 ping statistics ---\n\
                   200 packets transmitted, 199 received, 0.5% packet loss, time 1043ms\n\
                   rtt min/avg/max/mdev = 0.031/0.052/0.270/0.021 ms, ipg/ewma 5.2/0.05 ms\n";
        let p = ping_summary(out).unwrap();
        assert_eq!((p.transmitted, p.received), (200, 199));
        assert!((p.avg_us - 52.0).abs() < 1e-9, "{}", p.avg_us);
    }

    #[test]
    fn ping_without_replies_fails() {
        let out = "--- 10.201.2.2 ping statistics ---\n\
                   3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 2040ms\n";
        assert_eq!(ping_summary(out).unwrap_err(), "ping: 0 of 3 replies");
        assert!(ping_summary("ping: connect: Network is unreachable").is_err());
    }

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
    fn tcp_listener_found_by_address_and_port() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
            0: 0202C90A:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n   \
            1: 0202C90A:1451 0201C90A:D3A0 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1\n";
        let ip: Ipv4Addr = "10.201.2.2".parse().unwrap();
        assert!(tcp_listening(text, ip, 5201));
        assert!(!tcp_listening(text, ip, 5202));
        assert!(!tcp_listening(text, "10.201.2.3".parse().unwrap(), 5201));
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
