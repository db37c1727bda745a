use std::time::Duration;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec, CertificateSigningRequestStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use k8s_openapi::ByteString;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, SanType,
};
use x509_parser::prelude::FromDer as _;

use super::request::{parse, BadRequest};
use super::signer::{self, SigningCa};
use super::{approver, cleaner, new_condition};

fn ca() -> SigningCa {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, "test-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    SigningCa {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

fn csr_pem(cn: &str, orgs: &[&str], dns: &[&str]) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, cn);
    for o in orgs {
        name.push(DnType::OrganizationName, *o);
    }
    params.distinguished_name = name;
    params.subject_alt_names = dns
        .iter()
        .map(|d| SanType::DnsName((*d).try_into().unwrap()))
        .collect();
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn usages(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn a_request_should_parse_only_with_a_valid_signature() {
    let pem = csr_pem("jane", &["dev"], &[]);
    let request = parse(pem.as_bytes()).unwrap();
    assert_eq!(request.common_name(), "jane");
    assert_eq!(request.organizations, ["dev"]);
    assert_eq!(parse(b"hello").unwrap_err(), BadRequest::NotPem);
    // Change one character of the base64 text near the end: the signature's bytes.
    let mut lines: Vec<String> = pem.lines().map(str::to_owned).collect();
    let body = lines.len() - 2;
    let mut chars: Vec<char> = lines[body].chars().collect();
    let at = chars.len() / 2;
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    lines[body] = chars.into_iter().collect();
    let tampered = lines.join("\n");
    assert!(matches!(
        parse(tampered.as_bytes()),
        Err(BadRequest::Signature | BadRequest::Malformed(_))
    ));
}

#[test]
fn each_signer_should_check_its_rules() {
    let client = parse(csr_pem("jane", &["dev"], &[]).as_bytes()).unwrap();
    let kcu = |u: &[&str]| signer::check(signer::KUBE_APISERVER_CLIENT, &client, &usages(u));
    assert!(kcu(&["digital signature", "client auth"]).is_ok());
    assert!(kcu(&["digital signature"]).is_err());
    assert!(kcu(&["client auth", "server auth"]).is_err());

    let node = parse(csr_pem("system:node:n1", &["system:nodes"], &[]).as_bytes()).unwrap();
    let kubelet = |r, u: &[&str]| signer::check(signer::KUBELET_CLIENT, r, &usages(u));
    assert!(kubelet(&node, &["digital signature", "client auth"]).is_ok());
    assert!(kubelet(
        &node,
        &["key encipherment", "digital signature", "client auth"]
    )
    .is_ok());
    assert!(kubelet(&node, &["client auth"]).is_err());
    assert!(kubelet(&client, &["digital signature", "client auth"]).is_err());
    let admin = parse(csr_pem("system:node:n1", &["system:masters"], &[]).as_bytes()).unwrap();
    assert!(kubelet(&admin, &["digital signature", "client auth"]).is_err());

    let serving =
        parse(csr_pem("system:node:n1", &["system:nodes"], &["n1.local"]).as_bytes()).unwrap();
    let serve = |r, u: &[&str]| signer::check(signer::KUBELET_SERVING, r, &usages(u));
    assert!(serve(&serving, &["digital signature", "server auth"]).is_ok());
    assert!(serve(&node, &["digital signature", "server auth"]).is_err());
    assert!(kubelet(&serving, &["digital signature", "client auth"]).is_err());
}

#[test]
fn a_signed_certificate_should_keep_the_subject_and_last_the_asked_duration() {
    let ca = ca();
    let request = parse(csr_pem("jane", &["dev"], &[]).as_bytes()).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let pem = signer::sign(
        &ca,
        &request,
        &usages(&["digital signature", "client auth"]),
        Duration::from_secs(3600),
        now,
    )
    .unwrap();
    let cert = verify_with_ca(&pem, &ca);
    let cn: Vec<_> = cert
        .subject()
        .iter_common_name()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(cn, ["jane"]);
    let o: Vec<_> = cert
        .subject()
        .iter_organization()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(o, ["dev"]);
    let issuer: Vec<_> = cert
        .issuer()
        .iter_common_name()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(issuer, ["test-ca"]);
    let lifetime = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    assert_eq!(lifetime, 3600 + 300);
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth);
}

#[test]
fn a_serving_certificate_should_carry_the_requested_names() {
    let ca = ca();
    let request =
        parse(csr_pem("system:node:n1", &["system:nodes"], &["n1.local"]).as_bytes()).unwrap();
    let usages = usages(&["digital signature", "key encipherment", "server auth"]);
    let pem = signer::sign(
        &ca,
        &request,
        &usages,
        Duration::from_secs(86_400),
        time::OffsetDateTime::now_utc(),
    )
    .unwrap();
    let cert = verify_with_ca(&pem, &ca);
    let san = cert.subject_alternative_name().unwrap().unwrap().value;
    assert_eq!(san.general_names.len(), 1);
    assert!(cert.key_usage().unwrap().unwrap().value.key_encipherment());
    assert!(
        cert.extended_key_usage()
            .unwrap()
            .unwrap()
            .value
            .server_auth
    );
}

fn node_csr(username: &str, orgs: &[&str]) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: ObjectMeta::default(),
        spec: CertificateSigningRequestSpec {
            request: ByteString(csr_pem("system:node:n1", orgs, &[]).into_bytes()),
            signer_name: signer::KUBELET_CLIENT.to_owned(),
            usages: Some(usages(&["digital signature", "client auth"])),
            username: Some(username.to_owned()),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    }
}

#[test]
fn node_client_requests_should_name_the_permission_that_approves_them() {
    let own = node_csr("system:node:n1", &["system:nodes"]);
    assert_eq!(
        approver::node_client_permission(&own),
        Some("selfnodeclient")
    );
    let bootstrap = node_csr("system:bootstrap:abcdef", &["system:nodes"]);
    assert_eq!(
        approver::node_client_permission(&bootstrap),
        Some("nodeclient")
    );
    let masters = node_csr("system:bootstrap:abcdef", &["system:masters"]);
    assert_eq!(approver::node_client_permission(&masters), None);
    let mut other = own.clone();
    other.spec.signer_name = signer::KUBE_APISERVER_CLIENT.to_owned();
    assert_eq!(approver::node_client_permission(&other), None);
}

#[test]
fn the_cleaner_should_keep_requests_for_their_time() {
    let created = Timestamp::from_second(1_700_000_000).unwrap();
    let mut csr = node_csr("u", &["system:nodes"]);
    csr.metadata.creation_timestamp = Some(Time(created));
    let day = created.checked_add(SignedDuration::from_hours(24)).unwrap();
    assert_eq!(cleaner::deadline(&csr), Some(day));
    let mut denied = new_condition("Denied", "No", "no");
    denied.last_update_time = Some(Time(created));
    csr.status = Some(CertificateSigningRequestStatus {
        conditions: Some(vec![denied]),
        certificate: None,
    });
    let hour = created.checked_add(SignedDuration::from_hours(1)).unwrap();
    assert_eq!(cleaner::deadline(&csr), Some(hour));
    // Approved but not issued: kept.
    let mut approved = new_condition("Approved", "Yes", "yes");
    approved.last_update_time = Some(Time(created));
    csr.status = Some(CertificateSigningRequestStatus {
        conditions: Some(vec![approved]),
        certificate: None,
    });
    assert_eq!(cleaner::deadline(&csr), None);
    // Issued with a certificate that expired: at its expiry.
    let request = parse(&csr.spec.request.0).unwrap();
    let then = time::OffsetDateTime::from_unix_timestamp(1_600_000_000).unwrap();
    let pem = signer::sign(
        &ca(),
        &request,
        &usages(&["client auth"]),
        Duration::from_secs(600),
        then,
    )
    .unwrap();
    csr.status.as_mut().unwrap().certificate = Some(ByteString(pem.into_bytes()));
    assert_eq!(
        cleaner::deadline(&csr),
        Some(Timestamp::from_second(1_600_000_600).unwrap())
    );
}

fn verify_with_ca(pem: &str, ca: &SigningCa) -> x509_parser::certificate::X509Certificate<'static> {
    let block = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap().1;
    let der: &'static [u8] = Box::leak(block.contents.into_boxed_slice());
    let cert = x509_parser::certificate::X509Certificate::from_der(der)
        .unwrap()
        .1;
    let ca_block = x509_parser::pem::parse_x509_pem(ca.cert_pem.as_bytes())
        .unwrap()
        .1;
    let ca_cert = x509_parser::certificate::X509Certificate::from_der(&ca_block.contents)
        .unwrap()
        .1;
    cert.verify_signature(Some(ca_cert.public_key())).unwrap();
    cert
}

#[test]
fn a_client_certificate_should_hold_every_group() {
    let ca = ca();
    let groups = vec![
        "dev".to_owned(),
        "ops".to_owned(),
        "system:masters".to_owned(),
    ];
    let (cert, key) =
        super::issue_client_certificate(&ca, "jane", &groups, time::Duration::days(2)).unwrap();
    let cert = verify_with_ca(&cert, &ca);
    let o: Vec<_> = cert
        .subject()
        .iter_organization()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(o, ["dev", "ops", "system:masters"]);
    let cn: Vec<_> = cert
        .subject()
        .iter_common_name()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(cn, ["jane"]);
    assert!(
        cert.extended_key_usage()
            .unwrap()
            .unwrap()
            .value
            .client_auth
    );
    assert!(!cert.is_ca());
    let lifetime = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    assert_eq!(lifetime, 2 * 86_400 + 300);
    assert!(KeyPair::from_pem(&key).is_ok());
}
