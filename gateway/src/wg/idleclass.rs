//! The data threads' scheduling class while they live on their home CPUs. When a lane's thread
//! wakes the application an answer is for (writing it to the TUN device), the scheduler puts the
//! application on an *idle* CPU rather than on the one our thread still runs on: on a virtual
//! machine that is a wake-up of a halted vCPU, tens of microseconds, on every answer (and the
//! application's next request then leaves from the other CPU, where the same happens). A CPU
//! that runs only `SCHED_IDLE` threads counts as idle to the scheduler: with the data threads in
//! that class, the application stays on its CPU and preempts our thread at once.
//!
//! `SCHED_IDLE` threads get next to no CPU next to busy ones, so the class is only used while
//! every home CPU was idle for at least [`IDLE_PERMILLE`] of the last timer tick (and the
//! threads are home: lightly loaded); a thread that then waits for its CPU is seen by
//! `wg::affinity` within a tick and spreads, in the normal class.

use std::io;

/// Idle share of a home CPU, in thousandths of a tick, from which its lane's threads may run
/// in the idle class.
pub(super) const IDLE_PERMILLE: u64 = 500;

/// Idle and total time of every CPU (`/proc/stat`, in clock ticks), indexed by CPU number;
/// `None` for a CPU the kernel does not list.
pub(super) fn cpu_times(stat: &str) -> Vec<Option<(u64, u64)>> {
    let mut out: Vec<Option<(u64, u64)>> = Vec::new();
    for line in stat.lines() {
        let mut f = line.split_whitespace();
        let Some(cpu) = f
            .next()
            .and_then(|n| n.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
        if v.len() < 5 {
            continue;
        }
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let idle = v[3] + v[4];
        let total: u64 = v.iter().take(8).sum();
        if out.len() <= cpu {
            out.resize(cpu + 1, None);
        }
        out[cpu] = Some((idle, total));
    }
    out
}

/// Whether every CPU of `homes` was idle for at least [`IDLE_PERMILLE`] between `before` and
/// `now`; false when one cannot be told (or nothing ran: no time passed).
pub(super) fn all_idle(
    homes: &[usize],
    before: &[Option<(u64, u64)>],
    now: &[Option<(u64, u64)>],
) -> bool {
    !homes.is_empty()
        && homes.iter().all(|&c| {
            match (
                before.get(c).copied().flatten(),
                now.get(c).copied().flatten(),
            ) {
                (Some((i0, t0)), Some((i1, t1))) if t1 > t0 => {
                    (i1.saturating_sub(i0)) * 1000 / (t1 - t0) >= IDLE_PERMILLE
                }
                _ => false,
            }
        })
}

/// The CPU times now (none if `/proc/stat` cannot be read).
pub(super) fn read_cpu_times() -> Vec<Option<(u64, u64)>> {
    std::fs::read_to_string("/proc/stat")
        .map(|s| cpu_times(&s))
        .unwrap_or_default()
}

/// Puts the calling thread in the idle class (`true`) or the normal one.
#[expect(
    unsafe_code,
    reason = "sched_setscheduler(2) takes a struct sched_param"
)]
pub(super) fn set_idle_class(idle: bool) -> io::Result<()> {
    let policy = if idle {
        libc::SCHED_IDLE
    } else {
        libc::SCHED_OTHER
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for the call; 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  10 0 10 80 0 0 0 0 0 0\n\
                        cpu0 5 0 5 40 0 0 0 0 0 0\n\
                        cpu1 5 0 5 40 0 0 0 0 0 0\n\
                        intr 1 2 3\n";

    #[test]
    fn cpu_times_are_read_per_cpu_and_idle_shares_judged() {
        let before = cpu_times(STAT);
        assert_eq!(before, vec![Some((40, 50)), Some((40, 50))]);
        // CPU 0 idle 60 of 100 ticks, CPU 1 idle 30 of 100.
        let now = cpu_times("cpu0 25 0 15 100 0 0 0 0 0 0\ncpu1 45 0 35 70 0 0 0 0 0 0\n");
        assert!(all_idle(&[0], &before, &now));
        assert!(!all_idle(&[1], &before, &now));
        assert!(!all_idle(&[0, 1], &before, &now));
        // Unknown CPUs, no time passed, no homes: not idle.
        assert!(!all_idle(&[7], &before, &now));
        assert!(!all_idle(&[0], &before, &before));
        assert!(!all_idle(&[], &before, &now));
    }

    #[test]
    fn this_thread_goes_to_the_idle_class_and_back() {
        let policy = || std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // Field 41 of stat is the policy; the comm field may hold spaces, so count from ')'.
        let field = |s: String| -> String {
            let rest = &s[s.rfind(')').unwrap() + 2..];
            rest.split_whitespace().nth(41 - 3).unwrap().to_owned()
        };
        std::thread::spawn(move || {
            set_idle_class(true).unwrap();
            assert_eq!(field(policy()), "5", "SCHED_IDLE");
            set_idle_class(false).unwrap();
            assert_eq!(field(policy()), "0", "SCHED_OTHER");
        })
        .join()
        .unwrap();
    }
}
