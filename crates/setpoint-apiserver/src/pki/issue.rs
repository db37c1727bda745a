//! Issuing the cluster's certificates with ECDSA P-256 keys: the CA (`CN=setpoint-ca`, ten
//! years, may sign only leaf certificates), the serving certificate (one year, server
//! authentication, the given subject alternative names) and the admin client certificate (one
//! year, client authentication, `CN=setpoint-admin`, `O=system:masters`). Every certificate
//! is backdated an hour to tolerate clock skew and carries a random serial number.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rand::rngs::OsRng;
use rand::RngCore as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber, PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::CertificateDer;
use time::{Duration, OffsetDateTime};

/// Common name of the cluster CA.
pub(crate) const CA_COMMON_NAME: &str = "setpoint-ca";
/// Common name (the user name) of the admin client certificate.
pub(crate) const ADMIN_COMMON_NAME: &str = "setpoint-admin";
/// Organization (the group) of the admin client certificate.
pub(crate) const ADMIN_ORGANIZATION: &str = "system:masters";
/// How long the CA is valid.
pub(crate) const CA_VALIDITY: Duration = Duration::days(3650);
/// How long serving and client certificates are valid.
pub(crate) const LEAF_VALIDITY: Duration = Duration::days(365);
/// How far `not_before` lies in the past, for clients whose clock is a little behind.
const BACKDATE: Duration = Duration::hours(1);

/// A name a serving certificate is valid for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SubjectName {
    /// A DNS name, such as `localhost`.
    Dns(String),
    /// An IP address.
    Ip(IpAddr),
}

impl std::fmt::Display for SubjectName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dns(name) => f.write_str(name),
            Self::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// The names a serving certificate for a server listening on `listen` must cover: the
/// loopback names, and `listen` itself unless it is a loopback or unspecified address (a
/// server on `0.0.0.0` is reached through some address of the host, which cannot be known
/// here; clients on the host use loopback).
pub(crate) fn serving_names(listen: IpAddr) -> Vec<SubjectName> {
    let mut names = vec![
        SubjectName::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        SubjectName::Dns("localhost".to_owned()),
        SubjectName::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST)),
    ];
    let listen = canonical(listen);
    if !listen.is_unspecified() && !names.contains(&SubjectName::Ip(listen)) {
        names.push(SubjectName::Ip(listen));
    }
    names
}

/// `ip` with IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`) turned into IPv4 ones.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// A freshly issued certificate and its key.
pub(crate) struct Issued {
    /// The certificate, PEM-encoded.
    pub(crate) cert_pem: String,
    /// The certificate, DER-encoded.
    pub(crate) cert_der: CertificateDer<'static>,
    /// The certificate's key pair.
    pub(crate) key: KeyPair,
}

/// Creates a new self-signed cluster CA.
#[cfg(test)]
pub(crate) fn certificate_authority(now: OffsetDateTime) -> Result<Issued, rcgen::Error> {
    certificate_authority_named(CA_COMMON_NAME, now)
}

/// Creates a new self-signed CA named `common_name` (the cluster CA, or the front-proxy CA).
pub(crate) fn certificate_authority_named(
    common_name: &str,
    now: OffsetDateTime,
) -> Result<Issued, rcgen::Error> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = base_params(common_name, None, now, CA_VALIDITY);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key)?;
    Ok(Issued {
        cert_pem: cert.pem(),
        cert_der: cert.der().clone(),
        key,
    })
}

/// Issues a serving certificate for `names`, signed by `ca`.
pub(crate) fn serving_certificate(
    ca: &Issuer<'_, KeyPair>,
    names: &[SubjectName],
    now: OffsetDateTime,
) -> Result<Issued, rcgen::Error> {
    let mut params = base_params("setpoint-apiserver", None, now, LEAF_VALIDITY);
    params.subject_alt_names = names
        .iter()
        .map(|name| {
            Ok(match name {
                SubjectName::Dns(dns) => SanType::DnsName(dns.clone().try_into()?),
                SubjectName::Ip(ip) => SanType::IpAddress(*ip),
            })
        })
        .collect::<Result<_, rcgen::Error>>()?;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf(params, ca)
}

/// Issues the admin client certificate, signed by `ca`.
pub(crate) fn admin_certificate(
    ca: &Issuer<'_, KeyPair>,
    now: OffsetDateTime,
) -> Result<Issued, rcgen::Error> {
    let mut params = base_params(
        ADMIN_COMMON_NAME,
        Some(ADMIN_ORGANIZATION),
        now,
        LEAF_VALIDITY,
    );
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    leaf(params, ca)
}

/// Issues a client certificate for `common_name` (no organization), signed by `ca`: the
/// front-proxy client certificate.
pub(crate) fn client_certificate(
    ca: &Issuer<'_, KeyPair>,
    common_name: &str,
    now: OffsetDateTime,
) -> Result<Issued, rcgen::Error> {
    let mut params = base_params(common_name, None, now, LEAF_VALIDITY);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    leaf(params, ca)
}

fn leaf(mut params: CertificateParams, ca: &Issuer<'_, KeyPair>) -> Result<Issued, rcgen::Error> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, ca)?;
    Ok(Issued {
        cert_pem: cert.pem(),
        cert_der: cert.der().clone(),
        key,
    })
}

fn base_params(
    common_name: &str,
    organization: Option<&str>,
    now: OffsetDateTime,
    validity: Duration,
) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut subject = DistinguishedName::new();
    subject.push(DnType::CommonName, common_name);
    if let Some(organization) = organization {
        subject.push(DnType::OrganizationName, organization);
    }
    params.distinguished_name = subject;
    params.not_before = now - BACKDATE;
    params.not_after = now + validity;
    params.serial_number = Some(random_serial());
    params
}

/// 16 random bytes, the top bit cleared so the DER integer stays positive.
fn random_serial() -> SerialNumber {
    let mut bytes = [0_u8; 16];
    OsRng.fill_bytes(&mut bytes);
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_names_should_add_a_routable_listen_address_once() {
        let loopback = serving_names(IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(loopback.len(), 3);
        assert_eq!(serving_names(IpAddr::V6(Ipv6Addr::UNSPECIFIED)), loopback);
        let other = serving_names("10.1.2.3".parse().unwrap());
        assert_eq!(other.len(), 4);
        assert_eq!(other[3], SubjectName::Ip("10.1.2.3".parse().unwrap()));
        let mapped = serving_names("::ffff:10.1.2.3".parse().unwrap());
        assert_eq!(mapped, other);
    }
}
