//! One sample: iperf3 with 1 and 4 streams, ping, the daemons' CPU time and the underlay's
//! bytes, each test started only once the machine is quiet.

use std::{
    fs,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use dataplane::supervisor::{Attached, Spec};

use super::{
    BenchError, Profile,
    bed::{self, Bed, Node},
    install::Peers,
    options::fail,
    parse,
    report::{FULL_PACKET_BYTES, Sample},
    report_core::Load,
    variant::Leg,
};

/// TCP port of the iperf3 server in podB.
const IPERF_PORT: u16 = 5201;
/// Background load above which a test waits.
const QUIET_PCT: f64 = 15.0;
/// The longest wait for background load to drop.
const QUIET_WAIT: Duration = Duration::from_secs(20);
/// How long the load is sampled.
const LOAD_WINDOW: Duration = Duration::from_millis(500);

/// Background load seen across the run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LoadTracker {
    /// Highest load at the start of a test, percent.
    pub(crate) max_pct: f64,
    /// Time spent waiting for it to drop.
    pub(crate) waited: Duration,
}

/// Ticks (`USER_HZ`) all CPUs spent busy since boot, and in all.
pub(crate) fn busy() -> Result<(u64, u64), BenchError> {
    let text =
        fs::read_to_string("/proc/stat").map_err(|e| fail("reading /proc/stat", e.to_string()))?;
    parse::proc_stat_busy(&text).map_err(|e| BenchError::step("parsing /proc/stat", &e))
}

/// Microseconds some task waited for a CPU since boot (`/proc/pressure/cpu`); `None` (with a
/// warning, unless the kernel has no pressure information) when it cannot be read: an
/// optional row of the report, never a reason to fail a run.
pub(crate) fn cpu_pressure_us() -> Option<u64> {
    let path = "/proc/pressure/cpu";
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            eprintln!("bench: reading {path}: {e} (no CPU pressure row)");
            return None;
        }
    };
    parse::cpu_pressure_us(&text)
        .inspect_err(|e| eprintln!("bench: parsing {path}: {e} (no CPU pressure row)"))
        .ok()
}

/// Percent of all CPUs busy over [`LOAD_WINDOW`].
async fn load_pct() -> Result<f64, BenchError> {
    let (b0, t0) = busy()?;
    tokio::time::sleep(LOAD_WINDOW).await;
    let (b1, t1) = busy()?;
    Ok(100.0 * (b1.saturating_sub(b0)) as f64 / (t1.saturating_sub(t0)).max(1) as f64)
}

impl LoadTracker {
    /// What the header shows of it.
    pub(crate) fn seen(&self) -> Load {
        Load {
            max_pct: self.max_pct,
            wait_secs: self.waited.as_secs_f64(),
        }
    }

    /// Waits (up to [`QUIET_WAIT`]) while another process keeps the machine busier than
    /// [`QUIET_PCT`]; returns the load the test starts with.
    pub(crate) async fn quiet(&mut self) -> Result<f64, BenchError> {
        let start = Instant::now();
        let mut pct = load_pct().await?;
        while pct > QUIET_PCT && start.elapsed() < QUIET_WAIT {
            eprintln!("bench: background CPU load {pct:.0}%, waiting");
            tokio::time::sleep(Duration::from_secs(1)).await;
            pct = load_pct().await?;
        }
        self.waited += start.elapsed().saturating_sub(LOAD_WINDOW);
        self.max_pct = self.max_pct.max(pct);
        Ok(pct)
    }
}

/// `USER_HZ`, the unit of `/proc/<pid>/stat` times.
pub(crate) fn clock_ticks() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|t| *t > 0)
        .unwrap_or(100)
}

fn cpu_ticks(pids: &[u32]) -> Result<u64, BenchError> {
    let mut total = 0;
    for pid in pids {
        let line = fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_err(|e| fail(format!("reading /proc/{pid}/stat"), e.to_string()))?;
        total += parse::proc_pid_ticks(&line)
            .map_err(|e| BenchError::step("parsing /proc/<pid>/stat", &e))?;
    }
    Ok(total)
}

/// `program args` in `n`, pinned to `cpu` if given.
fn command(bed: &Bed, peers: &Peers, n: Node, cpu: Option<u32>, program: &Path) -> Command {
    match (cpu, &peers.taskset) {
        (Some(cpu), Some(t)) => {
            let mut c = bed.ns(n).command(t);
            c.arg("-c").arg(cpu.to_string()).arg(program);
            c
        }
        _ => bed.ns(n).command(program),
    }
}

/// Runs a client command with a deadline; its stdout.
async fn output(what: &str, cmd: Command, timeout: Duration) -> Result<String, BenchError> {
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(timeout, cmd.output())
        .await
        .map_err(|_| fail(what, format!("no answer within {} s", timeout.as_secs())))?
        .map_err(|e| fail(what, e.to_string()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if stdout.trim().is_empty() && !out.status.success() {
        return Err(fail(
            what,
            format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(stdout)
}

/// The iperf3 server in podB, stopped on drop.
pub(crate) type Server = Attached;

/// Starts the iperf3 server in podB (on side B's CPU in `profile`) and waits until it listens.
pub(crate) async fn server(
    bed: &Bed,
    peers: &Peers,
    profile: Profile,
) -> Result<Server, BenchError> {
    let log = bed.names.run_dir().join("iperf3-server.log");
    let mut spec = Spec::new("iperf3", &peers.iperf3, &log)
        .args([
            "-s".to_owned(),
            "-B".to_owned(),
            bed::POD_B.to_string(),
            "-p".to_owned(),
            IPERF_PORT.to_string(),
        ])
        .netns(bed.ns(Node::PodB))
        .truncate_log();
    if let (Some(cpu), Some(t)) = (profile.cpu(false), &peers.taskset) {
        spec = spec.pin(t, cpu);
    }
    let mut s = spec
        .attached()
        .map_err(|e| BenchError::step("starting the iperf3 server", &e))?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !bed.listening(Node::PodB, bed::POD_B, IPERF_PORT) {
        if let Ok(Some(status)) = s.exited() {
            let text = fs::read_to_string(&log).unwrap_or_default();
            return Err(fail(
                format!("the iperf3 server exited ({status})"),
                text.trim().to_owned(),
            ));
        }
        if Instant::now() > deadline {
            return Err(fail("the iperf3 server", "not listening after 5 s"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(s)
}

/// What one iperf3 client run sends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Flow {
    /// TCP with this many parallel streams (the first second left out as warm-up).
    Tcp(u32),
    /// UDP datagrams of `len` payload bytes offered at `mbps` Mbit/s (0: as fast as it can).
    /// No warm-up is left out: iperf3's UDP counts are not consistent with `-O`.
    Udp {
        /// Payload bytes per datagram.
        len: u32,
        /// Offered rate of payload, Mbit/s.
        mbps: u32,
    },
}

/// Runs one iperf3 client in podA against the server in podB for `secs`.
pub(crate) async fn iperf(
    bed: &Bed,
    peers: &Peers,
    profile: Profile,
    secs: u32,
    flow: Flow,
) -> Result<parse::Iperf, BenchError> {
    let mut cmd = command(bed, peers, Node::PodA, profile.cpu(true), &peers.iperf3);
    cmd.args(["-c", &bed::POD_B.to_string(), "-p", &IPERF_PORT.to_string()])
        .args(["-t", &secs.to_string(), "-J"]);
    let what = match flow {
        Flow::Tcp(streams) => {
            cmd.args(["-O", "1", "-P", &streams.to_string()]);
            format!("iperf3 with {streams} stream(s)")
        }
        Flow::Udp { len, mbps } => {
            cmd.args(["-u", "-l", &len.to_string(), "-b", &format!("{mbps}M")]);
            format!("iperf3 -u -l {len}")
        }
    };
    let out = output(&what, cmd, Duration::from_secs(u64::from(secs) + 30)).await?;
    let r = parse::iperf3_json(&out).map_err(|e| fail(&what, e))?;
    if r.bits_per_second <= 0.0 {
        return Err(fail(&what, "no data received"));
    }
    Ok(r)
}

async fn ping(bed: &Bed, peers: &Peers, profile: Profile) -> Result<f64, BenchError> {
    let mut cmd = command(bed, peers, Node::PodA, profile.cpu(true), &peers.ping);
    cmd.args([
        "-c",
        "200",
        "-i",
        "0.005",
        "-W",
        "1",
        "-q",
        &bed::POD_B.to_string(),
    ]);
    let out = output("ping", cmd, Duration::from_secs(30)).await?;
    parse::ping_summary(&out)
        .map(|p| p.avg_us)
        .map_err(|e| fail("ping", e))
}

/// What every sample of a run shares.
pub(crate) struct Ctx<'a> {
    pub(crate) bed: &'a Bed,
    pub(crate) peers: &'a Peers,
    /// Seconds per iperf3 test.
    pub(crate) secs: u32,
    /// `USER_HZ`.
    pub(crate) hz: u64,
}

impl Ctx<'_> {
    /// Measures the leg that is up; a failure is recorded in the sample, with what was
    /// measured before it.
    pub(crate) async fn sample(
        &self,
        leg: &Leg,
        profile: Profile,
        repeat: u32,
        load: &mut LoadTracker,
    ) -> Sample {
        let mut s = Sample {
            repeat,
            ..Sample::default()
        };
        if let Err(e) = self.measure(leg, profile, load, &mut s).await {
            s.error = Some(e.to_string());
        }
        s
    }

    async fn measure(
        &self,
        leg: &Leg,
        profile: Profile,
        load: &mut LoadTracker,
        s: &mut Sample,
    ) -> Result<(), BenchError> {
        let (bed, peers, secs) = (self.bed, self.peers, self.secs);
        let _server = server(bed, peers, profile).await?;
        let pids: Vec<u32> = leg.daemons.iter().map(|d| d.pid()).collect();

        s.background_load_pct = load.quiet().await?;
        let (t0, b0) = (cpu_ticks(&pids)?, bed.underlay_bytes()?);
        let one = iperf(bed, peers, profile, secs, Flow::Tcp(1)).await?;
        let (t1, b1) = (cpu_ticks(&pids)?, bed.underlay_bytes()?);
        s.gbps_1 = Some(one.bits_per_second / 1e9);
        s.retransmits_1 = one.retransmits;
        s.underlay_bytes = Some(b1.saturating_sub(b0));
        if leg.variant.is_tunnel() {
            let cpu_us = (t1.saturating_sub(t0)) as f64 * 1e6 / self.hz as f64;
            let packets = b1.saturating_sub(b0) as f64 / FULL_PACKET_BYTES as f64;
            s.daemon_cpu_us = Some(cpu_us);
            s.cpu_us_per_packet = (packets > 0.0).then(|| cpu_us / packets);
        }

        s.background_load_pct = s.background_load_pct.max(load.quiet().await?);
        let four = iperf(bed, peers, profile, secs, Flow::Tcp(4)).await?;
        s.gbps_4 = Some(four.bits_per_second / 1e9);
        s.retransmits_4 = four.retransmits;

        s.background_load_pct = s.background_load_pct.max(load.quiet().await?);
        s.rtt_us = Some(ping(bed, peers, profile).await?);
        Ok(())
    }
}
