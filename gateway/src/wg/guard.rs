//! Admission of handshake messages, decided before any key exchange is spent on them: the
//! kernel's scheme (its thresholds and rates), as plain state that takes the time and the queue
//! depth as input (no I/O, no clock).
//!
//! A handshake costs a few X25519 operations (~100 µs); a data packet a few microseconds. So
//! the receive path only checks mac1 (only someone who knows our public key can make one) and
//! queues the message for the handshake thread ([`super::handshake`]), which asks this guard:
//! 1. while [`LOAD_DEPTH`] or more messages wait in the queue, or more than [`GLOBAL_RATE`] a
//!    second arrive (and for a second after either) the device is *under load*: a message
//!    must then also carry a valid mac2, which proves its sender receives at its source
//!    address (it answered our cookie reply); without one it gets a cookie reply instead of a
//!    key exchange;
//! 2. under load, each source address (an IPv6 /64 counts as one) gets a token bucket of
//!    [`PER_SOURCE_RATE`] per second, [`PER_SOURCE_BURST`] at once: one attacker who answers
//!    cookies gets a trickle of handshakes, not a core;
//! 3. a global bucket of [`GLOBAL_RATE`] per second caps all sources together; the queue is
//!    bounded, and what does not fit is dropped: handshakes wait, data never does.
//!
//! Why the arrival rate counts as load too (the kernel looks at the queue only): the global
//! bucket drops a flood without spending a key exchange, so the queue may never grow deep
//! enough to ask the flood for a cookie, and the flood would keep taking the rate every honest
//! peer shares. Every message the guard is asked about takes a token of a second bucket of
//! the same rate, whatever its verdict (cookies and refusals too): while it is empty the
//! device stays under load, so a sustained flood is held to its source's trickle, not let
//! through a bucketful each time a quiet second would have ended the load.

use std::{
    collections::HashMap,
    net::IpAddr,
    time::{Duration, Instant},
};

pub use super::tuning::GLOBAL_RATE;
use super::tuning::QUEUE;

/// Messages waiting for the handshake thread from which the device is under load (an eighth of
/// the queue, as the kernel).
pub const LOAD_DEPTH: usize = QUEUE / 8;
/// Handshakes per second one source address may start while under load (as the kernel).
pub const PER_SOURCE_RATE: u64 = 20;
/// How many of them at once.
pub const PER_SOURCE_BURST: u64 = 5;
/// Source addresses tracked at most; past that, new sources are refused while under load.
pub const MAX_SOURCES: usize = 65_536;

const NANOS: u64 = 1_000_000_000;

/// A token bucket counted in nanoseconds of credit: `rate` per second, `burst` at once.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    credit: u64,
    last: Instant,
}

impl Bucket {
    /// A full bucket.
    pub fn full(rate: u64, burst: u64, now: Instant) -> Bucket {
        Bucket {
            credit: cost(rate) * burst,
            last: now,
        }
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, rate: u64, burst: u64, now: Instant) -> bool {
        let gained =
            u64::try_from(now.saturating_duration_since(self.last).as_nanos()).unwrap_or(u64::MAX);
        self.last = now;
        self.credit = self.credit.saturating_add(gained).min(cost(rate) * burst);
        if self.credit >= cost(rate) {
            self.credit -= cost(rate);
            true
        } else {
            false
        }
    }

    /// Whether the bucket would be full at `now` (nothing to remember about its source).
    fn refilled(&self, rate: u64, burst: u64, now: Instant) -> bool {
        let gained = now.saturating_duration_since(self.last).as_nanos();
        u128::from(self.credit) + gained >= u128::from(cost(rate) * burst)
    }
}

fn cost(rate: u64) -> u64 {
    NANOS / rate.max(1)
}

/// Whether the handshake thread is under load: a queue of `depth` or more waiting messages, or
/// an overrun ([`Load::overrun`]), now or less than a second ago (a flood does not get a fresh
/// allowance of unchecked handshakes each time the queue drains).
#[derive(Debug, Clone)]
pub struct Load {
    depth: usize,
    last_over: Option<Instant>,
}

impl Load {
    /// Under load from `depth` waiting messages.
    pub fn new(depth: usize) -> Load {
        Load {
            depth,
            last_over: None,
        }
    }

    /// Whether the device is under load with `waiting` messages in the queue at `now`.
    pub fn observe(&mut self, now: Instant, waiting: usize) -> bool {
        if waiting >= self.depth {
            self.last_over = Some(now);
            return true;
        }
        self.last_over
            .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_secs(1))
    }

    /// Demand exceeded what the device serves at `now`, whatever the queue's depth: under load
    /// for the next second.
    pub fn overrun(&mut self, now: Instant) {
        self.last_over = Some(now);
    }
}

/// What becomes of a handshake message whose mac1 is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Hand it to the handshake thread.
    Admit,
    /// Under load and without a valid mac2: answer with a cookie reply.
    Cookie,
    /// Under load and its source used up its bucket, or too many sources are tracked.
    SourceLimited,
    /// Every source together used up the global bucket.
    GlobalLimited,
}

/// The admission state of the receive path.
#[derive(Debug)]
pub struct Guard {
    load: Load,
    global: Bucket,
    /// Every message asked about takes one (at [`GLOBAL_RATE`]): empty is an overrun.
    demand: Bucket,
    sources: HashMap<IpAddr, Bucket>,
    last_sweep: Instant,
}

/// The key of a source: the address, or its /64 for IPv6.
fn source(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
    }
}

impl Guard {
    /// A guard with nothing seen yet.
    pub fn new(now: Instant) -> Guard {
        Guard {
            load: Load::new(LOAD_DEPTH),
            global: Bucket::full(GLOBAL_RATE, GLOBAL_RATE, now),
            demand: Bucket::full(GLOBAL_RATE, GLOBAL_RATE, now),
            sources: HashMap::new(),
            last_sweep: now,
        }
    }

    /// Whether the device is under load, with `waiting` messages still in the queue.
    pub fn under_load(&mut self, now: Instant, waiting: usize) -> bool {
        self.load.observe(now, waiting)
    }

    /// The verdict on a handshake message from `from` whose mac1 is valid; `mac2_ok` says
    /// whether its mac2 is valid (only asked under load).
    pub fn admit(
        &mut self,
        from: IpAddr,
        under_load: bool,
        mac2_ok: impl FnOnce() -> bool,
        now: Instant,
    ) -> Verdict {
        self.sweep(now);
        // Counted before the verdict: under load, cookies and refusals are demand too.
        if !self.demand.take(GLOBAL_RATE, GLOBAL_RATE, now) {
            self.load.overrun(now);
        }
        if under_load {
            if !mac2_ok() {
                return Verdict::Cookie;
            }
            let key = source(from);
            let full = self.sources.len() >= MAX_SOURCES;
            let bucket = match self.sources.get_mut(&key) {
                Some(b) => b,
                None if full => return Verdict::SourceLimited,
                None => self.sources.entry(key).or_insert(Bucket::full(
                    PER_SOURCE_RATE,
                    PER_SOURCE_BURST,
                    now,
                )),
            };
            if !bucket.take(PER_SOURCE_RATE, PER_SOURCE_BURST, now) {
                return Verdict::SourceLimited;
            }
        }
        if self.global.take(GLOBAL_RATE, GLOBAL_RATE, now) {
            Verdict::Admit
        } else {
            Verdict::GlobalLimited
        }
    }

    /// Sources tracked now.
    pub fn sources(&self) -> usize {
        self.sources.len()
    }

    /// Once a second, forgets the sources whose bucket has refilled.
    fn sweep(&mut self, now: Instant) {
        if now.saturating_duration_since(self.last_sweep) < Duration::from_secs(1) {
            return;
        }
        self.last_sweep = now;
        self.sources
            .retain(|_, b| !b.refilled(PER_SOURCE_RATE, PER_SOURCE_BURST, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn load_follows_the_queue_and_ends_a_second_after_it_drained() {
        let t0 = Instant::now();
        let mut l = Load::new(3);
        assert!(!l.observe(t0, 0) && !l.observe(t0, 2));
        assert!(l.observe(ms(t0, 10), 3));
        assert!(
            l.observe(ms(t0, 900), 0),
            "drained, but over the depth less than a second ago"
        );
        assert!(!l.observe(ms(t0, 1_011), 0), "a quiet second ends the load");
    }

    #[test]
    fn a_source_gets_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let mut g = Guard::new(t0);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let admitted = (0..100)
            .filter(|_| g.admit(ip, true, || true, t0) == Verdict::Admit)
            .count();
        assert_eq!(admitted as u64, PER_SOURCE_BURST);
        // One second later: 20 more at most, whatever is sent.
        let mut later = 0;
        for i in 0..1_000 {
            if g.admit(ip, true, || true, ms(t0, 1 + i)) == Verdict::Admit {
                later += 1;
            }
        }
        assert!((19..=21).contains(&later), "{later} in a second");
        // Another source is not affected.
        let other: IpAddr = "192.0.2.8".parse().unwrap();
        assert_eq!(g.admit(other, true, || true, ms(t0, 1_000)), Verdict::Admit);
    }

    #[test]
    fn without_load_no_source_limit_and_no_mac2_asked() {
        let t0 = Instant::now();
        let mut g = Guard::new(t0);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        for _ in 0..50 {
            assert_eq!(
                g.admit(ip, false, || panic!("mac2 asked"), t0),
                Verdict::Admit
            );
        }
        assert_eq!(g.sources(), 0);
    }

    #[test]
    fn under_load_a_missing_mac2_asks_for_a_cookie() {
        let t0 = Instant::now();
        let mut g = Guard::new(t0);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(g.admit(ip, true, || false, t0), Verdict::Cookie);
    }

    #[test]
    fn the_global_bucket_caps_many_sources() {
        let t0 = Instant::now();
        let mut g = Guard::new(t0);
        let mut admitted = 0;
        for i in 0..(GLOBAL_RATE as u32 * 2) {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            if g.admit(ip, true, || true, t0) == Verdict::Admit {
                admitted += 1;
            }
        }
        assert_eq!(admitted, GLOBAL_RATE);
    }

    #[test]
    fn more_than_the_global_rate_arriving_puts_the_device_under_load_for_a_second() {
        let t0 = Instant::now();
        let mut g = Guard::new(t0);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        // A flood the queue never notices: every message handled at once (no waiting).
        let mut admitted = 0;
        for _ in 0..GLOBAL_RATE * 2 {
            if g.under_load(t0, 0) {
                break;
            }
            if g.admit(ip, false, || true, t0) == Verdict::Admit {
                admitted += 1;
            }
        }
        assert_eq!(admitted, GLOBAL_RATE, "the bucket's burst, then an overrun");
        let under_load = g.under_load(ms(t0, 999), 0);
        assert!(under_load, "under load after the overrun");
        assert_eq!(
            g.admit(ip, under_load, || false, ms(t0, 999)),
            Verdict::Cookie,
            "so the flood is asked for a cookie"
        );
        assert!(!g.under_load(ms(t0, 2_000), 0), "a quiet second ends it");
    }

    #[test]
    fn a_sustained_flood_that_answers_cookies_gets_its_sources_trickle_only() {
        let t0 = Instant::now();
        let mut g = Guard::new(t0);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        // 20,000 a second for 5 s, a valid mac2 on each, the queue never deep.
        let mut admitted = 0u64;
        for i in 0..100_000u64 {
            let now = t0 + Duration::from_micros(50 * i);
            let under_load = g.under_load(now, 0);
            if g.admit(ip, under_load, || true, now) == Verdict::Admit {
                admitted += 1;
            }
        }
        // The bucket's first burst (and what refills in the ~0.1 s the flood takes to drain
        // it), then 20 a second: not a bucketful each second (that was over 10,000).
        let most = GLOBAL_RATE * 12 / 10 + 5 * PER_SOURCE_RATE + PER_SOURCE_BURST;
        assert!(admitted <= most, "{admitted} admitted (at most {most})");
        // Another source that answers cookies still gets in.
        let other: IpAddr = "192.0.2.8".parse().unwrap();
        let now = t0 + Duration::from_secs(5);
        let under_load = g.under_load(now, 0);
        assert!(under_load);
        assert_eq!(g.admit(other, under_load, || true, now), Verdict::Admit);
    }

    #[test]
    fn idle_sources_are_forgotten_and_ipv6_counts_per_64() {
        let t0 = Instant::now();
        let mut g = Guard::new(t0);
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2::ffff".parse().unwrap();
        for _ in 0..PER_SOURCE_BURST {
            assert_eq!(g.admit(a, true, || true, t0), Verdict::Admit);
        }
        assert_eq!(g.admit(b, true, || true, t0), Verdict::SourceLimited);
        assert_eq!(g.sources(), 1);
        g.admit("192.0.2.1".parse().unwrap(), false, || true, ms(t0, 2_000));
        assert_eq!(g.sources(), 0, "refilled buckets are swept");
    }
}
