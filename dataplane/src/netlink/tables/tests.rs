use super::*;

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
