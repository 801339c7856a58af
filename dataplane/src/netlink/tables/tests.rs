use super::*;

#[test]
fn table_dump_filters_by_table_in_header_and_attribute() {
    for (table, header) in [(100, 100), (18952, RouteHeader::RT_TABLE_UNSPEC)] {
        let req = table_dump(table);
        assert_eq!(req.mode, Mode::Dump);
        let RouteNetlinkMessage::GetRoute(m) = &req.message else {
            panic!("{req:?}")
        };
        assert_eq!(m.header.table, header);
        assert_eq!(m.attributes, [RouteAttribute::Table(table)]);
        // Strict checking refuses a dump request with any of these set.
        assert_eq!(
            (
                m.header.destination_prefix_length,
                m.header.source_prefix_length,
                m.header.tos
            ),
            (0, 0, 0)
        );
    }
}

#[test]
fn links_are_asked_for_by_name_or_index() {
    let req = link_named(&"liqo.tunnel".parse().unwrap());
    let RouteNetlinkMessage::GetLink(m) = &req.message else {
        panic!()
    };
    assert_eq!(m.attributes, [LinkAttribute::IfName("liqo.tunnel".into())]);
    assert_eq!(req.what, "look up link liqo.tunnel");
    let RouteNetlinkMessage::GetLink(m) = link_indexed(7).message else {
        panic!()
    };
    assert_eq!((m.header.index, m.attributes.len()), (7, 0));
}
