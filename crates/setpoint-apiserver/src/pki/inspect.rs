//! Judging certificates found on disk: whether a CA can go on signing, and whether a leaf
//! certificate (serving or client) can go on being used or must be re-issued. A leaf is
//! usable when it parses, matches its key, was signed by the current CA, has the expected
//! subject, covers every required name and is not within the renewal window of its expiry.

use std::fmt;
use std::net::IpAddr;

use rcgen::{KeyPair, PublicKeyData as _};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;
use time::{Duration, OffsetDateTime};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

use super::issue::SubjectName;

/// Why a certificate on disk cannot be used as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Unusable {
    /// The certificate or key file does not exist.
    Missing,
    /// The certificate or key does not parse.
    Malformed(String),
    /// The key is not the one the certificate certifies.
    KeyMismatch,
    /// The certificate is not a CA certificate.
    NotCa,
    /// The certificate was not issued by the current CA.
    NotIssuedByCa,
    /// The certificate's subject common name is not the expected one.
    WrongSubject,
    /// The certificate is expired or expires within the renewal window.
    Expiring {
        /// When it expires, in seconds since the Unix epoch.
        not_after: i64,
    },
    /// The certificate does not cover a name clients use.
    MissingName(SubjectName),
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing => f.write_str("missing"),
            Self::Malformed(why) => write!(f, "malformed: {why}"),
            Self::KeyMismatch => f.write_str("key does not match the certificate"),
            Self::NotCa => f.write_str("not a CA certificate"),
            Self::NotIssuedByCa => f.write_str("not issued by the current CA"),
            Self::WrongSubject => f.write_str("unexpected subject"),
            Self::Expiring { not_after } => match OffsetDateTime::from_unix_timestamp(*not_after) {
                Ok(time) => write!(f, "expires at {time}"),
                Err(_) => write!(f, "expires at {not_after} (Unix time)"),
            },
            Self::MissingName(name) => write!(f, "does not cover {name}"),
        }
    }
}

/// What a leaf certificate must satisfy.
pub(crate) struct LeafRequirements<'a> {
    /// The expected subject common name.
    pub(crate) common_name: &'a str,
    /// Names the certificate must cover (it may cover more).
    pub(crate) names: &'a [SubjectName],
    /// A certificate expiring sooner than this is re-issued.
    pub(crate) renew_before: Duration,
}

/// Parses a PEM certificate and its PEM (PKCS #8) key and checks that they belong together.
pub(crate) fn certificate_and_key(
    cert_pem: &str,
    key_pem: &str,
) -> Result<(CertificateDer<'static>, KeyPair), Unusable> {
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .map_err(|error| Unusable::Malformed(format!("certificate: {error}")))?;
    let key =
        KeyPair::from_pem(key_pem).map_err(|error| Unusable::Malformed(format!("key: {error}")))?;
    let cert = parse(&der)?;
    if cert.public_key().raw != key.subject_public_key_info().as_slice() {
        return Err(Unusable::KeyMismatch);
    }
    Ok((der, key))
}

/// Checks that `der` is a CA certificate valid at `now`.
pub(crate) fn check_ca(der: &CertificateDer<'_>, now: OffsetDateTime) -> Result<(), Unusable> {
    let cert = parse(der)?;
    if !cert.is_ca() {
        return Err(Unusable::NotCa);
    }
    check_expiry(&cert, now, Duration::ZERO)
}

/// Checks that the leaf certificate `der` was issued by `ca` and meets `required` at `now`.
pub(crate) fn check_leaf(
    der: &CertificateDer<'_>,
    ca: &CertificateDer<'_>,
    required: &LeafRequirements<'_>,
    now: OffsetDateTime,
) -> Result<(), Unusable> {
    let cert = parse(der)?;
    let ca = parse(ca)?;
    if cert.issuer().as_raw() != ca.subject().as_raw()
        || cert.verify_signature(Some(ca.public_key())).is_err()
    {
        return Err(Unusable::NotIssuedByCa);
    }
    if common_names(&cert).first().map(String::as_str) != Some(required.common_name) {
        return Err(Unusable::WrongSubject);
    }
    check_expiry(&cert, now, required.renew_before)?;
    let covered = covered_names(&cert)?;
    match required.names.iter().find(|name| !covered.contains(name)) {
        Some(missing) => Err(Unusable::MissingName(missing.clone())),
        None => Ok(()),
    }
}

/// The subject common names of `cert`, in order.
pub(crate) fn common_names(cert: &X509Certificate<'_>) -> Vec<String> {
    strings(cert.subject().iter_common_name())
}

/// The subject organizations of `cert`, in order.
pub(crate) fn organizations(cert: &X509Certificate<'_>) -> Vec<String> {
    strings(cert.subject().iter_organization())
}

/// Parses a DER certificate.
pub(crate) fn parse<'a>(der: &'a CertificateDer<'_>) -> Result<X509Certificate<'a>, Unusable> {
    x509_parser::parse_x509_certificate(der)
        .map(|(_, cert)| cert)
        .map_err(|error| Unusable::Malformed(format!("certificate: {error}")))
}

fn strings<'a>(
    values: impl Iterator<Item = &'a x509_parser::x509::AttributeTypeAndValue<'a>>,
) -> Vec<String> {
    values
        .filter_map(|value| value.as_str().ok().map(str::to_owned))
        .collect()
}

fn check_expiry(
    cert: &X509Certificate<'_>,
    now: OffsetDateTime,
    renew_before: Duration,
) -> Result<(), Unusable> {
    let not_after = cert.validity().not_after.timestamp();
    if (now + renew_before).unix_timestamp() >= not_after {
        return Err(Unusable::Expiring { not_after });
    }
    Ok(())
}

fn covered_names(cert: &X509Certificate<'_>) -> Result<Vec<SubjectName>, Unusable> {
    let Some(extension) = cert
        .subject_alternative_name()
        .map_err(|error| Unusable::Malformed(format!("subject alternative names: {error}")))?
    else {
        return Ok(Vec::new());
    };
    Ok(extension
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some(SubjectName::Dns(dns.to_ascii_lowercase())),
            GeneralName::IPAddress(octets) => ip_from_octets(octets).map(SubjectName::Ip),
            _ => None,
        })
        .collect())
}

fn ip_from_octets(octets: &[u8]) -> Option<IpAddr> {
    match octets.len() {
        4 => <[u8; 4]>::try_from(octets).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(octets).ok().map(IpAddr::from),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::issue;
    use super::*;

    fn names(listen: &str) -> Vec<SubjectName> {
        issue::serving_names(listen.parse().unwrap())
    }

    fn requirements(names: &[SubjectName]) -> LeafRequirements<'_> {
        LeafRequirements {
            common_name: "setpoint-apiserver",
            names,
            renew_before: Duration::days(30),
        }
    }

    #[test]
    fn check_leaf_should_accept_a_fresh_serving_certificate() {
        let now = OffsetDateTime::now_utc();
        let ca = issue::certificate_authority(now).unwrap();
        check_ca(&ca.cert_der, now).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_der(&ca.cert_der, ca.key).unwrap();
        let names = names("127.0.0.1");
        let leaf = issue::serving_certificate(&issuer, &names, now).unwrap();
        check_leaf(&leaf.cert_der, &ca.cert_der, &requirements(&names), now).unwrap();
        let (der, _) = certificate_and_key(&leaf.cert_pem, &leaf.key.serialize_pem()).unwrap();
        assert_eq!(der, leaf.cert_der);
    }

    #[test]
    fn check_leaf_should_reject_a_certificate_missing_the_listen_address() {
        let now = OffsetDateTime::now_utc();
        let ca = issue::certificate_authority(now).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_der(&ca.cert_der, ca.key).unwrap();
        let leaf = issue::serving_certificate(&issuer, &names("127.0.0.1"), now).unwrap();
        let wanted = names("10.9.8.7");
        assert_eq!(
            check_leaf(&leaf.cert_der, &ca.cert_der, &requirements(&wanted), now),
            Err(Unusable::MissingName(SubjectName::Ip(
                "10.9.8.7".parse().unwrap()
            )))
        );
    }

    #[test]
    fn check_leaf_should_reject_a_certificate_from_another_ca() {
        let now = OffsetDateTime::now_utc();
        let ca = issue::certificate_authority(now).unwrap();
        let other = issue::certificate_authority(now).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_der(&other.cert_der, other.key).unwrap();
        let names = names("127.0.0.1");
        let leaf = issue::serving_certificate(&issuer, &names, now).unwrap();
        assert_eq!(
            check_leaf(&leaf.cert_der, &ca.cert_der, &requirements(&names), now),
            Err(Unusable::NotIssuedByCa)
        );
    }

    #[test]
    fn check_leaf_should_reject_a_certificate_inside_its_renewal_window() {
        let now = OffsetDateTime::now_utc();
        let ca = issue::certificate_authority(now).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_der(&ca.cert_der, ca.key).unwrap();
        let names = names("127.0.0.1");
        let leaf = issue::serving_certificate(&issuer, &names, now).unwrap();
        let later = now + issue::LEAF_VALIDITY - Duration::days(29);
        assert!(matches!(
            check_leaf(&leaf.cert_der, &ca.cert_der, &requirements(&names), later),
            Err(Unusable::Expiring { .. })
        ));
    }

    #[test]
    fn certificate_and_key_should_reject_a_key_of_another_certificate() {
        let now = OffsetDateTime::now_utc();
        let ca = issue::certificate_authority(now).unwrap();
        let other = issue::certificate_authority(now).unwrap();
        assert_eq!(
            certificate_and_key(&ca.cert_pem, &other.key.serialize_pem()).err(),
            Some(Unusable::KeyMismatch)
        );
    }

    #[test]
    fn admin_certificate_should_carry_the_admin_user_and_group() {
        let now = OffsetDateTime::now_utc();
        let ca = issue::certificate_authority(now).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_der(&ca.cert_der, ca.key).unwrap();
        let admin = issue::admin_certificate(&issuer, now).unwrap();
        let cert = parse(&admin.cert_der).unwrap();
        assert_eq!(common_names(&cert), [issue::ADMIN_COMMON_NAME]);
        assert_eq!(organizations(&cert), [issue::ADMIN_ORGANIZATION]);
    }
}
