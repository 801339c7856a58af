//! The decisions about the peer's NetworkConfig copy that refuse it: bad fields, and ranges
//! the IPAM refused (kept refused for the same spec).

use serde_json::json;

use super::{tests::*, *};

#[test]
fn a_bad_peer_config_is_refused_once_and_nothing_else_happens() {
    let mut c = copy(None);
    c.spec["podCIDR"] = json!("10.244.0.1/16");
    let o = Observed {
        own: Some(own(None)),
        copy: Some(c.clone()),
        ..base()
    };
    let a = decide(&o);
    let [Action::Refuse(m)] = &a[..] else {
        panic!("{a:?}")
    };
    assert!(
        m.starts_with("spec.podCIDR: 10.244.0.1/16 has host bits"),
        "{m}"
    );
    // Annotated already, for this spec: no second Event.
    c.refused = Some(m.clone());
    c.refused_spec = Some(spec_digest(&c.spec));
    let o = Observed {
        copy: Some(c.clone()),
        ..o
    };
    assert!(decide(&o).is_empty());
    // Corrected: the remap, then (once it succeeded) the refusal goes.
    c.spec = copy_spec();
    let o = Observed { copy: Some(c), ..o };
    assert_eq!(
        decide(&o),
        [
            Action::Remap(r("10.244.0.0/16", "10.70.0.0/16")),
            Action::ClearRefusal,
        ]
    );
}

#[test]
fn ranges_the_ipam_refused_are_not_tried_again_until_the_spec_changes() {
    // The IPAM holds milan's first ranges; milan announces others: remapped for the IPAM to
    // judge (it refuses: the executor annotates the copy with the message and the digest).
    let mut c = copy(None);
    c.spec["podCIDR"] = json!("10.100.0.0/16");
    let o = Observed {
        copy: Some(c.clone()),
        ipam: Some(held(None)),
        own: Some(own(None)),
        ..base()
    };
    assert_eq!(
        decide(&o),
        [Action::Remap(r("10.100.0.0/16", "10.70.0.0/16"))]
    );
    // Refused for this spec: nothing more (no ClearRefusal/Remap/refusal loop).
    c.refused = Some("spec.podCIDR, spec.externalCIDR: liqo-ipam refused them: x".into());
    c.refused_spec = Some(spec_digest(&c.spec));
    let o = Observed {
        copy: Some(c.clone()),
        ..o
    };
    assert_eq!(decide(&o), []);
    // A refusal without a digest (or of another spec) is tried once more.
    let mut older = c.clone();
    older.refused_spec = None;
    let a = decide(&Observed {
        copy: Some(older),
        ..o.clone()
    });
    assert_eq!(
        a,
        [
            Action::Remap(r("10.100.0.0/16", "10.70.0.0/16")),
            Action::ClearRefusal
        ]
    );
    // The spec changes (back to the ranges held): the refusal goes, the status follows.
    c.spec = copy_spec();
    let a = decide(&Observed {
        copy: Some(c.clone()),
        ..o.clone()
    });
    assert!(
        matches!(&a[..], [Action::ClearRefusal, Action::WriteCopyStatus(s), ..] if s.processed),
        "{a:?}"
    );
    // Another change of ranges: tried again.
    c.spec["externalCIDR"] = json!("10.90.0.0/16");
    assert_eq!(
        decide(&Observed { copy: Some(c), ..o }),
        [
            Action::Remap(r("10.244.0.0/16", "10.90.0.0/16")),
            Action::ClearRefusal
        ]
    );
}

#[test]
fn the_spec_digest_follows_the_spec() {
    let a = copy_spec();
    let mut b = copy_spec();
    assert_eq!(spec_digest(&a), spec_digest(&b));
    assert_eq!(spec_digest(&a).len(), 16);
    b["endpointIP"] = json!("127.0.0.3");
    assert_ne!(spec_digest(&a), spec_digest(&b));
}

#[test]
fn a_bad_config_after_processing_changes_nothing() {
    let status = serde_json::to_value(copy_status(
        r("10.244.0.0/16", "10.70.0.0/16"),
        r("10.71.0.0/16", "10.72.0.0/16"),
    ))
    .unwrap();
    let mut c = copy(Some(status));
    c.spec["backend_config"]["publicKey"] = json!("not-a-key");
    let o = Observed {
        own: Some(own(Some(processed()))),
        copy: Some(c),
        ipam: Some(held(Some(r("10.71.0.0/16", "10.72.0.0/16")))),
        ..base()
    };
    let a = decide(&o);
    assert!(
        matches!(&a[..], [Action::Refuse(m)] if m.starts_with("spec.backend_config.publicKey:")),
        "{a:?}"
    );
}

#[test]
fn a_peer_announcing_other_ranges_is_remapped_again_for_the_ipam_to_judge() {
    let mut c = copy(None);
    c.spec["podCIDR"] = json!("10.100.0.0/16");
    let o = Observed {
        copy: Some(c),
        ipam: Some(held(None)),
        own: Some(own(None)),
        ..base()
    };
    assert_eq!(
        decide(&o),
        [Action::Remap(r("10.100.0.0/16", "10.70.0.0/16"))]
    );
}
