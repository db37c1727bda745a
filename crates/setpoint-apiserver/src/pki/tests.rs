use std::collections::BTreeMap;
use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;

use super::*;

const FILES: [&str; 11] = [
    "ca.crt",
    "ca.key",
    "server.crt",
    "server.key",
    "admin.crt",
    "admin.key",
    "admin.token",
    "front-proxy-ca.crt",
    "front-proxy-ca.key",
    "front-proxy-client.crt",
    "front-proxy-client.key",
];

fn loopback() -> IpAddr {
    "127.0.0.1".parse().unwrap()
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Every credential file's contents, by name.
fn snapshot(data_dir: &Path) -> BTreeMap<&'static str, Vec<u8>> {
    FILES
        .iter()
        .map(|name| (*name, fs::read(data_dir.join("pki").join(name)).unwrap()))
        .collect()
}

fn serving_cert_covers(pki: &Pki, ip: &str) -> bool {
    let cert = parse_certificate(&pki.serving_cert).unwrap();
    let wanted = match ip.parse::<IpAddr>().unwrap() {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    };
    let san = cert.subject_alternative_name().unwrap().unwrap();
    san.value.general_names.iter().any(|name| {
        matches!(name, x509_parser::extensions::GeneralName::IPAddress(octets)
            if *octets == wanted.as_slice())
    })
}

#[test]
fn load_or_create_should_create_every_file_with_private_modes() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let pki = Pki::load_or_create(&data_dir, "127.0.0.1:6443".parse().unwrap()).unwrap();

    assert_eq!(mode(&data_dir), 0o700);
    assert_eq!(mode(&pki.dir()), 0o700);
    for name in FILES {
        let expected = if name.ends_with(".crt") { 0o644 } else { 0o600 };
        assert_eq!(mode(&pki.dir().join(name)), expected, "{name}");
    }
    assert!(pki.admin_token().len() >= 43);
    assert!(pki
        .ca_certificate_pem()
        .starts_with("-----BEGIN CERTIFICATE-----"));
    let ca = parse_certificate(pki.ca_der()).unwrap();
    assert_eq!(common_names(&ca), ["setpoint-ca"]);
    let lifetime = ca.validity().not_after.timestamp() - ca.validity().not_before.timestamp();
    assert!(lifetime >= 3650 * 86_400, "CA valid for {lifetime} s");
    for ip in ["127.0.0.1", "::1"] {
        assert!(serving_cert_covers(&pki, ip), "{ip}");
    }
}

#[test]
fn load_or_create_should_reuse_every_credential_on_restart() {
    let temp = tempfile::tempdir().unwrap();
    let first = Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap();
    let before = snapshot(temp.path());
    let second = Pki::load_or_create(temp.path(), "127.0.0.1:7000".parse().unwrap()).unwrap();
    assert_eq!(snapshot(temp.path()), before);
    assert_eq!(first.admin_token(), second.admin_token());
    assert_eq!(first.serving_cert, second.serving_cert);
}

#[test]
fn load_or_create_should_reissue_only_the_serving_certificate_when_the_address_is_not_covered() {
    let temp = tempfile::tempdir().unwrap();
    Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap();
    let before = snapshot(temp.path());

    let moved = Pki::load_or_create(temp.path(), "10.11.12.13:6443".parse().unwrap()).unwrap();
    let after = snapshot(temp.path());
    for name in FILES {
        let changed = before[name] != after[name];
        assert_eq!(changed, name.starts_with("server."), "{name}");
    }
    assert!(serving_cert_covers(&moved, "10.11.12.13"));
    assert!(serving_cert_covers(&moved, "127.0.0.1"));
    inspect::check_leaf(
        &moved.serving_cert,
        moved.ca_der(),
        &LeafRequirements {
            common_name: SERVING_COMMON_NAME,
            names: &[],
            renew_before: Duration::ZERO,
        },
        OffsetDateTime::now_utc(),
    )
    .unwrap();

    // Loopback is still covered, so going back changes nothing.
    Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap();
    assert_eq!(snapshot(temp.path()), after);
}

#[test]
fn load_or_create_should_renew_leaf_certificates_within_30_days_of_expiry() {
    let temp = tempfile::tempdir().unwrap();
    let now = OffsetDateTime::now_utc();
    Pki::load_or_create_at(temp.path(), loopback(), now).unwrap();
    let before = snapshot(temp.path());

    Pki::load_or_create_at(temp.path(), loopback(), now + Duration::days(300)).unwrap();
    assert_eq!(snapshot(temp.path()), before, "renewed too early");

    Pki::load_or_create_at(temp.path(), loopback(), now + Duration::days(340)).unwrap();
    let after = snapshot(temp.path());
    assert_eq!(after["ca.crt"], before["ca.crt"]);
    assert_eq!(after["admin.token"], before["admin.token"]);
    assert_ne!(after["server.crt"], before["server.crt"]);
    assert_ne!(after["admin.crt"], before["admin.crt"]);
}

#[test]
fn load_or_create_should_refuse_an_expired_ca() {
    let temp = tempfile::tempdir().unwrap();
    let now = OffsetDateTime::now_utc();
    Pki::load_or_create_at(temp.path(), loopback(), now).unwrap();
    let error =
        Pki::load_or_create_at(temp.path(), loopback(), now + Duration::days(3651)).unwrap_err();
    assert!(matches!(error, PkiError::UnusableCa { .. }), "{error}");
}

#[test]
fn load_or_create_should_refuse_a_ca_certificate_without_its_key() {
    let temp = tempfile::tempdir().unwrap();
    let pki = Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap();
    fs::remove_file(pki.dir().join("ca.key")).unwrap();
    let error = Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap_err();
    assert!(matches!(error, PkiError::CaKeyMissing { .. }), "{error}");
}

#[test]
fn load_or_create_should_reissue_a_certificate_whose_key_was_replaced() {
    let temp = tempfile::tempdir().unwrap();
    let pki = Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap();
    let foreign = KeyPair::generate().unwrap().serialize_pem();
    fs::write(pki.dir().join("server.key"), foreign).unwrap();
    let before = snapshot(temp.path());
    let reloaded = Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap();
    assert_ne!(snapshot(temp.path())["server.crt"], before["server.crt"]);
    let (chain, _key) = reloaded.serving_identity();
    assert_eq!(chain.len(), 1);
}

#[test]
fn load_or_create_should_tighten_secret_files_left_readable_by_others() {
    let temp = tempfile::tempdir().unwrap();
    let pki = Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap();
    for name in ["ca.key", "admin.token"] {
        fs::set_permissions(pki.dir().join(name), Permissions::from_mode(0o644)).unwrap();
    }
    fs::set_permissions(pki.dir(), Permissions::from_mode(0o755)).unwrap();
    Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap();
    assert_eq!(mode(&pki.dir()), 0o700);
    assert_eq!(mode(&pki.dir().join("ca.key")), 0o600);
    assert_eq!(mode(&pki.dir().join("admin.token")), 0o600);
}

#[test]
fn load_or_create_should_refuse_a_tampered_token_file() {
    let temp = tempfile::tempdir().unwrap();
    let pki = Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap();
    fs::write(pki.dir().join("admin.token"), "").unwrap();
    let error = Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap_err();
    assert!(matches!(error, PkiError::InvalidToken { .. }), "{error}");
}

#[test]
fn write_admin_kubeconfig_should_write_0600_and_follow_the_server_address() {
    let temp = tempfile::tempdir().unwrap();
    let pki = Pki::load_or_create(temp.path(), "127.0.0.1:6443".parse().unwrap()).unwrap();
    let path = pki
        .write_admin_kubeconfig("127.0.0.1:6443".parse().unwrap())
        .unwrap();
    assert_eq!(path, temp.path().join("admin.kubeconfig"));
    assert_eq!(mode(&path), 0o600);
    let first = fs::read_to_string(&path).unwrap();
    assert!(first.contains("server: \"https://127.0.0.1:6443\"\n"));
    assert!(first.contains(&format!("token: \"{}\"\n", pki.admin_token())));

    pki.write_admin_kubeconfig("127.0.0.1:7443".parse().unwrap())
        .unwrap();
    let second = fs::read_to_string(&path).unwrap();
    assert!(second.contains("server: \"https://127.0.0.1:7443\"\n"));
    let differing: Vec<_> = first
        .lines()
        .zip(second.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(
        differing.len(),
        1,
        "only the server URL changes: {differing:?}"
    );
}
