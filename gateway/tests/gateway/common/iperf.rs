//! iperf3 between two namespaces: a server, and client runs whose throughput per interval the
//! tests check.

use std::{
    path::PathBuf,
    process::{Child, Stdio},
    thread,
    time::{Duration, Instant},
};

use dataplane::{
    Netns,
    supervisor::{Attached, Spec},
};

/// `iperf3 -s` in a namespace, killed on drop.
pub struct Server {
    _proc: Attached,
}

impl Server {
    /// Starts `iperf3 -s` on `addr` in `ns` (its log in `log`) and waits until it listens.
    pub fn start(ns: &Netns, addr: &str, log: PathBuf) -> Server {
        let proc = Spec::new("iperf3", "iperf3", log)
            .args(["-s", "-B", addr])
            .netns(ns)
            .kill_on_drop()
            .attached()
            .expect("starting iperf3 -s");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let out = ns
                .command("ss")
                .args(["-Hltn", "sport = :5201"])
                .output()
                .expect("running ss");
            assert!(out.status.success(), "ss: {out:?}");
            if !out.stdout.is_empty() {
                return Server { _proc: proc };
            }
            assert!(
                Instant::now() < deadline,
                "iperf3 -s is not listening: {}",
                proc.log_tail()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A running `iperf3 -c ... -J`, killed on drop if still running.
pub struct Client {
    child: Option<Child>,
    /// The run's length plus time to connect and report.
    deadline: Instant,
}

impl Client {
    /// One TCP stream from `ns` to `target` for `secs` seconds, reporting every `interval`
    /// seconds.
    pub fn start(ns: &Netns, target: &str, secs: u32, interval: f64) -> Client {
        let child = ns
            .command("iperf3")
            .args(["-c", target, "-J", "--connect-timeout", "5000", "-t"])
            .arg(secs.to_string())
            .arg("-i")
            .arg(interval.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting iperf3 -c");
        Client {
            child: Some(child),
            deadline: Instant::now() + Duration::from_secs(u64::from(secs) + 20),
        }
    }

    /// Waits for the run; the bits per second of each interval. Panics with iperf3's output if
    /// it failed or did not finish in time.
    pub fn rates(self) -> Vec<f64> {
        self.finish().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits for the run; the bits per second of each interval, or what went wrong with
    /// iperf3's output (a stalled stream can hold it for minutes: it is killed at the deadline).
    pub fn finish(mut self) -> Result<Vec<f64>, String> {
        let mut child = self.child.take().expect("not waited yet");
        let mut stdout = child.stdout.take().expect("piped");
        let reader = thread::spawn(move || {
            let mut text = String::new();
            // A read error leaves the text short; the JSON check below reports it.
            drop(std::io::Read::read_to_string(&mut stdout, &mut text));
            text
        });
        let status = loop {
            if let Some(status) = child.try_wait().expect("waiting for iperf3 -c") {
                break Some(status);
            }
            if Instant::now() >= self.deadline {
                child.kill().expect("killing iperf3 -c");
                child.wait().expect("reaping iperf3 -c");
                break None;
            }
            thread::sleep(Duration::from_millis(50));
        };
        let text = reader.join().expect("reading iperf3's output");
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            // Only for the message below.
            drop(std::io::Read::read_to_string(&mut e, &mut stderr));
        }
        let Some(status) = status else {
            return Err(format!(
                "iperf3 -c did not finish in time (a stalled stream?): {text}\n{stderr}"
            ));
        };
        if !status.success() {
            return Err(format!("iperf3 -c failed ({status}): {text}\n{stderr}"));
        }
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("iperf3 -J output: {e}: {text}\n{stderr}"))?;
        if let Some(e) = v.get("error") {
            return Err(format!("iperf3 -c: {e}"));
        }
        v["intervals"]
            .as_array()
            .ok_or_else(|| format!("no intervals: {text}"))?
            .iter()
            .map(|i| {
                i["sum"]["bits_per_second"]
                    .as_f64()
                    .ok_or_else(|| format!("an interval without bits_per_second: {i}"))
            })
            .collect()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // Dropped while running: the test failed; the namespace's removal would kill it too.
            if let Err(e) = c.kill() {
                eprintln!("killing iperf3 -c: {e}");
            }
            // Reaped so it is no zombie; the kill above already said what went wrong, if anything.
            drop(c.wait());
        }
    }
}

/// Rates in Mbit/s, rounded, for printing.
pub fn mbit(rates: &[f64]) -> Vec<f64> {
    rates.iter().map(|r| (r / 1e6).round()).collect()
}

/// The median of `v` (not empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    assert!(n > 0, "the median of nothing");
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}
