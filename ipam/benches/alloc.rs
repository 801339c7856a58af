//! Allocation, restart and memory cost of the IPAM at 10,000 peers.
//!
//! Every peer announces a pod CIDR and an external CIDR with prefix lengths from /20 to /28,
//! drawn from a seeded PRNG: most peers announce the same few well-known prefixes sized down
//! (10.244.0.0, 10.200.0.0 — our own pod CIDR —, 10.70.0.0 — our own external CIDR —, ...), so
//! almost all of them collide and get remapped; the rest announce random aligned prefixes, in
//! the pools or outside them (100.64.0.0/10).
//!
//! - `acquire/10k_peers`: acquiring all 10,000 peers on a fresh [`Ipam`]; throughput is per
//!   allocation (two per peer). Target: under 10 µs per allocation.
//! - `restore/10k_peers`: [`Ipam::restore`] of the state after those peers (the state clone is
//!   not timed). Target, together with the file read: under 200 ms.
//! - `reload_file/10k_peers`: [`FileStore::load`] plus [`Ipam::restore`] from a file written once,
//!   i.e. the restart reload. Target: under 200 ms.
//!
//! Before the benchmarks run, the 10,000-peer IPAM is built once and checked (every acquisition
//! succeeded, no two ranges overlap), and the resident memory it costs and the size of its state
//! are printed as `key: value` lines (`rss_before_kib`, `rss_after_kib`, `rss_delta_kib`,
//! `state_json_bytes`, ...).

use std::{hint::black_box, time::Duration};

use criterion::{BatchSize, Criterion, SamplingMode, Throughput};
use ipam::{
    ClusterId, Config, Ipam, State,
    store::{FileStore, Store},
};
use ipnet::Ipv4Net;

const PEERS: usize = 10_000;
const SEED: u64 = 0x1ea5_0ca1_c0de_2024;

/// One peer's announcement.
struct Request {
    id: ClusterId,
    pod: Ipv4Net,
    external: Ipv4Net,
}

/// xorshift64*: small, seeded, good enough to spread prefixes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }

    /// A prefix length from /20 to /28, mostly /24 and longer, so that 20,000 ranges fit the
    /// default pools (about 7M of their 17.9M addresses on average).
    fn prefix_len(&mut self) -> u8 {
        // Percent weights for /20, /21, ..., /28.
        const WEIGHTS: [u64; 9] = [2, 3, 5, 10, 30, 15, 15, 10, 10];
        let mut x = self.below(100);
        for (len, w) in (20u8..).zip(WEIGHTS) {
            if x < w {
                return len;
            }
            x -= w;
        }
        unreachable!("weights sum to 100")
    }

    /// A random aligned prefix of length `len` inside a random one of `within`.
    fn prefix_in(&mut self, within: &[&str], len: u8) -> Ipv4Net {
        let outer: Ipv4Net = within[self.below(within.len() as u64) as usize]
            .parse()
            .expect("literal");
        let host_mask = !u32::from(outer.netmask());
        let addr = u32::from(outer.network()) | (self.next() as u32 & host_mask);
        Ipv4Net::new(addr.into(), len).expect("len <= 32").trunc()
    }

    /// A prefix of a random length: 70% of the time at one of the `common` addresses, else
    /// random in the pools or in 100.64.0.0/10 (outside every pool).
    fn announced(&mut self, common: &[&str]) -> Ipv4Net {
        let len = self.prefix_len();
        if self.below(10) < 7 {
            let base = common[self.below(common.len() as u64) as usize];
            format!("{base}/{len}").parse().expect("literal, aligned")
        } else {
            const ANYWHERE: [&str; 4] = [
                "10.0.0.0/8",
                "172.16.0.0/12",
                "192.168.0.0/16",
                "100.64.0.0/10",
            ];
            self.prefix_in(&ANYWHERE, len)
        }
    }
}

/// The 10,000 announcements, always the same.
fn requests() -> Vec<Request> {
    // Well-known pod CIDRs (ours among them) and external CIDRs (ours, the default, first).
    const PODS: [&str; 4] = ["10.244.0.0", "10.200.0.0", "10.42.0.0", "172.16.0.0"];
    const EXTERNALS: [&str; 2] = ["10.70.0.0", "10.71.0.0"];
    let mut rng = Rng(SEED);
    (0..PEERS)
        .map(|i| {
            let pod = rng.announced(&PODS);
            let external = loop {
                let e = rng.announced(&EXTERNALS);
                if !e.contains(&pod) && !pod.contains(&e) {
                    break e;
                }
            };
            Request {
                id: format!("peer{i:05}").parse().expect("valid cluster ID"),
                pod,
                external,
            }
        })
        .collect()
}

fn config() -> Config {
    Config::new(
        "10.200.0.0/16".parse().expect("literal"),
        "10.96.0.0/12".parse().expect("literal"),
    )
}

/// Acquires every request on a fresh IPAM, panicking on the first failure.
fn acquire_all(requests: &[Request]) -> Ipam {
    let mut ipam = Ipam::new(config()).expect("valid config");
    for r in requests {
        if let Err(e) = ipam.acquire(&r.id, r.pod, r.external) {
            panic!("acquiring {} ({} / {}): {e}", r.id, r.pod, r.external);
        }
    }
    ipam
}

/// Panics unless every peer is present with views of the announced lengths, and no two ranges
/// (peer views and local ranges) overlap. Returns how many views were remapped.
fn check(ipam: &Ipam, requests: &[Request]) -> usize {
    assert_eq!(ipam.peers().count(), requests.len(), "every peer acquired");
    let mut remapped = 0;
    let mut ranges: Vec<(u32, u32, String)> = vec![
        range(&ipam.config().pod_cidr, "local pod CIDR".into()),
        range(&ipam.config().service_cidr, "local service CIDR".into()),
        range(&ipam.external_cidr(), "local external CIDR".into()),
    ];
    for r in requests {
        let p = ipam.peer(&r.id).expect("acquired");
        for (announced, view, what) in [
            (r.pod, p.pod_view, "pod"),
            (r.external, p.external_view, "external"),
        ] {
            assert_eq!(view.prefix_len(), announced.prefix_len(), "{} {what}", r.id);
            remapped += usize::from(view != announced);
            ranges.push(range(&view, format!("{} {what} view {view}", r.id)));
        }
    }
    ranges.sort_unstable_by_key(|(lo, hi, _)| (*lo, *hi));
    for w in ranges.windows(2) {
        assert!(w[0].1 < w[1].0, "{} overlaps {}", w[0].2, w[1].2);
    }
    remapped
}

fn range(n: &Ipv4Net, what: String) -> (u32, u32, String) {
    (n.network().into(), n.broadcast().into(), what)
}

/// This process's resident memory, from `/proc/self/status`.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// Builds the 10,000-peer IPAM once, checks it, prints its memory and state size, and returns
/// its state.
fn measure_once(requests: &[Request]) -> State {
    let before = rss_kib();
    let ipam = acquire_all(requests);
    let after = rss_kib();
    let remapped = check(&ipam, requests);
    let state = ipam.state();
    let json = serde_json::to_vec(&state).expect("encoding the state");
    println!("peers: {PEERS}");
    println!("remapped_views: {remapped} of {}", 2 * PEERS);
    println!("rss_before_kib: {before}");
    println!("rss_after_kib: {after}");
    println!("rss_delta_kib: {}", after.saturating_sub(before));
    println!("state_json_bytes: {}", json.len());
    drop(ipam);
    state
}

fn bench_acquire(c: &mut Criterion, requests: &[Request]) {
    let mut g = c.benchmark_group("acquire");
    g.sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements(2 * PEERS as u64));
    g.bench_function("10k_peers", |b| {
        b.iter_batched(
            || Ipam::new(config()).expect("valid config"),
            |mut ipam| {
                for r in requests {
                    black_box(ipam.acquire(&r.id, r.pod, r.external).expect("acquire"));
                }
                ipam
            },
            BatchSize::LargeInput,
        );
    });
    g.finish();
}

fn bench_restore(c: &mut Criterion, state: &State) {
    let mut g = c.benchmark_group("restore");
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function("10k_peers", |b| {
        b.iter_batched(
            || state.clone(),
            |s| Ipam::restore(s).expect("restore"),
            BatchSize::LargeInput,
        );
    });
    g.finish();
}

fn bench_reload_file(c: &mut Criterion, state: &State) {
    let dir = tempfile::Builder::new()
        .prefix("ipam-bench-")
        .tempdir()
        .expect("creating a temporary directory");
    let mut store = FileStore::new(dir.path().join("state.json"));
    store.save(state).expect("saving the state");
    let mut g = c.benchmark_group("reload_file");
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function("10k_peers", |b| {
        b.iter_with_large_drop(|| {
            let loaded = store.load().expect("loading").expect("state saved");
            Ipam::restore(loaded).expect("restore")
        });
    });
    g.finish();
    dir.close().expect("removing the temporary directory");
}

fn main() {
    let requests = requests();
    let state = measure_once(&requests);
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    bench_acquire(&mut c, &requests);
    bench_restore(&mut c, &state);
    bench_reload_file(&mut c, &state);
    c.final_summary();
}
