//! Judging an issued certificate against its Certificate, as pure functions: does `tls.crt`
//! parse, is `tls.key` its key, of the algorithm asked for, do the subject, the subject
//! alternative names, `isCA` and the lifetime match the spec, was it signed by the issuer
//! (the CA's signature verifies, `ca.crt` is the CA's root; or it verifies under its own key
//! when self-signed), and where does `now` stand against its renewal time and expiry.

use std::collections::BTreeSet;
use std::net::IpAddr;

use chrono::{DateTime, Utc};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer as _, X509Certificate};

use super::certificate::CertificateSpec;
use super::keys;
use super::pki::{distinguished_name, pem_certificates, usages as pki_usages, Signer};
use super::timing::{renewal_time, requested_duration};

/// The key pair as the Secret (or the directory) holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct KeyMaterial {
    /// `tls.crt`.
    pub tls_crt: String,
    /// `tls.key`.
    pub tls_key: String,
    /// `ca.crt`.
    pub ca_crt: String,
}

/// The dates of a parsed certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Validity {
    /// When it becomes valid.
    pub not_before: DateTime<Utc>,
    /// When it expires.
    pub not_after: DateTime<Utc>,
    /// When it is renewed.
    pub renewal: DateTime<Utc>,
}

/// What the inspection found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It does not parse or does not match the spec or issuer: re-issue. The dates, when the
    /// certificate parsed.
    Mismatch(String, Option<Validity>),
    /// It matches and is valid; `due` when `now` is at or past the renewal time, `expired`
    /// when past `notAfter`.
    Valid {
        /// Its dates.
        validity: Validity,
        /// At or past the renewal time.
        due: bool,
        /// Past `notAfter`.
        expired: bool,
        /// Its serial number, hex.
        serial: String,
    },
}

/// Judges `material` against `spec`, the `signer` and `now`.
pub(crate) fn inspect(
    spec: &CertificateSpec,
    material: &KeyMaterial,
    signer: &Signer,
    now: DateTime<Utc>,
) -> Verdict {
    let Some(leaf_der) = pem_certificates(&material.tls_crt).into_iter().next() else {
        return Verdict::Mismatch("tls.crt holds no certificate".to_owned(), None);
    };
    let Ok((_, leaf)) = X509Certificate::from_der(&leaf_der) else {
        return Verdict::Mismatch("tls.crt does not parse".to_owned(), None);
    };
    let not_before = timestamp(leaf.validity().not_before.timestamp());
    let not_after = timestamp(leaf.validity().not_after.timestamp());
    let validity = match renewal_time(spec, not_before, not_after) {
        Ok(renewal) => Validity {
            not_before,
            not_after,
            renewal,
        },
        Err(e) => return Verdict::Mismatch(e.to_string(), None),
    };
    if let Err(problem) = matches(spec, material, signer, &leaf) {
        return Verdict::Mismatch(problem, Some(validity));
    }
    Verdict::Valid {
        validity,
        due: now >= validity.renewal,
        expired: now >= not_after,
        serial: leaf.raw_serial_as_string(),
    }
}

/// The first difference between the certificate and what it should be, if any.
fn matches(
    spec: &CertificateSpec,
    material: &KeyMaterial,
    signer: &Signer,
    leaf: &X509Certificate<'_>,
) -> Result<(), String> {
    let key = keys::parse(&material.tls_key).map_err(|e| format!("tls.key: {e}"))?;
    if leaf.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
        return Err("tls.key is not the key of tls.crt".to_owned());
    }
    let wanted = keys::wanted(spec).map_err(|e| e.to_string())?;
    if !keys::fits(&key, &wanted) {
        return Err(
            "the private key is not of the algorithm and size the spec asks for".to_owned(),
        );
    }
    if subject(leaf) != expected_subject(spec) {
        return Err("the subject differs from the spec".to_owned());
    }
    if names(leaf) != expected_names(spec) {
        return Err("the subject alternative names differ from the spec".to_owned());
    }
    let is_ca = leaf
        .basic_constraints()
        .ok()
        .flatten()
        .is_some_and(|bc| bc.value.ca);
    if is_ca != spec.is_ca.unwrap_or(false) {
        return Err("isCA differs from the spec".to_owned());
    }
    if usages(leaf) != expected_usages(spec)? {
        return Err("the key usages differ from spec.usages".to_owned());
    }
    let lifetime = leaf.validity().not_after.timestamp() - leaf.validity().not_before.timestamp();
    let wanted = requested_duration(spec).map_err(|e| e.to_string())?;
    if u64::try_from(lifetime).ok() != Some(wanted.as_secs()) {
        return Err("the lifetime differs from spec.duration".to_owned());
    }
    match signer {
        Signer::SelfSigned => {
            if leaf.subject() != leaf.issuer() || leaf.verify_signature(None).is_err() {
                return Err("it is not self-signed".to_owned());
            }
            if pem_certificates(&material.ca_crt)
                .first()
                .map(Vec::as_slice)
                != Some(leaf.as_ref())
            {
                return Err("ca.crt is not the certificate itself".to_owned());
            }
        }
        Signer::Ca(ca) => {
            let Ok((_, ca_cert)) = X509Certificate::from_der(ca.certificate_der()) else {
                return Err("the issuer's CA certificate does not parse".to_owned());
            };
            if leaf.issuer() != ca_cert.subject()
                || leaf.verify_signature(Some(ca_cert.public_key())).is_err()
            {
                return Err("it was not signed by the issuer's CA".to_owned());
            }
            if pem_certificates(&material.ca_crt) != pem_certificates(&ca.root_pem()) {
                return Err("ca.crt is not the issuer's root CA".to_owned());
            }
        }
    }
    Ok(())
}

/// The subject's attributes as (OID, value) pairs, sorted.
fn subject(cert: &X509Certificate<'_>) -> BTreeSet<(String, String)> {
    cert.subject()
        .iter_attributes()
        .map(|a| {
            (
                a.attr_type().to_id_string(),
                a.as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn expected_subject(spec: &CertificateSpec) -> BTreeSet<(String, String)> {
    distinguished_name(spec)
        .iter()
        .map(|(ty, value)| {
            let oid = match ty {
                rcgen::DnType::CountryName => "2.5.4.6".to_owned(),
                rcgen::DnType::LocalityName => "2.5.4.7".to_owned(),
                rcgen::DnType::StateOrProvinceName => "2.5.4.8".to_owned(),
                rcgen::DnType::OrganizationName => "2.5.4.10".to_owned(),
                rcgen::DnType::OrganizationalUnitName => "2.5.4.11".to_owned(),
                rcgen::DnType::CommonName => "2.5.4.3".to_owned(),
                rcgen::DnType::CustomDnType(oid) => {
                    oid.iter().map(u64::to_string).collect::<Vec<_>>().join(".")
                }
                _ => String::new(),
            };
            let text = match value {
                rcgen::DnValue::Utf8String(s) => s.clone(),
                rcgen::DnValue::PrintableString(s) => s.as_str().to_owned(),
                other => format!("{other:?}"),
            };
            (oid, text)
        })
        .collect()
}

/// The key usages and extended key usages a certificate carries, by name.
fn usages(cert: &X509Certificate<'_>) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    if let Ok(Some(ku)) = cert.key_usage() {
        let ku = ku.value;
        for (set, name) in [
            (ku.digital_signature(), "digitalSignature"),
            (ku.non_repudiation(), "contentCommitment"),
            (ku.key_encipherment(), "keyEncipherment"),
            (ku.data_encipherment(), "dataEncipherment"),
            (ku.key_agreement(), "keyAgreement"),
            (ku.key_cert_sign(), "keyCertSign"),
            (ku.crl_sign(), "cRLSign"),
            (ku.encipher_only(), "encipherOnly"),
            (ku.decipher_only(), "decipherOnly"),
        ] {
            if set {
                out.insert(name);
            }
        }
    }
    if let Ok(Some(eku)) = cert.extended_key_usage() {
        let eku = eku.value;
        for (set, name) in [
            (eku.any, "any"),
            (eku.server_auth, "serverAuth"),
            (eku.client_auth, "clientAuth"),
            (eku.code_signing, "codeSigning"),
            (eku.email_protection, "emailProtection"),
            (eku.time_stamping, "timeStamping"),
            (eku.ocsp_signing, "OCSPSigning"),
        ] {
            if set {
                out.insert(name);
            }
        }
    }
    out
}

fn expected_usages(spec: &CertificateSpec) -> Result<BTreeSet<&'static str>, String> {
    use rcgen::{ExtendedKeyUsagePurpose as E, KeyUsagePurpose as K};
    let (mut key, extended) = pki_usages(spec).map_err(|e| e.to_string())?;
    if spec.is_ca.unwrap_or(false) && !key.contains(&K::KeyCertSign) {
        key.push(K::KeyCertSign);
    }
    let mut out = BTreeSet::new();
    for k in key {
        out.insert(match k {
            K::DigitalSignature => "digitalSignature",
            K::ContentCommitment => "contentCommitment",
            K::KeyEncipherment => "keyEncipherment",
            K::DataEncipherment => "dataEncipherment",
            K::KeyAgreement => "keyAgreement",
            K::KeyCertSign => "keyCertSign",
            K::CrlSign => "cRLSign",
            K::EncipherOnly => "encipherOnly",
            K::DecipherOnly => "decipherOnly",
        });
    }
    for e in extended {
        out.insert(match e {
            E::Any => "any",
            E::ServerAuth => "serverAuth",
            E::ClientAuth => "clientAuth",
            E::CodeSigning => "codeSigning",
            E::EmailProtection => "emailProtection",
            E::TimeStamping => "timeStamping",
            E::OcspSigning => "OCSPSigning",
            E::Other(_) => "other",
        });
    }
    Ok(out)
}

/// A subject alternative name, comparable.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Name {
    Dns(String),
    Ip(IpAddr),
    Uri(String),
    Email(String),
}

fn names(cert: &X509Certificate<'_>) -> BTreeSet<Name> {
    let mut out = BTreeSet::new();
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return out;
    };
    for name in &san.value.general_names {
        match name {
            GeneralName::DNSName(d) => {
                out.insert(Name::Dns((*d).to_owned()));
            }
            GeneralName::URI(u) => {
                out.insert(Name::Uri((*u).to_owned()));
            }
            GeneralName::RFC822Name(e) => {
                out.insert(Name::Email((*e).to_owned()));
            }
            GeneralName::IPAddress(bytes) => {
                let ip = match bytes.len() {
                    4 => <[u8; 4]>::try_from(*bytes).ok().map(IpAddr::from),
                    16 => <[u8; 16]>::try_from(*bytes).ok().map(IpAddr::from),
                    _ => None,
                };
                if let Some(ip) = ip {
                    out.insert(Name::Ip(ip));
                }
            }
            _ => {}
        }
    }
    out
}

fn expected_names(spec: &CertificateSpec) -> BTreeSet<Name> {
    let mut out = BTreeSet::new();
    out.extend(spec.dns_names.iter().flatten().cloned().map(Name::Dns));
    out.extend(
        spec.ip_addresses
            .iter()
            .flatten()
            .filter_map(|ip| ip.parse().ok())
            .map(Name::Ip),
    );
    out.extend(spec.uris.iter().flatten().cloned().map(Name::Uri));
    out.extend(
        spec.email_addresses
            .iter()
            .flatten()
            .cloned()
            .map(Name::Email),
    );
    out
}

fn timestamp(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).unwrap_or_default()
}
