use k8s_openapi::api::core::v1::Secret;

use super::setup::{material, secret_data};
use super::*;

#[test]
fn the_names_are_the_services_then_the_extra_ones_once() {
    let mut c = Config::new("127.0.0.1:0".parse().unwrap(), "liqo-x");
    c.extra_sans = vec![
        "127.0.0.1".into(),
        "liqo-controller-manager.liqo-x.svc".into(),
    ];
    assert_eq!(
        c.sans(),
        [
            "liqo-controller-manager.liqo-x.svc",
            "liqo-controller-manager.liqo-x.svc.cluster.local",
            "127.0.0.1",
        ]
    );
}

#[test]
fn a_secret_missing_a_key_holds_no_material() {
    let m = certs::make(
        certs::Plan::New,
        None,
        &["a".into()],
        std::time::SystemTime::now(),
    )
    .unwrap();
    let mut data = secret_data(&m);
    let secret = |data| Secret {
        data: Some(data),
        ..Default::default()
    };
    assert_eq!(material(&secret(data.clone())), Some(m.clone()));
    let (chain, key) = tls_parts(&m).unwrap();
    assert_eq!(chain.len(), 2);
    assert!(liqo_auth::https::Replaceable::new(chain, key).is_ok());
    data.remove(certs::TLS_KEY);
    assert_eq!(material(&secret(data)), None);
}

#[tokio::test]
async fn an_unreachable_apiserver_fails_the_start_naming_the_configuration() {
    let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let client = Client::try_from(config).unwrap();
    let t0 = std::time::Instant::now();
    let e = set_at_start(&client, b"CA", Duration::from_millis(1500))
        .await
        .unwrap_err();
    assert!(
        t0.elapsed() >= Duration::from_millis(1500),
        "tried until the deadline"
    );
    let text = liqo_types::chain(&e);
    assert!(
        text.starts_with(
            "the webhook CA was not set in the configurations within 1.5s: \
             setting the caBundle of MutatingWebhookConfiguration liqo-webhook: "
        ),
        "{text}"
    );
}
