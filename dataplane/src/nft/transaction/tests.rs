use super::*;
use crate::nft::{AddrType, MarkMap, MarkPrefixMap, Ruleset};
use crate::{
    batch::{self, Msg},
    nft::elements::{
        self, diff,
        tests::{diff_of, ruleset},
    },
};

fn id(s: &str) -> Ident {
    s.parse().unwrap()
}

/// The `NFTA_SET_ELEM_LIST_ELEMENTS` attribute of the message at `i` (table `t`, set `s`/`m`).
fn elements_attr(t: &Transaction, i: usize) -> Vec<u8> {
    let msgs = batch::messages(&t.bytes).unwrap();
    let m: Msg<'_> = msgs[i];
    // header, nfgenmsg, then table "t" and the set's name (8 bytes each).
    m.bytes[16 + 4 + 8 + 8..].to_vec()
}

/// A table with a mark map `r` and a mark prefix map `d` of /24s.
fn marks(ranges: &[(&str, u32)], marked: &[(u32, &str, &str)]) -> Ruleset {
    let net = |s: &str| s.parse::<IpNet>().unwrap();
    let mut rs = Ruleset::new(Family::Ip, id("t"));
    rs.mark_maps.push(MarkMap {
        name: id("r"),
        addr: AddrType::V4,
        entries: ranges.iter().map(|(n, m)| (net(n), *m)).collect(),
    });
    rs.mark_prefix_maps.push(MarkPrefixMap {
        name: id("d"),
        addr: AddrType::V4,
        prefix_len: 24,
        entries: marked
            .iter()
            .map(|(m, n, to)| ((*m, net(n)), net(to)))
            .collect(),
    });
    rs
}

#[test]
fn a_mark_prefix_map_element_is_written_as_nft_writes_it() {
    let d = diff_of(
        &marks(&[], &[]),
        &marks(&[], &[(0x0a62_0000, "10.201.1.0/24", "10.201.1.0/24")]),
    );
    let t = transaction(Family::Ip, &id("t"), &d, 7, 100);
    let msgs = batch::messages(&t.bytes).unwrap();
    assert_eq!(
        msgs.iter().map(|m| (m.ty, m.seq)).collect::<Vec<_>>(),
        [(16, 100), (0x0a0c, 101), (17, 102)],
        "begin, NEWSETELEM, end"
    );
    assert_eq!(messages_needed(&d), 3);
    assert_eq!(t.acked, [101]);
    // begin: nfgenmsg with res_id 10 (big endian), then NFNL_BATCH_GENID = 7 (big endian).
    assert_eq!(&msgs[0].bytes[16..], &[0, 0, 0, 10, 8, 0, 1, 0, 0, 0, 0, 7]);
    assert_eq!(msgs[1].flags, 1 | 4 | 0x400);
    assert_eq!(&msgs[1].bytes[16..20], &[2, 0, 0, 0], "NFPROTO_IPV4");
    // What `nft --debug=mnl add element ip t d '{ 0x0a620000 . 10.201.1.0 : 10.201.1.0/24 }'`
    // sends: KEY (the mark in host byte order, then the address) and DATA (first and last
    // address), nested with NLA_F_NESTED; no KEY_END (the key is exact).
    let mark = 0x0a62_0000_u32.to_ne_bytes();
    #[rustfmt::skip]
    let nft: Vec<u8> = [
        &[40, 0, 3, 0x80,
          36, 0, 1, 0x80,
            16, 0, 1, 0x80, 12, 0, 1, 0][..], &mark, &[10, 201, 1, 0,
            16, 0, 2, 0x80, 12, 0, 1, 0, 10, 201, 1, 0, 10, 201, 1, 255][..],
    ]
    .concat();
    assert_eq!(elements_attr(&t, 1), nft);
    // A deletion carries the key only (`nft --debug=mnl delete element ip t d '{ 0x0a620000 .
    // 10.201.1.0 }'`).
    let d = diff_of(
        &marks(&[], &[(0x0a62_0000, "10.201.1.0/24", "10.201.1.0/24")]),
        &marks(&[], &[]),
    );
    let t = transaction(Family::Ip, &id("t"), &d, 7, 1);
    #[rustfmt::skip]
    let nft: Vec<u8> = [
        &[24, 0, 3, 0x80,
          20, 0, 1, 0x80,
            16, 0, 1, 0x80, 12, 0, 1, 0][..], &mark, &[10, 201, 1, 0][..],
    ]
    .concat();
    assert_eq!(elements_attr(&t, 1), nft);
}

#[test]
fn a_mark_map_element_is_written_as_nft_writes_it() {
    let d = diff_of(
        &marks(&[("10.99.0.0/16", 1)], &[]),
        &marks(&[("10.99.0.0/16", 1), ("10.98.0.0/16", 0x0a62_0000)], &[]),
    );
    let t = transaction(Family::Ip, &id("t"), &d, 7, 1);
    // `nft --debug=mnl add element ip t r '{ 10.98.0.0/16 : 0x0a620000 }'` on a map holding
    // 10.99.0.0/16: the start with the mark (host byte order) as its value, then the end.
    let mark = 0x0a62_0000_u32.to_ne_bytes();
    #[rustfmt::skip]
    let nft: Vec<u8> = [
        &[56, 0, 3, 0x80,
          28, 0, 1, 0x80,
            12, 0, 1, 0x80, 8, 0, 1, 0, 10, 98, 0, 0,
            12, 0, 2, 0x80, 8, 0, 1, 0][..], &mark, &[
          24, 0, 1, 0x80,
            8, 0, 3, 0, 0, 0, 0, 1,
            12, 0, 1, 0x80, 8, 0, 1, 0, 10, 99, 0, 0][..],
    ]
    .concat();
    assert_eq!(elements_attr(&t, 1), nft);
}

#[test]
fn an_interval_set_element_is_written_as_nft_writes_it() {
    let d = diff_of(
        &ruleset(&[], &["10.200.0.0/16"]),
        &ruleset(&[], &["10.200.0.0/16", "10.99.0.0/16"]),
    );
    let t = transaction(Family::Ip, &id("t"), &d, 7, 1);
    // `nft --debug=mnl add element ip t s '{ 10.99.0.0/16 }'` on a set that has elements.
    #[rustfmt::skip]
    let nft: [u8; 44] = [
        44, 0, 3, 0x80,
          16, 0, 1, 0x80, 12, 0, 1, 0x80, 8, 0, 1, 0, 10, 99, 0, 0,
          24, 0, 1, 0x80, 8, 0, 3, 0, 0, 0, 0, 1, 12, 0, 1, 0x80, 8, 0, 1, 0, 10, 100, 0, 0,
    ];
    assert_eq!(elements_attr(&t, 1), nft);
    // An open interval carries nft's user data; a deletion carries no value.
    let d = diff_of(
        &ruleset(&[], &["10.200.0.0/16"]),
        &ruleset(&[], &["255.255.255.0/24"]),
    );
    let t = transaction(Family::Ip, &id("t"), &d, 7, 1);
    let open = elements_attr(&t, 2);
    assert!(
        open.ends_with(&[10, 0, 6, 0, 1, 4, 1, 0, 0, 0, 0, 0]),
        "{open:?}"
    );
    assert_eq!(
        batch::messages(&t.bytes).unwrap()[1].ty,
        0x0a0e,
        "deletions first"
    );
}

#[test]
fn many_elements_are_split_across_messages_of_one_transaction() {
    let refs: Vec<(u32, &str, &str)> = (0..600)
        .map(|i| (i, "10.200.0.0/16", "10.50.0.0/16"))
        .collect();
    let d = diff(
        &elements::of(&ruleset(&[], &[])).unwrap(),
        &elements::of(&ruleset(&refs, &[])).unwrap(),
    );
    assert_eq!(messages_needed(&d), 2 + 3);
    let t = transaction(Family::Ip, &id("t"), &d, 1, 1);
    let msgs = batch::messages(&t.bytes).unwrap();
    assert_eq!(msgs.len(), 5);
    assert!(msgs.iter().all(|m| m.bytes.len() < 65535));
    assert_eq!(t.acked, [2, 3, 4]);
}

fn ack(seq: u32, errno: i32, offset: Option<u32>) -> Ack {
    Ack {
        seq,
        errno,
        message: None,
        offset,
    }
}

#[test]
fn a_refusal_names_the_element_at_the_kernels_offset() {
    let d = diff_of(
        &ruleset(&[], &[]),
        &ruleset(
            &[
                (1, "10.200.0.0/16", "10.50.0.0/16"),
                (2, "10.200.0.0/16", "10.51.0.0/16"),
            ],
            &[],
        ),
    );
    let t = transaction(Family::Ip, &id("t"), &d, 1, 10);
    // The second element's attribute starts after the header, nfgenmsg, table, set, the list
    // attribute's header and the first element (36 bytes).
    let second = 16 + 4 + 8 + 8 + 4 + 36;
    let refused = outcome(&t, &[ack(11, libc::EEXIST, Some(second))]);
    assert_eq!(
        refused,
        Outcome::Refused {
            what: "adding element 0x2 . 10.200.0.0/16 : 10.51.0.0/16 to map m (it overlaps or clashes with an element already there)".into(),
            message: None,
            errno: libc::EEXIST,
        }
    );
    let vague = outcome(&t, &[ack(11, libc::EINVAL, None)]);
    assert!(
        matches!(&vague, Outcome::Refused { what, .. } if what == "adding 2 elements to map m"),
        "{vague:?}"
    );
    assert_eq!(
        outcome(&t, &[ack(10, libc::ERESTART, None)]),
        Outcome::Restart
    );
    assert_eq!(outcome(&t, &[ack(11, 0, None)]), Outcome::Done);
    assert!(matches!(outcome(&t, &[]), Outcome::Refused { errno, .. } if errno == libc::EIO));
    assert!(matches!(
        outcome(&t, &[ack(11, 0, None), ack(10, libc::ENOMEM, None)]),
        Outcome::Refused { what, .. } if what == "committing the element changes"
    ));
}

#[test]
fn generations() {
    assert_eq!(next_generation(5), 6);
    assert_eq!(next_generation(u32::MAX), 1, "0 is skipped");
    let req = get_generation(3);
    let m = batch::messages(&req).unwrap()[0];
    assert_eq!((m.ty, m.seq, m.flags), (0x0a10, 3, 1 | 4));
    let mut w = Writer::default();
    let s = w.begin(0x0a0f, 0, 3);
    w.raw(&[0, 0, 0, 9]);
    w.attr(NFTA_GEN_ID, &77u32.to_be_bytes());
    w.end(s);
    let reply = w.into_bytes();
    assert_eq!(parse_generation(0x0a0f, &reply), Some(77));
    assert_eq!(parse_generation(0x0a0c, &reply), None);
}
