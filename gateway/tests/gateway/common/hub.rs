//! Sites around a hub on one WAN, and strangers on it.

use dataplane::Netns;

use super::{Site, Spaces, wan, wire};

/// A namespace on the WAN bridge with `addr` (e.g. `198.18.0.66/24`) on its `wan0` and nothing
/// else: a stranger on the internet, where attacks come from.
pub async fn outsider(
    spaces: &mut Spaces,
    prefix: &str,
    name: &str,
    wan: &Netns,
    addr: &str,
) -> Netns {
    let ns = spaces.create(&format!("{prefix}-{name}")).await;
    wire(wan, name, "", Some("br0"), &ns, "wan0", addr).await;
    ns
}

/// How the hub and its spoke `i` (1 for b, 2 for c, …) see each other's pods: the hub sees the
/// spoke's as `10.{61+10i}.0.0/16` (b: 10.71/16), the spoke the hub's as `10.{62+10i}.0.0/16`
/// (b: 10.72/16).
pub fn spoke_views(i: usize) -> (String, String) {
    let n = 61 + 10 * i;
    (format!("10.{n}.0.0/16"), format!("10.{}.0.0/16", n + 1))
}

/// A WAN, a hub site `a` (198.18.0.1) and `spokes` sites b, c, … (198.18.0.2, .3, …) each peered
/// with the hub only, seeing each other as [`spoke_views`] says; all started.
pub async fn hub(spaces: &mut Spaces, prefix: &str, spokes: usize) -> (Netns, Site, Vec<Site>) {
    assert!(spokes <= 9, "views up to 10.152/16");
    let wan = wan(spaces, prefix).await;
    let mut a = Site::new(spaces, prefix, "a", &wan, "198.18.0.1/24").await;
    let mut sites = Vec::new();
    let mut entries = String::new();
    for i in 1..=spokes {
        let name = char::from(b'a' + i as u8).to_string();
        let addr = format!("198.18.0.{}", i + 1);
        let s = Site::new(spaces, prefix, &name, &wan, &format!("{addr}/24")).await;
        let (seen_by_hub, seen_by_spoke) = spoke_views(i);
        s.configure(
            &a.as_peer(Some("198.18.0.1:51840"), &seen_by_spoke, &seen_by_hub),
            "",
        );
        entries.push_str(&s.as_peer(Some(&format!("{addr}:51840")), &seen_by_hub, &seen_by_spoke));
        sites.push(s);
    }
    a.configure(&entries, "");
    a.start();
    for s in &mut sites {
        s.start();
    }
    (wan, a, sites)
}
