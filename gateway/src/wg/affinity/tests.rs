//! The placement decision and the run-time reading.

use super::*;

fn load(demand: u64, waiting: u64) -> Load {
    Load { demand, waiting }
}

#[test]
fn spreads_at_once_under_load_and_goes_home_after_quiet_ticks() {
    let (mut p, mut q) = (Placement::Home, 0);
    for d in [0, 50, QUIET_PERMILLE, BUSY_PERMILLE] {
        (p, q) = decide(p, q, load(d, 0));
        assert_eq!(p, Placement::Home, "{d}‰ keeps the threads home");
    }
    (p, q) = decide(p, q, load(BUSY_PERMILLE + 1, 0));
    assert_eq!((p, q), (Placement::Spread, 0));
    for i in 1..QUIET_TICKS {
        (p, q) = decide(p, q, load(QUIET_PERMILLE - 1, 0));
        assert_eq!((p, q), (Placement::Spread, i), "quiet tick {i}");
    }
    // A busy tick in between starts the count again.
    let (p2, q2) = decide(p, q, load(QUIET_PERMILLE, 0));
    assert_eq!((p2, q2), (Placement::Spread, 0));
    (p, q) = decide(p, q, load(0, 0));
    assert_eq!((p, q), (Placement::Home, 0));
    // A tick with the load gone (not only lower) is enough.
    let spread = decide(p, q, load(BUSY_PERMILLE + 1, 0));
    assert_eq!(spread, (Placement::Spread, 0));
    assert_eq!(
        decide(spread.0, spread.1, load(IDLE_PERMILLE - 1, 0)),
        (Placement::Home, 0)
    );
    assert_eq!(
        decide(spread.0, spread.1, load(IDLE_PERMILLE, 0)).0,
        Placement::Spread
    );
}

#[test]
fn waiting_for_a_shared_cpu_spreads_even_when_little_ran() {
    // Two gateways saturating one home CPU each run half of the tick and wait the rest.
    assert_eq!(
        decide(Placement::Home, 0, load(1000, 500)).0,
        Placement::Spread
    );
    // A light gateway behind a busy neighbour on its home CPU.
    assert_eq!(
        decide(Placement::Home, 0, load(150, WAITING_PERMILLE + 1)).0,
        Placement::Spread
    );
    assert_eq!(
        decide(Placement::Home, 0, load(150, WAITING_PERMILLE)).0,
        Placement::Home
    );
}

#[test]
fn the_state_word_changes_whole_and_always_moves_on() {
    let s = State(0);
    assert_eq!(
        (s.placement(), s.enabled(), s.target()),
        (Placement::Home, false, Placement::Spread)
    );
    let on = s.with(Placement::Home, true);
    assert_eq!(
        (on.placement(), on.enabled(), on.target()),
        (Placement::Home, true, Placement::Home)
    );
    let spread = on.with(Placement::Spread, true);
    assert_eq!(spread.target(), Placement::Spread);
    assert_ne!(on, s);
    assert_ne!(
        spread.with(Placement::Spread, true),
        spread,
        "a new generation each change"
    );
    let wrapped = State(u32::MAX).with(Placement::Home, true);
    assert_eq!(
        (wrapped.placement(), wrapped.enabled()),
        (Placement::Home, true)
    );
}

#[test]
fn a_thread_run_time_is_read_and_grows() {
    use nix::time::{ClockId, clock_gettime};
    let cpu = || {
        let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap();
        t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128
    };
    let tid = nix::unistd::gettid().as_raw();
    let a = sched_times(tid).expect("schedstat of this thread");
    // 10 ms of this thread's own CPU time, however busy the machine is.
    let start = cpu();
    while cpu() - start < 10_000_000 {
        std::hint::spin_loop();
    }
    let b = sched_times(tid).expect("schedstat of this thread");
    assert!(b.0 >= a.0 + 10_000_000, "ran {a:?} then {b:?} ns");
    assert!(b.1 >= a.1, "waited {a:?} then {b:?} ns");
    assert!(b.2 >= a.2 && a.2 > 0, "runs {a:?} then {b:?}");
    assert_eq!(sched_times(-1), None);
}

#[test]
fn only_a_move_from_home_to_every_cpu_with_pinning_on_counts_as_a_spread() {
    let a = Affinity::new(2);
    let to = |p: Placement| move |s: State| (s.placement() != p).then(|| s.with(p, s.enabled()));
    a.update(to(Placement::Spread));
    assert_eq!(a.spreads(), 0, "pinning off: the threads were never home");
    a.update(to(Placement::Home));
    a.set_enabled(true);
    assert!(a.pinned());
    a.update(to(Placement::Spread));
    a.update(to(Placement::Spread));
    assert_eq!(a.spreads(), 1, "one move, then nothing to change");
    a.update(to(Placement::Home));
    a.set_enabled(false);
    assert_eq!(a.spreads(), 1, "turning pinning off is not a spread");
    a.set_enabled(true);
    a.update(to(Placement::Spread));
    assert_eq!(a.spreads(), 2);
}
