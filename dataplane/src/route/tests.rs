use netlink_packet_core::Emitable;

use super::*;

fn r(s: &str) -> RouteSpec {
    let mut parts = s.split_whitespace();
    let mut spec = RouteSpec::to(parts.next().unwrap().parse().unwrap());
    while let Some(k) = parts.next() {
        match k {
            "via" => spec.via = Some(parts.next().unwrap().parse().unwrap()),
            "dev" => spec.dev = Some(parts.next().unwrap().parse().unwrap()),
            "table" => spec.table = parts.next().unwrap().parse().unwrap(),
            "onlink" => spec.onlink = true,
            "mtu" => spec.mtu = Some(parts.next().unwrap().parse().unwrap()),
            _ => panic!("{k}"),
        }
    }
    spec
}

#[test]
fn build_and_parse_round_trip() {
    for s in [
        "10.200.1.0/24 via 172.18.0.2 dev eth0",
        "0.0.0.0/0 via 10.0.0.1",
        "10.9.0.0/16 dev vx onlink table 1000",
        "0.0.0.0/0 via 10.0.0.1 mtu 1420",
    ] {
        let spec = r(s);
        let req = add(&spec, spec.dev.as_ref().map(|_| 9));
        let RouteNetlinkMessage::NewRoute(msg) = &req.message else {
            panic!()
        };
        let mut bytes = vec![0; msg.buffer_len()];
        msg.emit(&mut bytes);
        let back = parse(&bytes, |i| (i == 9).then(|| spec.dev.clone()).flatten()).unwrap();
        assert_eq!(back, spec, "{s}");
        assert_eq!(req.what, format!("add route {s}"));
    }
}

#[test]
fn a_table_dump_filters_by_table_in_header_and_attribute() {
    for (table, header) in [(100, 100), (18952, RouteHeader::RT_TABLE_UNSPEC)] {
        let req = dump(table);
        assert_eq!(req.mode, Mode::Dump);
        let RouteNetlinkMessage::GetRoute(m) = &req.message else {
            panic!("{req:?}")
        };
        assert_eq!(m.header.table, header);
        assert_eq!(m.attributes, [RouteAttribute::Table(table)]);
        // Strict checking refuses a dump request with any of these set.
        let h = &m.header;
        assert_eq!(
            (h.destination_prefix_length, h.source_prefix_length, h.tos),
            (0, 0, 0)
        );
    }
}

#[test]
fn only_unicast_routes_are_read_and_garbage_is_not() {
    let RouteNetlinkMessage::NewRoute(mut msg) = add(&r("10.1.0.0/16 dev x"), Some(3)).message
    else {
        panic!()
    };
    msg.header.kind = RouteType::Local;
    let mut bytes = vec![0; msg.buffer_len()];
    msg.emit(&mut bytes);
    assert_eq!(parse(&bytes, |_| None), None);
    assert_eq!(parse(&bytes[..8], |_| None), None, "truncated header");
    bytes[7] = 1;
    let back = parse(&bytes[..bytes.len() - 3], |_| None);
    assert!(back.is_some(), "a truncated attribute ends the list");
}

#[test]
fn large_table_ids_go_in_the_attribute() {
    let RouteNetlinkMessage::NewRoute(msg) =
        add(&r("10.0.0.0/8 dev x table 1000"), Some(1)).message
    else {
        panic!()
    };
    assert_eq!(msg.header.table, RouteHeader::RT_TABLE_UNSPEC);
    assert!(msg.attributes.contains(&RouteAttribute::Table(1000)));
    assert_eq!(msg.header.scope, RouteScope::Link);
}

#[test]
fn diff_touches_only_what_changed() {
    let cur = [
        r("10.1.0.0/16 via 1.1.1.1"),
        r("10.2.0.0/16 via 1.1.1.1"),
        r("10.3.0.0/16 via 1.1.1.1"),
    ];
    let want = [
        r("10.1.0.0/16 via 1.1.1.1"),
        r("10.2.0.0/16 via 2.2.2.2"),
        r("10.4.0.0/16 via 1.1.1.1"),
    ];
    let d = RouteDiff::new(&cur, &want);
    assert_eq!(
        d.remove,
        vec![r("10.2.0.0/16 via 1.1.1.1"), r("10.3.0.0/16 via 1.1.1.1")]
    );
    assert_eq!(
        d.add,
        vec![r("10.2.0.0/16 via 2.2.2.2"), r("10.4.0.0/16 via 1.1.1.1")]
    );
    assert!(RouteDiff::new(&want, &want).is_empty());
    // The kernel fills in the device of a gateway route: that is not a difference.
    let reported = [r("10.1.0.0/16 via 1.1.1.1 dev eth0")];
    assert!(RouteDiff::new(&reported, &[r("10.1.0.0/16 via 1.1.1.1")]).is_empty());
    // A device that was asked for is compared.
    let d = RouteDiff::new(&reported, &[r("10.1.0.0/16 via 1.1.1.1 dev eth1")]);
    assert_eq!((d.remove.len(), d.add.len()), (1, 1));
    // Added once each, in the order wanted; the same prefix in another table or family
    // is another route.
    let want = [
        r("10.9.0.0/16 via 1.1.1.1"),
        r("10.1.0.0/16 via 1.1.1.1 table 7"),
        r("10.9.0.0/16 via 1.1.1.1"),
        r("::/0 via ::1"),
    ];
    let d = RouteDiff::new(&[r("0.0.0.0/0 via 1.1.1.1")], &want);
    assert_eq!(d.add, [want[0].clone(), want[1].clone(), want[3].clone()]);
    assert_eq!(d.remove, [r("0.0.0.0/0 via 1.1.1.1")]);
}
