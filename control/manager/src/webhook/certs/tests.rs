//! The webhooks' profile; the material, its reading and making are `liqo_types::certs`' (tested
//! there).

use super::*;

const DAY: Duration = Duration::from_secs(24 * 3600);

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn sans() -> Vec<String> {
    vec![
        "liqo-controller-manager.liqo.svc".to_owned(),
        "127.0.0.1".to_owned(),
    ]
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
fn nothing_stored_means_new() {
    assert_eq!(plan(None, &sans(), now()), Plan::New);
}

#[test]
fn valid_for_the_names_and_far_from_expiry_is_reused() {
    let mut names = sans();
    names.push("extra.example".to_owned());
    assert_eq!(
        plan(Some(&inspected(3000, 200, names)), &sans(), now()),
        Plan::Reuse
    );
}

#[test]
fn a_missing_name_or_near_expiry_reissues_with_the_same_ca() {
    let s = inspected(3000, 200, vec!["127.0.0.1".to_owned()]);
    assert_eq!(plan(Some(&s), &sans(), now()), Plan::Reissue);
    let s = inspected(3000, 29, sans());
    assert_eq!(plan(Some(&s), &sans(), now()), Plan::Reissue);
    let s = inspected(3000, 0, sans());
    assert_eq!(plan(Some(&s), &sans(), now() + DAY * 10), Plan::Reissue);
}

#[test]
fn a_certificate_not_yet_valid_is_reissued_and_a_ca_not_yet_valid_replaced() {
    let mut s = inspected(3000, 200, sans());
    s.cert_not_before = now() + DAY;
    assert_eq!(plan(Some(&s), &sans(), now()), Plan::Reissue);
    let mut s = inspected(3000, 200, sans());
    s.ca_not_before = now() + Duration::from_secs(1);
    assert_eq!(plan(Some(&s), &sans(), now()), Plan::New);
}

#[test]
fn a_ca_near_expiry_or_inconsistent_material_is_replaced() {
    let s = inspected(300, 200, sans());
    assert_eq!(plan(Some(&s), &sans(), now()), Plan::New);
    let mut s = inspected(3000, 200, sans());
    s.consistent = false;
    assert_eq!(plan(Some(&s), &sans(), now()), Plan::New);
}

#[test]
fn made_material_lives_a_year_under_a_ca_of_ten_named_liqo_webhook_ca() {
    let t = SystemTime::now();
    let m = make(Plan::New, None, &sans(), t).unwrap();
    let i = inspect(&m).unwrap();
    assert!(i.consistent);
    assert_eq!(i.cert_sans, sans());
    let left = i.cert_not_after.duration_since(t).unwrap();
    assert!(
        left > CERT_VALIDITY - DAY && left <= CERT_VALIDITY,
        "{left:?}"
    );
    assert!(i.ca_not_after.duration_since(t).unwrap() > CA_VALIDITY - DAY);
    assert_eq!(plan(Some(&i), &sans(), t), Plan::Reuse);
    let (_, ca) = x509_parser::pem::parse_x509_pem(m.ca_cert.as_bytes()).unwrap();
    let ca = ca.parse_x509().unwrap();
    assert_eq!(ca.subject().to_string(), "CN=liqo-webhook-ca");
}
