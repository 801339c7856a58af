use super::*;

/// The controller-manager's webhooks' policy (a CA of 10 years, certificates of one).
const SHORT: Profile = Profile {
    name: "test-short",
    ca_validity: YEAR.saturating_mul(10),
    cert_validity: YEAR,
    cert_renew_before: DAY.saturating_mul(30),
    ca_renew_before: YEAR,
};

/// liqo-ipam's (both valid 10 years, renewed by a restart within 30 days of the end).
const LONG: Profile = Profile {
    name: "test-long",
    ca_validity: YEAR.saturating_mul(10),
    cert_validity: YEAR.saturating_mul(10),
    cert_renew_before: DAY.saturating_mul(30),
    ca_renew_before: DAY.saturating_mul(30),
};

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn sans() -> Vec<String> {
    vec!["svc.liqo.svc".to_owned(), "127.0.0.1".to_owned()]
}

fn inspected(ca_days: u32, cert_days: u32, cert_sans: Vec<String>) -> Inspected {
    Inspected {
        ca_not_before: now() - DAY,
        ca_not_after: now() + DAY * ca_days,
        cert_not_before: now() - DAY,
        cert_not_after: now() + DAY * cert_days,
        cert_sans,
        consistent: true,
    }
}

#[test]
fn the_margins_are_the_profiles() {
    // A CA with 300 days left: replaced under the short profile (a year's certificate would
    // outlive it), kept under the long one.
    let s = inspected(300, 200, sans());
    assert_eq!(SHORT.plan(Some(&s), &sans(), now()), Plan::New);
    assert_eq!(LONG.plan(Some(&s), &sans(), now()), Plan::Reuse);
    let s = inspected(29, 29, sans());
    assert_eq!(LONG.plan(Some(&s), &sans(), now()), Plan::New);
    let s = inspected(3000, 29, sans());
    assert_eq!(LONG.plan(Some(&s), &sans(), now()), Plan::Reissue);
    assert_eq!(LONG.plan(None, &sans(), now()), Plan::New);
}

#[test]
fn a_certificate_never_outlives_its_ca() {
    let t = SystemTime::now();
    let m = LONG.make(Plan::New, None, &sans(), t).unwrap();
    let i = inspect(&m).unwrap();
    assert!(i.consistent);
    assert!(
        i.cert_not_after.duration_since(t).unwrap() > YEAR * 10 - DAY,
        "{i:?}"
    );
    // Reissued five years on: cut to the CA's end.
    let later = t + YEAR * 5;
    let again = LONG.make(Plan::Reissue, Some(&m), &sans(), later).unwrap();
    let j = inspect(&again).unwrap();
    assert!(j.consistent);
    assert_eq!(j.ca_not_after, i.ca_not_after);
    assert_eq!(j.cert_not_after, i.ca_not_after);
}

#[test]
fn names_are_the_profiles_and_a_reissue_keeps_the_stored_issuer() {
    let t = SystemTime::now();
    let m = SHORT.make(Plan::New, None, &[], t).unwrap();
    let ca = pem("CA certificate", &m.ca_cert).unwrap();
    let ca = parse("CA certificate", &ca).unwrap();
    assert_eq!(ca.subject().to_string(), "CN=test-short-ca");
    let cert = pem("serving certificate", &m.cert).unwrap();
    let cert = parse("serving certificate", &cert).unwrap();
    assert_eq!(cert.subject().to_string(), "CN=test-short");
    // Another profile reissuing from this CA names it as its certificate does.
    let again = LONG.make(Plan::Reissue, Some(&m), &sans(), t).unwrap();
    let cert = pem("serving certificate", &again.cert).unwrap();
    let cert = parse("serving certificate", &cert).unwrap();
    assert_eq!(cert.issuer().to_string(), "CN=test-short-ca");
    assert_eq!(cert.subject().to_string(), "CN=svc.liqo.svc");
    assert!(inspect(&again).unwrap().consistent);
}

#[test]
fn material_goes_through_a_secrets_data_and_back() {
    let m = SHORT
        .make(Plan::New, None, &sans(), SystemTime::now())
        .unwrap();
    let data: std::collections::BTreeMap<&str, Vec<u8>> = m
        .data()
        .into_iter()
        .map(|(k, v)| (k, v.as_bytes().to_vec()))
        .collect();
    assert_eq!(
        data.keys().copied().collect::<Vec<_>>(),
        [CA_CERT, CA_KEY, TLS_CERT, TLS_KEY]
    );
    let back = Material::from_data(|k| data.get(k).map(Vec::as_slice)).unwrap();
    assert_eq!(back, m);
    let partial = Material::from_data(|k| data.get(k).filter(|_| k != CA_KEY).map(Vec::as_slice));
    assert!(partial.is_none());
    let bad = Material::from_data(|k| {
        if k == TLS_KEY {
            Some(&[0xff, 0xfe][..])
        } else {
            data.get(k).map(Vec::as_slice)
        }
    });
    assert!(bad.is_none(), "a key that is not UTF-8");
}

#[test]
fn made_material_reads_back_and_is_reused_then_reissued_with_its_ca() {
    let t = SystemTime::now();
    let m = SHORT.make(Plan::New, None, &sans(), t).unwrap();
    let i = inspect(&m).unwrap();
    assert!(i.consistent);
    assert_eq!(i.cert_sans, sans());
    assert_eq!(SHORT.plan(Some(&i), &sans(), t), Plan::Reuse);
    assert_eq!(SHORT.make(Plan::Reuse, Some(&m), &sans(), t).unwrap(), m);

    let mut more = sans();
    more.push("localhost".to_owned());
    assert_eq!(SHORT.plan(Some(&i), &more, t), Plan::Reissue);
    let again = SHORT.make(Plan::Reissue, Some(&m), &more, t).unwrap();
    assert_eq!((&again.ca_cert, &again.ca_key), (&m.ca_cert, &m.ca_key));
    assert_ne!(again.cert, m.cert);
    let i = inspect(&again).unwrap();
    assert!(
        i.consistent,
        "the reissued certificate is signed by the same CA"
    );
    assert_eq!(i.cert_sans, more);
}

#[test]
fn a_certificate_of_another_ca_is_inconsistent() {
    let t = SystemTime::now();
    let a = SHORT.make(Plan::New, None, &sans(), t).unwrap();
    let b = SHORT.make(Plan::New, None, &sans(), t).unwrap();
    let mixed = Material {
        cert: b.cert.clone(),
        key: b.key.clone(),
        ..a.clone()
    };
    assert!(!inspect(&mixed).unwrap().consistent);
    let wrong_key = Material {
        key: a.ca_key.clone(),
        ..a.clone()
    };
    assert!(!inspect(&wrong_key).unwrap().consistent);
}

#[test]
fn unreadable_material_is_an_error_naming_the_part() {
    let t = SystemTime::now();
    let m = SHORT.make(Plan::New, None, &sans(), t).unwrap();
    let bad = Material {
        cert: "garbage".to_owned(),
        ..m.clone()
    };
    let e = inspect(&bad).unwrap_err().to_string();
    assert!(e.contains("serving certificate"), "{e}");
    let bad = Material {
        ca_key: "garbage".to_owned(),
        ..m
    };
    assert!(inspect(&bad).unwrap_err().to_string().contains("CA key"));
}

#[test]
fn debug_never_shows_a_key() {
    let m = SHORT
        .make(Plan::New, None, &sans(), SystemTime::now())
        .unwrap();
    let d = format!("{m:?}");
    assert!(!d.contains("PRIVATE KEY"), "{d}");
    assert!(d.contains("BEGIN CERTIFICATE"));
}
