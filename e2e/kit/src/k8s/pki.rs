//! The certificates and keys of one test cluster, made in-process (rcgen, ECDSA P-256): a CA, the
//! apiserver's serving certificate (SANs: 127.0.0.1, the first service IP, the `kubernetes`
//! names), an admin client certificate in `system:masters`, the apiserver's kubelet client
//! certificate (`kube-apiserver-kubelet-client`, in `system:masters`: it calls kubelets for logs
//! and exec; a kubelet checks it against the CA), and the service-account key pair.

use std::{
    fs,
    net::{IpAddr, Ipv4Addr},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

use super::error::K8sError;

/// Paths of the files written.
#[derive(Debug, Clone)]
pub(crate) struct Pki {
    /// CA certificate.
    pub(crate) ca_crt: PathBuf,
    /// CA key (kube-controller-manager signs CSRs with it).
    pub(crate) ca_key: PathBuf,
    /// apiserver serving certificate.
    pub(crate) serving_crt: PathBuf,
    /// Its key.
    pub(crate) serving_key: PathBuf,
    /// Admin client certificate.
    pub(crate) admin_crt: PathBuf,
    /// Its key.
    pub(crate) admin_key: PathBuf,
    /// The apiserver's client certificate towards kubelets.
    pub(crate) kubelet_client_crt: PathBuf,
    /// Its key.
    pub(crate) kubelet_client_key: PathBuf,
    /// Service-account signing key.
    pub(crate) sa_key: PathBuf,
    /// Service-account public key.
    pub(crate) sa_pub: PathBuf,
}

fn pki_err(what: &str) -> impl FnOnce(rcgen::Error) -> K8sError + '_ {
    move |e| K8sError::Pki {
        what: what.into(),
        source: e,
    }
}

/// Writes `text` to a new file with mode 0600 (`private`) or 0644, set when the file is created:
/// a key is never readable by others, not even for a moment.
pub fn write(path: &Path, text: &str, private: bool) -> Result<(), K8sError> {
    use std::{io::Write as _, os::unix::fs::OpenOptionsExt};
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)
        .and_then(|mut f| {
            // An existing file keeps its mode on open: set it again.
            f.set_permissions(fs::Permissions::from_mode(if private {
                0o600
            } else {
                0o644
            }))?;
            f.write_all(text.as_bytes())
        })
        .map_err(|e| K8sError::io(path, e))
}

/// Writes a fresh set into `dir`. `service_ip` is the first address of the service range (the
/// `kubernetes` service).
pub(crate) fn create(dir: &Path, service_ip: Ipv4Addr, more: &[Ipv4Addr]) -> Result<Pki, K8sError> {
    fs::create_dir_all(dir).map_err(|e| K8sError::io(dir, e))?;
    let p = |n: &str| dir.join(n);
    let pki = Pki {
        ca_crt: p("ca.crt"),
        ca_key: p("ca.key"),
        serving_crt: p("apiserver.crt"),
        serving_key: p("apiserver.key"),
        admin_crt: p("admin.crt"),
        admin_key: p("admin.key"),
        kubelet_client_crt: p("apiserver-kubelet-client.crt"),
        kubelet_client_key: p("apiserver-kubelet-client.key"),
        sa_key: p("sa.key"),
        sa_pub: p("sa.pub"),
    };

    let ca_key = KeyPair::generate().map_err(pki_err("the CA key"))?;
    write(&pki.ca_key, &ca_key.serialize_pem(), true)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(pki_err("the CA"))?;
    ca.distinguished_name
        .push(DnType::CommonName, "liqo-lab-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca, ca_key).map_err(pki_err("the CA"))?;
    write(&pki.ca_crt, &ca.pem(), false)?;

    let names: Vec<String> = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    .map(String::from)
    .to_vec();
    let mut serving = CertificateParams::new(names).map_err(pki_err("the serving cert"))?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    for ip in [Ipv4Addr::LOCALHOST, service_ip].iter().chain(more) {
        serving
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(*ip)));
    }
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    serving.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let key = KeyPair::generate().map_err(pki_err("the serving key"))?;
    let cert = serving
        .signed_by(&key, &ca)
        .map_err(pki_err("the serving cert"))?;
    write(&pki.serving_crt, &cert.pem(), false)?;
    write(&pki.serving_key, &key.serialize_pem(), true)?;

    client_cert(
        &ca,
        "kubernetes-admin",
        &pki.admin_crt,
        &pki.admin_key,
        "the admin",
    )?;
    client_cert(
        &ca,
        "kube-apiserver-kubelet-client",
        &pki.kubelet_client_crt,
        &pki.kubelet_client_key,
        "the kubelet client",
    )?;

    let sa = KeyPair::generate().map_err(pki_err("the service-account key"))?;
    write(&pki.sa_key, &sa.serialize_pem(), true)?;
    write(&pki.sa_pub, &sa.public_key_pem(), false)?;
    Ok(pki)
}

/// A client certificate `cn` in `system:masters` signed by `ca`, written to `crt` and `key`.
fn client_cert(
    ca: &CertifiedIssuer<'_, KeyPair>,
    cn: &str,
    crt: &Path,
    key_path: &Path,
    what: &str,
) -> Result<(), K8sError> {
    signed_client(ca, cn, Some("system:masters"), crt, key_path, what)
}

/// A client certificate of user `cn` (in group `org`, if any) signed by the cluster's CA
/// (`ca.crt`, `ca.key` in `pki_dir`), written to `crt` and `key` (0600): a kubelet's
/// (`system:node:<name>` in `system:nodes`), kube-proxy's (`system:kube-proxy`), CoreDNS's.
pub fn issue_client(
    pki_dir: &Path,
    cn: &str,
    org: Option<&str>,
    crt: &Path,
    key: &Path,
) -> Result<(), K8sError> {
    let read = |n: &str| {
        let p = pki_dir.join(n);
        fs::read_to_string(&p).map_err(|e| K8sError::io(&p, e))
    };
    let ca_key = KeyPair::from_pem(&read("ca.key")?).map_err(pki_err("the CA key"))?;
    let ca = rcgen::Issuer::from_ca_cert_pem(&read("ca.crt")?, ca_key)
        .map_err(pki_err("the CA certificate"))?;
    signed_client(&ca, cn, org, crt, key, cn)
}

fn signed_client(
    ca: &rcgen::Issuer<'_, KeyPair>,
    cn: &str,
    org: Option<&str>,
    crt: &Path,
    key_path: &Path,
    what: &str,
) -> Result<(), K8sError> {
    let cert_what = format!("{what} cert");
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(pki_err(&cert_what))?;
    params.distinguished_name.push(DnType::CommonName, cn);
    if let Some(org) = org {
        params
            .distinguished_name
            .push(DnType::OrganizationName, org);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key_what = format!("{what} key");
    let key = KeyPair::generate().map_err(pki_err(&key_what))?;
    let cert = params.signed_by(&key, ca).map_err(pki_err(&cert_what))?;
    write(crt, &cert.pem(), false)?;
    write(key_path, &key.serialize_pem(), true)
}
