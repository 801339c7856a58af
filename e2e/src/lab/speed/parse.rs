//! Pure parsers for what a speed figure reads: iperf3's JSON, ping's summary and
//! `/proc/net/tcp`.

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

/// Why iperf3's output could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IperfError {
    /// It is not JSON (its first 200 characters).
    #[error("iperf3 printed no JSON: {head:?}")]
    NotJson {
        /// The start of what it printed.
        head: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// iperf3 reported an error (its `error`).
    #[error("iperf3: {0}")]
    Failed(String),
    /// The document lacks the receiver's rate.
    #[error("iperf3 JSON has no end.sum_received.bits_per_second")]
    NoRate,
}

/// Parses the output of `iperf3 -c ... -J`. An `error` in the document is returned as the error.
pub fn iperf3_json(text: &str) -> Result<Iperf, IperfError> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|source| IperfError::NotJson {
            head: text.trim().chars().take(200).collect(),
            source,
        })?;
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        return Err(IperfError::Failed(err.to_owned()));
    }
    let end = &v["end"];
    let bits_per_second = end["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or(IperfError::NoRate)?;
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

/// Why ping's summary could not be read, or says nothing was measured.
#[derive(Debug, thiserror::Error)]
pub enum PingError {
    /// There is no `packets transmitted` line (what ping printed instead).
    #[error("no ping summary in {0:?}")]
    NoSummary(String),
    /// A count of the summary (`transmitted`, `received`) is not a number.
    #[error("bad ping {0} count")]
    BadCount(&'static str),
    /// No echo request was answered.
    #[error("ping: 0 of {transmitted} replies")]
    NoReplies {
        /// Echo requests sent.
        transmitted: u64,
    },
    /// There is no `rtt min/avg/max` line.
    #[error("no rtt line in the ping summary")]
    NoRtt,
    /// The `rtt` line has no average.
    #[error("bad rtt line {0:?}")]
    BadRtt(String),
}

/// Parses the summary of iputils `ping -q`:
/// `200 packets transmitted, 200 received, 0% packet loss, time 1043ms` and
/// `rtt min/avg/max/mdev = 0.031/0.052/0.270/0.021 ms`.
pub fn ping_summary(text: &str) -> Result<Ping, PingError> {
    let counts = text
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .ok_or_else(|| PingError::NoSummary(text.trim().to_owned()))?;
    let number_before = |word: &str| -> Option<u64> {
        counts
            .split(',')
            .find(|part| part.contains(word))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let transmitted = number_before("transmitted").ok_or(PingError::BadCount("transmitted"))?;
    let received = number_before("received").ok_or(PingError::BadCount("received"))?;
    if received == 0 {
        return Err(PingError::NoReplies { transmitted });
    }
    let rtt = text
        .lines()
        .find_map(|l| {
            let (names, values) = l.split_once('=')?;
            (names.contains("min/avg/max")).then_some(values)
        })
        .ok_or(PingError::NoRtt)?;
    let avg_ms: f64 = rtt
        .split('/')
        .nth(1)
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| PingError::BadRtt(rtt.trim().to_owned()))?;
    Ok(Ping {
        transmitted,
        received,
        avg_us: avg_ms * 1000.0,
    })
}

/// The failure as text with its cause, for callers that keep failures as text (`liqo-bench`).
impl From<IperfError> for String {
    fn from(e: IperfError) -> String {
        liqo_types::chain(&e)
    }
}

/// The failure as text, for callers that keep failures as text (`liqo-bench`).
impl From<PingError> for String {
    fn from(e: PingError) -> String {
        liqo_types::chain(&e)
    }
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
        assert_eq!(
            e.to_string(),
            "iperf3: unable to connect to server: Connection refused"
        );
        let e = iperf3_json("").unwrap_err();
        assert!(matches!(e, IperfError::NotJson { .. }), "{e:?}");
        assert_eq!(
            String::from(e),
            "iperf3 printed no JSON: \"\": EOF while parsing a value at line 1 column 0"
        );
        assert!(
            iperf3_json(r#"{"end":{}}"#)
                .unwrap_err()
                .to_string()
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
        assert_eq!(
            ping_summary(out).unwrap_err().to_string(),
            "ping: 0 of 3 replies"
        );
        assert!(ping_summary("ping: connect: Network is unreachable").is_err());
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
}
