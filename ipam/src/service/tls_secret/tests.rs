use super::*;

fn secret(ns: &str, extra: &[&str]) -> TlsSecret {
    TlsSecret {
        namespace: ns.to_owned(),
        name: "liqo-ipam-tls".to_owned(),
        extra_names: extra.iter().map(|&n| n.to_owned()).collect(),
    }
}

fn fixed_token() -> Result<String, getrandom::Error> {
    Ok("f".repeat(64))
}

fn no_token() -> Result<String, getrandom::Error> {
    panic!("no new token was wanted")
}

#[test]
fn the_names_are_the_services_then_the_extra_ones_once() {
    assert_eq!(
        secret("liqo-x", &["127.0.0.1", "liqo-ipam.liqo-x.svc"]).names(),
        [
            "liqo-ipam",
            "liqo-ipam.liqo-x",
            "liqo-ipam.liqo-x.svc",
            "liqo-ipam.liqo-x.svc.cluster.local",
            "127.0.0.1",
        ]
    );
    assert_eq!(secret("liqo", &[]).to_string(), "liqo/liqo-ipam-tls");
}

#[test]
fn nothing_stored_makes_all_then_it_is_served_as_it_is() {
    let names = secret("liqo", &[]).names();
    let now = SystemTime::now();
    let d = decide(None, &names, now, fixed_token).unwrap();
    assert_eq!((d.plan, d.new_token, d.writes()), (Plan::New, true, true));
    let data = d.data();
    assert_eq!(
        data.keys().map(String::as_str).collect::<Vec<_>>(),
        ["ca.crt", "ca.key", "tls.crt", "tls.key", "token"]
    );
    let i = certs::inspect(&d.material).unwrap();
    assert_eq!(i.cert_sans, names);
    assert!(i.cert_not_after.duration_since(now).unwrap() > certs::YEAR * 10 - certs::DAY);
    // Read back: reused whole, the same token.
    let again = decide(Some(&data), &names, now, no_token).unwrap();
    assert_eq!((again.plan, again.writes()), (Plan::Reuse, false));
    assert_eq!(again.material, d.material);
    assert!(again.served().token.matches("f".repeat(64).as_bytes()));
    // Without the Secret's data (an empty Secret): all anew.
    let empty = BTreeMap::new();
    assert_eq!(
        decide(Some(&empty), &names, now, fixed_token).unwrap().plan,
        Plan::New
    );
}

#[test]
fn another_name_reissues_with_the_same_ca_and_keeps_the_token() {
    let now = SystemTime::now();
    let d = decide(None, &secret("liqo", &[]).names(), now, fixed_token).unwrap();
    let names = secret("liqo", &["ipam.example.com"]).names();
    let again = decide(Some(&d.data()), &names, now, no_token).unwrap();
    assert_eq!((again.plan, again.new_token), (Plan::Reissue, false));
    assert!(again.writes());
    assert_eq!(again.material.ca_cert, d.material.ca_cert);
    assert_eq!(certs::inspect(&again.material).unwrap().cert_sans, names);
    // Another namespace: the Service's names differ too.
    let other = decide(
        Some(&d.data()),
        &secret("other", &[]).names(),
        now,
        no_token,
    )
    .unwrap();
    assert_eq!(other.plan, Plan::Reissue);
}

#[test]
fn a_missing_or_short_token_is_replaced_alone() {
    let names = secret("liqo", &[]).names();
    let now = SystemTime::now();
    let d = decide(None, &names, now, fixed_token).unwrap();
    for token in [
        None,
        Some(&b"short"[..]),
        Some(&b""[..]),
        Some(&b"two words and more, over thirty-two characters"[..]),
    ] {
        let mut data = d.data();
        match token {
            Some(t) => data.insert(TOKEN_KEY.to_owned(), ByteString(t.to_vec())),
            None => data.remove(TOKEN_KEY),
        };
        let again = decide(Some(&data), &names, now, || Ok("a".repeat(64))).unwrap();
        assert_eq!(
            (again.plan, again.new_token),
            (Plan::Reuse, true),
            "{token:?}"
        );
        assert!(again.writes());
        assert!(again.served().token.matches("a".repeat(64).as_bytes()));
    }
    // A long enough token written by someone else (with a final newline) is kept as it is.
    let mut data = d.data();
    let theirs = format!("{}\n", "Z".repeat(40));
    data.insert(
        TOKEN_KEY.to_owned(),
        ByteString(theirs.clone().into_bytes()),
    );
    let again = decide(Some(&data), &names, now, no_token).unwrap();
    assert!(!again.writes());
    assert!(again.served().token.matches("Z".repeat(40).as_bytes()));
    assert_eq!(again.data()[TOKEN_KEY].0, theirs.into_bytes());
}

#[test]
fn unreadable_or_inconsistent_certificates_are_replaced() {
    let names = secret("liqo", &[]).names();
    let now = SystemTime::now();
    let a = decide(None, &names, now, fixed_token).unwrap();
    let b = decide(None, &names, now, fixed_token).unwrap();
    let mut data = a.data();
    data.insert("tls.crt".into(), ByteString(b"garbage".to_vec()));
    let d = decide(Some(&data), &names, now, no_token).unwrap();
    assert_eq!(d.plan, Plan::New);
    assert!(d.unreadable.unwrap().contains("serving certificate"));
    let mut data = a.data();
    data.insert("tls.crt".into(), b.data()["tls.crt"].clone());
    data.insert("tls.key".into(), b.data()["tls.key"].clone());
    let d = decide(Some(&data), &names, now, no_token).unwrap();
    assert_eq!((d.plan, d.unreadable), (Plan::New, None));
    // Without the CA's key (as the chart made it): all anew.
    let mut data = a.data();
    data.remove("ca.key");
    assert_eq!(
        decide(Some(&data), &names, now, no_token).unwrap().plan,
        Plan::New
    );
}

#[test]
fn a_certificate_near_its_end_is_reissued_and_a_ca_near_its_end_replaced() {
    let names = secret("liqo", &[]).names();
    let t0 = SystemTime::now();
    let d = decide(None, &names, t0, fixed_token).unwrap();
    let later = t0 + certs::YEAR * 10 - certs::DAY * 29;
    assert_eq!(
        decide(Some(&d.data()), &names, later, no_token)
            .unwrap()
            .plan,
        Plan::New
    );
    let well_before = t0 + certs::YEAR * 9;
    assert_eq!(
        decide(Some(&d.data()), &names, well_before, no_token)
            .unwrap()
            .plan,
        Plan::Reuse
    );
}

#[test]
fn new_tokens_are_64_hex_digits_and_differ() {
    let a = new_token().unwrap();
    let b = new_token().unwrap();
    assert_eq!(a.len(), 64);
    assert!(
        a.bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_ne!(a, b);
}

#[test]
fn debug_shows_no_key_and_no_token() {
    let d = decide(
        None,
        &secret("liqo", &[]).names(),
        SystemTime::now(),
        fixed_token,
    )
    .unwrap();
    let text = format!("{:?}", d.served());
    assert!(text.contains("BEGIN CERTIFICATE"), "{text}");
    assert!(
        !text.contains("PRIVATE KEY") && !text.contains("fff"),
        "{text}"
    );
}

#[test]
fn secret_names_are_checked() {
    assert!(check_secret_name("liqo-ipam-tls").is_ok());
    let e = check_secret_name("Liqo_TLS").unwrap_err();
    assert!(e.starts_with("not a valid Secret name"), "{e}");
}
