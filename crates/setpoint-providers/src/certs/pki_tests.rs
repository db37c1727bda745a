//! Issuance and inspection together: what `pki` issues, `inspect` accepts; every kind of
//! drift it must catch is caught; chains verify; key types and SANs are as asked.

use chrono::{DateTime, Duration, Utc};
use x509_parser::prelude::{FromDer as _, X509Certificate};

use super::certificate::{
    CertificatePrivateKey, CertificateSpec, KeyAlgorithm, KeyEncoding, RotationPolicy,
};
use super::inspect::{inspect, KeyMaterial, Verdict};
use super::pki::{issue, pem_certificates, private_key, CaKeyPair, Signer};

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

fn spec(cn: &str) -> CertificateSpec {
    CertificateSpec {
        secret_name: format!("{cn}-tls"),
        common_name: Some(cn.to_owned()),
        dns_names: Some(vec![format!("{cn}.example"), "localhost".to_owned()]),
        ip_addresses: Some(vec!["127.0.0.1".to_owned(), "::1".to_owned()]),
        uris: Some(vec!["spiffe://cluster/ns/default/sa/web".to_owned()]),
        email_addresses: Some(vec!["ops@example.com".to_owned()]),
        ..CertificateSpec::default()
    }
}

fn material(spec: &CertificateSpec, signer: &Signer, at: DateTime<Utc>) -> KeyMaterial {
    let key = private_key(spec, None).unwrap();
    let issued = issue(spec, &key, signer, at).unwrap();
    KeyMaterial {
        tls_crt: issued.chain_pem,
        tls_key: issued.key_pem,
        ca_crt: issued.ca_pem,
    }
}

fn root_ca() -> (CertificateSpec, KeyMaterial) {
    let ca_spec = CertificateSpec {
        common_name: Some("root".to_owned()),
        is_ca: Some(true),
        ..CertificateSpec::default()
    };
    let ca = material(&ca_spec, &Signer::SelfSigned, now());
    (ca_spec, ca)
}

fn leaf(der_pem: &str) -> Vec<u8> {
    pem_certificates(der_pem).into_iter().next().unwrap()
}

#[test]
fn a_self_signed_certificate_is_accepted_with_its_sans_and_dates() {
    let spec = spec("web");
    let m = material(&spec, &Signer::SelfSigned, now());
    let Verdict::Valid {
        validity,
        due,
        expired,
        ..
    } = inspect(&spec, &m, &Signer::SelfSigned, now())
    else {
        panic!(
            "rejected: {:?}",
            inspect(&spec, &m, &Signer::SelfSigned, now())
        );
    };
    assert!(!due && !expired);
    assert_eq!(validity.not_before, now());
    assert_eq!(validity.not_after, now() + Duration::days(90));
    assert_eq!(validity.renewal, now() + Duration::days(60));
    let der = leaf(&m.tls_crt);
    let (_, cert) = X509Certificate::from_der(&der).unwrap();
    let san = cert.subject_alternative_name().unwrap().unwrap();
    assert_eq!(
        san.value.general_names.len(),
        6,
        "{:?}",
        san.value.general_names
    );
    assert_eq!(
        m.ca_crt, m.tls_crt,
        "a self-signed certificate is its own CA"
    );
}

#[test]
fn a_ca_signed_chain_verifies_under_the_root_and_the_root_is_ca_crt() {
    let (_, ca) = root_ca();
    let signer = Signer::Ca(Box::new(
        CaKeyPair::from_pem(&ca.tls_crt, &ca.tls_key, &ca.ca_crt).unwrap(),
    ));
    let spec = spec("api");
    let m = material(&spec, &signer, now());
    assert!(matches!(
        inspect(&spec, &m, &signer, now()),
        Verdict::Valid { .. }
    ));
    assert_eq!(m.ca_crt, ca.tls_crt);
    let der = leaf(&m.tls_crt);
    let (_, cert) = X509Certificate::from_der(&der).unwrap();
    let root_der = leaf(&ca.tls_crt);
    let (_, root) = X509Certificate::from_der(&root_der).unwrap();
    cert.verify_signature(Some(root.public_key())).unwrap();
    assert_eq!(cert.issuer(), root.subject());
    // The same leaf is not accepted as signed by another CA.
    let (_, other) = root_ca();
    let other = Signer::Ca(Box::new(
        CaKeyPair::from_pem(&other.tls_crt, &other.tls_key, &other.ca_crt).unwrap(),
    ));
    assert!(matches!(
        inspect(&spec, &m, &other, now()),
        Verdict::Mismatch(..)
    ));
}

#[test]
fn an_intermediate_ca_chain_goes_into_tls_crt_below_the_leaf() {
    let (_, root) = root_ca();
    let root_signer = Signer::Ca(Box::new(
        CaKeyPair::from_pem(&root.tls_crt, &root.tls_key, &root.ca_crt).unwrap(),
    ));
    let inter_spec = CertificateSpec {
        common_name: Some("intermediate".to_owned()),
        is_ca: Some(true),
        ..CertificateSpec::default()
    };
    let inter = material(&inter_spec, &root_signer, now());
    let signer = Signer::Ca(Box::new(
        CaKeyPair::from_pem(&inter.tls_crt, &inter.tls_key, &inter.ca_crt).unwrap(),
    ));
    let spec = spec("svc");
    let m = material(&spec, &signer, now());
    assert_eq!(pem_certificates(&m.tls_crt).len(), 2, "leaf + intermediate");
    assert_eq!(m.ca_crt, root.tls_crt);
    assert!(matches!(
        inspect(&spec, &m, &signer, now()),
        Verdict::Valid { .. }
    ));
}

#[test]
fn a_non_ca_certificate_cannot_be_a_ca_issuer() {
    let m = material(&spec("plain"), &Signer::SelfSigned, now());
    assert!(CaKeyPair::from_pem(&m.tls_crt, &m.tls_key, &m.ca_crt).is_err());
    let (_, ca) = root_ca();
    let other = material(&spec("other"), &Signer::SelfSigned, now());
    assert!(
        CaKeyPair::from_pem(&ca.tls_crt, &other.tls_key, &ca.ca_crt).is_err(),
        "key mismatch"
    );
}

#[test]
fn key_algorithms_and_sizes_are_as_asked() {
    for (algorithm, size, oid) in [
        (KeyAlgorithm::Ecdsa, None, "1.2.840.10045.3.1.7"),
        (KeyAlgorithm::Ecdsa, Some(384), "1.3.132.0.34"),
        (KeyAlgorithm::Ed25519, None, "1.3.101.112"),
    ] {
        let mut spec = spec("k");
        spec.private_key = Some(CertificatePrivateKey {
            algorithm: Some(algorithm),
            size,
            ..CertificatePrivateKey::default()
        });
        let m = material(&spec, &Signer::SelfSigned, now());
        let der = leaf(&m.tls_crt);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let spki = cert.public_key();
        let found = if algorithm == KeyAlgorithm::Ed25519 {
            spki.algorithm.algorithm.to_id_string()
        } else {
            spki.algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())
                .map(|o| o.to_id_string())
                .unwrap_or_default()
        };
        assert_eq!(found, oid, "{algorithm:?} {size:?}");
        assert!(matches!(
            inspect(&spec, &m, &Signer::SelfSigned, now()),
            Verdict::Valid { .. }
        ));
        // The same key under a spec asking for another algorithm is a mismatch.
        let mut other = spec.clone();
        other.private_key = Some(CertificatePrivateKey {
            algorithm: Some(if algorithm == KeyAlgorithm::Ed25519 {
                KeyAlgorithm::Ecdsa
            } else {
                KeyAlgorithm::Ed25519
            }),
            ..CertificatePrivateKey::default()
        });
        assert!(matches!(
            inspect(&other, &m, &Signer::SelfSigned, now()),
            Verdict::Mismatch(..)
        ));
    }
}

/// The RSA spec of `size` bits (None: the default) and `encoding`.
fn rsa_spec(size: Option<i32>, encoding: Option<KeyEncoding>) -> CertificateSpec {
    let mut spec = spec("rsa");
    spec.private_key = Some(CertificatePrivateKey {
        algorithm: Some(KeyAlgorithm::Rsa),
        size,
        encoding,
        ..CertificatePrivateKey::default()
    });
    spec
}

#[test]
fn rsa_keys_are_generated_of_the_size_asked_and_written_pkcs1_unless_pkcs8() {
    // The default: 2048 bits, PKCS#1, SHA-256 with RSA.
    let rsa = rsa_spec(None, None);
    let m = material(&rsa, &Signer::SelfSigned, now());
    assert!(
        m.tls_key.starts_with("-----BEGIN RSA PRIVATE KEY-----"),
        "{}",
        &m.tls_key[..40]
    );
    let der = leaf(&m.tls_crt);
    let (_, cert) = X509Certificate::from_der(&der).unwrap();
    assert_eq!(
        cert.public_key().algorithm.algorithm.to_id_string(),
        "1.2.840.113549.1.1.1",
        "rsaEncryption"
    );
    let Ok(x509_parser::public_key::PublicKey::RSA(key)) = cert.public_key().parsed() else {
        panic!("an RSA public key");
    };
    assert_eq!(key.key_size(), 2048);
    assert_eq!(
        cert.signature_algorithm.algorithm.to_id_string(),
        "1.2.840.113549.1.1.11",
        "sha256WithRSAEncryption"
    );
    cert.verify_signature(None)
        .expect("self-signed with its RSA key");
    assert!(matches!(
        inspect(&rsa, &m, &Signer::SelfSigned, now()),
        Verdict::Valid { .. }
    ));

    // PKCS#8 when asked; the key is still what the spec wants.
    let pkcs8 = rsa_spec(Some(2048), Some(KeyEncoding::Pkcs8));
    let m8 = material(&pkcs8, &Signer::SelfSigned, now());
    assert!(m8.tls_key.starts_with("-----BEGIN PRIVATE KEY-----"));
    assert!(matches!(
        inspect(&pkcs8, &m8, &Signer::SelfSigned, now()),
        Verdict::Valid { .. }
    ));

    // A 2048-bit key under a spec asking for 4096 bits, or for ECDSA, is a mismatch; a size
    // outside 2048..=8192 is refused.
    assert!(matches!(
        inspect(&rsa_spec(Some(4096), None), &m, &Signer::SelfSigned, now()),
        Verdict::Mismatch(..)
    ));
    assert!(matches!(
        inspect(&spec("rsa"), &m, &Signer::SelfSigned, now()),
        Verdict::Mismatch(..)
    ));
    assert!(private_key(&rsa_spec(Some(1024), None), None).is_err());

    // rotationPolicy Never keeps a PKCS#1 key across issuances.
    let mut never = rsa_spec(None, None);
    never.private_key.as_mut().unwrap().rotation_policy = Some(RotationPolicy::Never);
    let kept = private_key(&never, Some(&m.tls_key)).unwrap();
    let again = issue(&never, &kept, &Signer::SelfSigned, now()).unwrap();
    assert_eq!(again.key_pem, m.tls_key);
}

#[test]
fn an_rsa_ca_signs_leaves_that_verify() {
    let ca_spec = CertificateSpec {
        common_name: Some("rsa-root".to_owned()),
        is_ca: Some(true),
        ..rsa_spec(None, None)
    };
    let ca = material(&ca_spec, &Signer::SelfSigned, now());
    // The CA Secret's PKCS#1 key is read back.
    let signer = Signer::Ca(Box::new(
        CaKeyPair::from_pem(&ca.tls_crt, &ca.tls_key, &ca.ca_crt).unwrap(),
    ));
    let spec = spec("leaf");
    let m = material(&spec, &signer, now());
    let ca_der = leaf(&ca.tls_crt);
    let (_, ca_cert) = X509Certificate::from_der(&ca_der).unwrap();
    let der = leaf(&m.tls_crt);
    let (_, cert) = X509Certificate::from_der(&der).unwrap();
    cert.verify_signature(Some(ca_cert.public_key()))
        .expect("the leaf verifies against the RSA CA");
    assert!(matches!(
        inspect(&spec, &m, &signer, now()),
        Verdict::Valid { .. }
    ));
}

#[test]
fn rotation_policy_never_reuses_the_key_and_always_replaces_it() {
    let mut spec = spec("rot");
    let first = material(&spec, &Signer::SelfSigned, now());
    let again = private_key(&spec, Some(&first.tls_key)).unwrap();
    assert_ne!(
        again.serialize_pem(),
        first.tls_key,
        "Always (the default) rotates"
    );
    spec.private_key = Some(CertificatePrivateKey {
        rotation_policy: Some(RotationPolicy::Never),
        ..CertificatePrivateKey::default()
    });
    let kept = private_key(&spec, Some(&first.tls_key)).unwrap();
    assert_eq!(kept.serialize_pem(), first.tls_key);
}

#[test]
fn renewal_and_expiry_follow_the_clock() {
    let mut spec = spec("t");
    spec.duration = Some("90s".to_owned());
    let m = material(&spec, &Signer::SelfSigned, now());
    let at = |secs| now() + Duration::seconds(secs);
    let verdict = |secs| match inspect(&spec, &m, &Signer::SelfSigned, at(secs)) {
        Verdict::Valid { due, expired, .. } => (due, expired),
        other => panic!("{other:?}"),
    };
    assert_eq!(verdict(59), (false, false));
    assert_eq!(verdict(60), (true, false));
    assert_eq!(verdict(90), (true, true));
}

#[test]
fn every_edit_of_the_spec_or_the_material_is_a_mismatch() {
    let spec = spec("edit");
    let m = material(&spec, &Signer::SelfSigned, now());
    let mismatch = |s: &CertificateSpec, m: &KeyMaterial| {
        matches!(
            inspect(s, m, &Signer::SelfSigned, now()),
            Verdict::Mismatch(..)
        )
    };
    let mut dns = spec.clone();
    dns.dns_names = Some(vec!["other.example".to_owned()]);
    assert!(mismatch(&dns, &m), "dnsNames");
    let mut cn = spec.clone();
    cn.common_name = Some("renamed".to_owned());
    assert!(mismatch(&cn, &m), "commonName");
    let mut ca = spec.clone();
    ca.is_ca = Some(true);
    assert!(mismatch(&ca, &m), "isCA");
    let mut duration = spec.clone();
    duration.duration = Some("24h".to_owned());
    assert!(mismatch(&duration, &m), "duration");
    let mut org = spec.clone();
    org.subject = Some(super::certificate::X509Subject {
        organizations: vec!["Acme".to_owned()],
        ..Default::default()
    });
    assert!(mismatch(&org, &m), "subject");
    let mut usages = spec.clone();
    usages.usages = Some(vec![
        "digital signature".to_owned(),
        "client auth".to_owned(),
    ]);
    assert!(mismatch(&usages, &m), "usages");
    let other = material(&spec, &Signer::SelfSigned, now());
    let swapped = KeyMaterial {
        tls_key: other.tls_key.clone(),
        ..m.clone()
    };
    assert!(mismatch(&spec, &swapped), "another key");
    let edited = KeyMaterial {
        tls_crt: m.tls_crt.replace('A', "B"),
        ..m.clone()
    };
    assert!(mismatch(&spec, &edited), "edited tls.crt");
    assert!(mismatch(&spec, &KeyMaterial::default()), "empty");
}
