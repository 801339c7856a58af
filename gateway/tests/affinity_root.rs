//! Where the data threads run (needs root and two CPUs): lightly loaded, both share the lowest
//! CPU the process may use; under a bulk transfer they may use every allowed CPU; quiet again,
//! they go back; `pinWhenIdle: false` leaves them to the scheduler.

mod common;

use std::{thread, time::Duration};

use common::{Site, Spaces, eventually, iperf, prefix};

/// The `Cpus_allowed_list` of `site`'s two data threads (`wg-tun`, `wg-udp`).
fn data_threads(site: &Site) -> Vec<String> {
    let dir = format!("/proc/{}/task", site.pid());
    let mut lists = Vec::new();
    for t in std::fs::read_dir(&dir).unwrap() {
        let t = t.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(t.join("comm")) else {
            continue; // the thread ended between the listing and the read
        };
        if !matches!(comm.trim(), "wg-tun" | "wg-udp") {
            continue;
        }
        let status = std::fs::read_to_string(t.join("status")).unwrap();
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list in status")
            .trim()
            .to_owned();
        lists.push(list);
    }
    assert_eq!(lists.len(), 2, "two data threads in {dir}");
    lists
}

/// This process's allowed CPUs (the gateway inherits them) and the lowest of them.
fn allowed() -> (String, String) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let all = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_owned();
    let lowest = all.split([',', '-']).next().unwrap().to_owned();
    assert_ne!(
        all, lowest,
        "this test needs two CPUs or more (allowed: {all})"
    );
    (all, lowest)
}

#[tokio::test]
async fn data_threads_share_a_cpu_when_idle_and_spread_under_load() {
    let (all, lowest) = allowed();
    let mut spaces = Spaces::new();
    let (_wan, a, mut spokes) = common::hub(&mut spaces, &prefix("aff"), 1).await;
    let b: Site = spokes.pop().expect("one spoke");
    assert!(a.ping("10.71.0.2"), "a reaches b\n{}", a.log());
    let home = vec![lowest.clone(), lowest.clone()];
    assert!(
        eventually(5, || data_threads(&a) == home),
        "idle: both on CPU {lowest}: {:?}",
        data_threads(&a)
    );

    let _server = iperf::Server::start(&b.pod, "10.200.0.2", b.dir.join("iperf3.log"));
    let run = iperf::Client::start(&a.pod, "10.71.0.2", 4, 1.0);
    let spread = vec![all.clone(), all.clone()];
    let mut seen = Vec::new();
    let spread_seen = eventually(4, || {
        let now = data_threads(&a);
        seen.push(now.clone());
        now == spread
    });
    let rates = run.rates();
    assert!(spread_seen, "under load: spread over {all}: seen {seen:?}");
    assert!(
        iperf::median(&rates) > 10e6,
        "bulk TCP: {:?} Mbit/s",
        iperf::mbit(&rates)
    );
    assert!(
        eventually(5, || data_threads(&a) == home),
        "quiet again: back on CPU {lowest}: {:?}",
        data_threads(&a)
    );

    // Off: the scheduler places them, whatever the load.
    let entries = b.as_peer(Some("198.18.0.2:51840"), "10.71.0.0/16", "10.72.0.0/16");
    a.configure(&entries, "pinWhenIdle: false\n");
    assert!(
        eventually(5, || data_threads(&a) == spread),
        "off: {:?}",
        data_threads(&a)
    );
    thread::sleep(Duration::from_millis(700));
    assert_eq!(data_threads(&a), spread, "still off, idle");
}
