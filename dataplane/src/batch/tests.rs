use rtnetlink::packet_route::RouteNetlinkMessage;

use super::*;
use crate::route::{self, RouteSpec};

fn routes(n: usize) -> Vec<Request> {
    (0..n)
        .map(|i| {
            let dst = format!("10.{}.{}.0/24", i / 256, i % 256).parse().unwrap();
            route::add(&RouteSpec::to(dst), Some(7))
        })
        .collect()
}

#[test]
fn frames_every_request_once_with_its_sequence_number() {
    let reqs = routes(10);
    let chunks = frame(&reqs, u32::MAX - 3, 4, usize::MAX);
    assert_eq!(
        chunks
            .iter()
            .map(|c| (c.start, c.count))
            .collect::<Vec<_>>(),
        [(0, 4), (4, 4), (8, 2)]
    );
    let mut i = 0;
    for c in &chunks {
        for m in messages(&c.bytes).unwrap() {
            assert_eq!(m.seq, seq_of(u32::MAX - 3, i), "wraps around");
            assert_eq!(m.flags, reqs[i].mode.flags(), "NLM_F_ACK and the mode");
            let back = NetlinkMessage::<RouteNetlinkMessage>::deserialize(m.bytes).unwrap();
            assert_eq!(
                back.payload,
                netlink_packet_core::NetlinkPayload::InnerMessage(reqs[i].message.clone())
            );
            i += 1;
        }
    }
    assert_eq!(i, 10);
}

#[test]
fn chunks_respect_the_byte_budget_but_never_split_a_message() {
    let reqs = routes(6);
    let one = frame(&reqs[..1], 1, 100, usize::MAX)[0].bytes.len();
    let chunks = frame(&reqs, 1, 100, one * 2 + 1);
    assert_eq!(chunks.len(), 3);
    assert!(
        chunks
            .iter()
            .all(|c| c.count == 2 && c.bytes.len() == 2 * one)
    );
    let tiny = frame(&reqs, 1, 100, 1);
    assert_eq!(tiny.len(), 6, "a message larger than the budget goes alone");
    assert!(frame(&[], 1, 100, 100).is_empty());
}

/// An `NLMSG_ERROR` as the kernel writes it.
fn ack_bytes(seq: u32, error: i32, capped: bool, tlvs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut w = Writer::default();
    let mut flags = 0;
    if capped {
        flags |= NLM_F_CAPPED;
    }
    if !tlvs.is_empty() {
        flags |= NLM_F_ACK_TLVS;
    }
    let start = w.begin(NLMSG_ERROR, flags, seq);
    let mut payload = error.to_ne_bytes().to_vec();
    let echoed_len: u32 = if capped { 16 } else { 24 };
    payload.extend_from_slice(&echoed_len.to_ne_bytes());
    payload.extend_from_slice(&[0; 4]);
    payload.extend_from_slice(&seq.to_ne_bytes());
    payload.extend_from_slice(&[0; 4]);
    if !capped {
        payload.extend_from_slice(&[0xee; 8]);
    }
    w.raw(&payload);
    for (ty, v) in tlvs {
        w.attr(*ty, v);
    }
    w.end(start);
    w.into_bytes()
}

#[test]
fn acks_keep_the_kernel_text_and_the_bad_attribute() {
    let mut datagram = ack_bytes(
        5,
        -libc::EEXIST,
        true,
        &[
            (NLMSGERR_ATTR_MSG, b"interval overlaps\0"),
            (NLMSGERR_ATTR_OFFS, &60u32.to_ne_bytes()),
        ],
    );
    datagram.extend(ack_bytes(6, 0, false, &[]));
    datagram.extend(ack_bytes(
        7,
        -libc::ENOENT,
        false,
        &[(NLMSGERR_ATTR_MSG, b"no\0")],
    ));
    let msgs = messages(&datagram).unwrap();
    let acks: Vec<Ack> = msgs.iter().map(|m| ack(m).unwrap()).collect();
    assert_eq!(
        acks[0],
        Ack {
            seq: 5,
            errno: libc::EEXIST,
            message: Some("interval overlaps".into()),
            offset: Some(60),
        }
    );
    assert_eq!((acks[1].errno, acks[1].message.as_deref()), (0, None));
    assert_eq!(
        acks[2].message.as_deref(),
        Some("no"),
        "the echoed request is skipped"
    );
    assert_eq!(acks[0].io_error().raw_os_error(), Some(libc::EEXIST));
    assert_eq!(
        first_refusal(&acks, 4, 4).map(|(i, a)| (i, a.seq)),
        Some((1, 5))
    );
    assert_eq!(
        first_refusal(&acks, 6, 1),
        None,
        "only the batch's own messages"
    );
    assert_eq!(
        first_refusal_but(&acks, 4, 4, |i, _| i == 1).map(|(i, a)| (i, a.seq)),
        Some((3, 7)),
        "the next refusal that is not fine"
    );
    assert_eq!(
        first_refusal_but(&acks, 4, 4, |_, a| a.errno != libc::EPERM),
        None
    );
}

#[test]
fn malformed_answers_are_errors_not_panics() {
    let good = ack_bytes(1, 0, true, &[]);
    assert!(messages(&good[..10]).is_err());
    let mut bad_len = good.clone();
    bad_len[0] = 200;
    assert!(messages(&bad_len).is_err());
    let short = messages(&good).unwrap()[0];
    let truncated = Msg {
        bytes: &short.bytes[..HDR_LEN + 8],
        ..short
    };
    assert!(ack(&truncated).is_err());
    assert!(messages(&[]).unwrap().is_empty());
}

#[test]
fn done_carries_the_dump_error() {
    let mut w = Writer::default();
    let s = w.begin(NLMSG_DONE, 2, 9);
    w.raw(&(-libc::ENOENT).to_ne_bytes());
    w.end(s);
    let bytes = w.into_bytes();
    let m = messages(&bytes).unwrap()[0];
    assert_eq!(done_errno(&m), Ok(libc::ENOENT));
}

#[test]
fn writer_nests_and_pads() {
    let mut w = Writer::default();
    let m = w.begin(0x0a0c, 5, 1);
    w.raw(&[2, 0, 0, 0]);
    w.attr_str(1, "t");
    let n = w.nest(3);
    w.attr(1, &[1, 2, 3, 4, 5]);
    assert!(w.nest_end(n));
    w.end(m);
    let b = w.into_bytes();
    assert_eq!(b.len(), 16 + 4 + 8 + 4 + 12);
    assert_eq!(u32_at(&b, 0) as usize, b.len());
    assert_eq!(&b[20..28], &[6, 0, 1, 0, b't', 0, 0, 0]);
    assert_eq!(u16_at(&b, 28), 16, "nest length covers its padded child");
    assert_eq!(u16_at(&b, 30), 3 | NLA_F_NESTED);
}
