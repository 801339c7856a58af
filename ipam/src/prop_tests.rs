//! Property tests: random sequences of acquire / release / reserve / unreserve / restart.

use ipnet::Ipv4Net;
use proptest::prelude::*;

use crate::{ClusterId, Config, Ipam};

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        peer: u8,
        pod: Ipv4Net,
        ext: Ipv4Net,
    },
    Release {
        peer: u8,
    },
    Reserve(Ipv4Net),
    Unreserve(Ipv4Net),
    Restart,
}

/// Prefixes /20 to /28 drawn from a few small areas so that collisions are frequent: around the
/// local pod CIDR, elsewhere in 10/8, in the small pool 192.168/16, and outside every pool.
fn cidr() -> impl Strategy<Value = Ipv4Net> {
    let base = prop_oneof![
        Just(0x0ac8_0000u32),
        Just(0x0a46_0000),
        Just(0x0a00_0000),
        Just(0xc0a8_0000),
        Just(0x6440_0000)
    ];
    (base, 0u32..64, 20u8..=28)
        .prop_map(|(b, off, len)| Ipv4Net::new((b + (off << 12)).into(), len).unwrap().trunc())
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..6, cidr(), cidr()).prop_map(|(peer, pod, ext)| Op::Acquire { peer, pod, ext }),
        2 => (0u8..6).prop_map(|peer| Op::Release { peer }),
        1 => cidr().prop_map(Op::Reserve),
        1 => cidr().prop_map(Op::Unreserve),
        1 => Just(Op::Restart),
    ]
}

fn config() -> Config {
    let mut c = Config::new(
        "10.200.0.0/16".parse().unwrap(),
        "10.96.0.0/12".parse().unwrap(),
    );
    // A small extra pool makes exhaustion and pool boundaries reachable.
    c.pools = vec![
        "10.0.0.0/8".parse().unwrap(),
        "192.168.0.0/20".parse().unwrap(),
    ];
    c
}

fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(b) || b.contains(a)
}

/// Every range that must not be handed out again, by a naive scan.
fn live(ipam: &Ipam) -> Vec<Ipv4Net> {
    let c = ipam.config();
    let mut v = vec![c.pod_cidr, c.service_cidr, ipam.external_cidr()];
    v.extend(&c.reserved);
    for p in ipam.peers() {
        v.extend([p.pod_view, p.external_view]);
    }
    v
}

/// The naive model of "free": clear of every live range, and inside one pool or clear of all.
fn naive_free(ipam: &Ipam, n: &Ipv4Net) -> bool {
    let pools = &ipam.config().pools;
    let in_one = pools.iter().any(|p| p.contains(n));
    let touches = pools.iter().any(|p| overlaps(p, n));
    !live(ipam).iter().any(|l| overlaps(l, n)) && (in_one || !touches)
}

fn check_invariants(ipam: &Ipam) {
    let c = ipam.config();
    let fixed: Vec<Ipv4Net> = [c.pod_cidr, c.service_cidr, ipam.external_cidr()]
        .into_iter()
        .chain(c.reserved.iter().copied())
        .collect();
    let views: Vec<(String, Ipv4Net)> = ipam
        .peers()
        .flat_map(|p| {
            [
                (p.id.to_string(), p.pod_view),
                (p.id.to_string(), p.external_view),
            ]
        })
        .collect();
    for (i, (who, v)) in views.iter().enumerate() {
        for (other, w) in &views[i + 1..] {
            assert!(!overlaps(v, w), "{who} {v} overlaps {other} {w}");
        }
        for f in &fixed {
            assert!(!overlaps(v, f), "{who} {v} overlaps local range {f}");
        }
        let in_one = c.pools.iter().any(|p| p.contains(v));
        assert!(
            in_one || !c.pools.iter().any(|p| overlaps(p, v)),
            "{who} {v} straddles a pool boundary"
        );
    }
    for p in ipam.peers() {
        assert_eq!(p.pod_view.prefix_len(), p.pod_cidr.prefix_len());
        assert_eq!(p.external_view.prefix_len(), p.external_cidr.prefix_len());
    }
}

fn run(ops: &[Op]) -> Ipam {
    let mut ipam = Ipam::new(config()).unwrap();
    for op in ops {
        let before = ipam.state();
        let result = match op {
            Op::Acquire { peer, pod, ext } => {
                let id: ClusterId = format!("peer{peer}").parse().unwrap();
                let known = ipam.peer(&id).ok().cloned();
                let pod_free = naive_free(&ipam, pod);
                let r = ipam.acquire(&id, *pod, *ext);
                if let (Ok((pv, _)), None) = (&r, known)
                    && pod_free
                {
                    assert_eq!(pv, pod, "a free pod CIDR is kept");
                }
                r.map(drop)
            }
            Op::Release { peer } => ipam
                .release(&format!("peer{peer}").parse().unwrap())
                .map(drop),
            Op::Reserve(n) => ipam.add_reserved(*n),
            Op::Unreserve(n) => ipam.remove_reserved(*n),
            Op::Restart => {
                let state = ipam.state();
                let json = serde_json::to_vec(&state).unwrap();
                ipam = Ipam::restore(serde_json::from_slice(&json).unwrap()).unwrap();
                assert_eq!(ipam.state(), state, "a restart reproduces the state");
                Ok(())
            }
        };
        if result.is_err() {
            assert_eq!(ipam.state(), before, "a refused {op:?} changed the state");
        }
        check_invariants(&ipam);
    }
    ipam
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_every_invariant(ops in proptest::collection::vec(op(), 1..60)) {
        let a = run(&ops);
        let b = run(&ops);
        prop_assert_eq!(a.state(), b.state(), "same inputs in the same order give the same result");
    }

    #[test]
    fn a_free_external_cidr_is_kept_too(pod in cidr(), ext in cidr()) {
        let mut ipam = Ipam::new(config()).unwrap();
        prop_assume!(!overlaps(&pod, &ext));
        let (pod_free, ext_free) = (naive_free(&ipam, &pod), naive_free(&ipam, &ext));
        if let Ok((pv, ev)) = ipam.acquire(&"p".parse().unwrap(), pod, ext) {
            if pod_free { prop_assert_eq!(pv, pod); }
            if ext_free { prop_assert_eq!(ev, ext); }
        }
    }
}
