//! Issuing a Certificate with `rcgen`, as pure functions of its spec, a key, a signer and the
//! time: the private key (`keys.rs`: ECDSA, Ed25519 or RSA), the certificate's parameters
//! (subject, subject alternative names, usages, `isCA`, validity from `now` for the requested
//! duration, a random 128-bit serial), the CSR recorded in the CertificateRequest, and the
//! signed result as the Secret holds it: `tls.crt` (the leaf, then the issuing chain below the
//! root), `tls.key` (PKCS#8 PEM, or PKCS#1 for RSA) and `ca.crt` (the root).

use std::net::IpAddr;

use chrono::{DateTime, Utc};
use rcgen::string::Ia5String;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use ring::rand::SecureRandom as _;
use time::OffsetDateTime;
use x509_parser::prelude::{FromDer as _, X509Certificate};

use super::certificate::{CertificateSpec, RotationPolicy};
use super::keys;
use super::timing::{requested_duration, BadDuration};

/// Why a certificate could not be issued (or a CA key pair not used).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PkiError {
    /// The spec asks for something Setpoint cannot issue.
    #[error("{0}")]
    Spec(String),
    /// A duration field is malformed.
    #[error(transparent)]
    Duration(#[from] BadDuration),
    /// The CA Secret does not hold a usable CA key pair.
    #[error("the CA key pair is not usable: {0}")]
    Ca(String),
    /// rcgen refused.
    #[error("signing failed")]
    Sign(#[from] rcgen::Error),
}

type Result<T> = std::result::Result<T, PkiError>;

/// Who signs: the certificate's own key, or a CA key pair.
pub(crate) enum Signer {
    /// A `selfSigned` issuer.
    SelfSigned,
    /// A `ca` issuer's key pair.
    Ca(Box<CaKeyPair>),
}

/// A CA's certificate (with the chain above it, if any) and private key, read from a Secret.
pub(crate) struct CaKeyPair {
    /// The CA certificate first, then its chain, DER.
    chain: Vec<Vec<u8>>,
    /// The CA's private key.
    key: KeyPair,
    /// The root above the chain (the Secret's `ca.crt`), when given.
    root: Option<Vec<u8>>,
}

impl CaKeyPair {
    /// Reads `tls.crt`, `tls.key` and `ca.crt` (may be empty) of a CA Secret: the first
    /// certificate must be a CA whose public key is the key's.
    pub(crate) fn from_pem(tls_crt: &str, tls_key: &str, ca_crt: &str) -> Result<CaKeyPair> {
        let chain = pem_certificates(tls_crt);
        let first = chain
            .first()
            .ok_or_else(|| PkiError::Ca("tls.crt holds no certificate".to_owned()))?;
        let (_, cert) = X509Certificate::from_der(first)
            .map_err(|e| PkiError::Ca(format!("tls.crt does not parse: {e}")))?;
        let is_ca = cert
            .basic_constraints()
            .ok()
            .flatten()
            .is_some_and(|bc| bc.value.ca);
        if !is_ca {
            return Err(PkiError::Ca(
                "the certificate in tls.crt is not a CA (basicConstraints CA:FALSE)".to_owned(),
            ));
        }
        let key = keys::parse(tls_key).map_err(|e| PkiError::Ca(format!("tls.key: {e}")))?;
        if cert.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
            return Err(PkiError::Ca(
                "tls.key is not the key of the certificate in tls.crt".to_owned(),
            ));
        }
        let root = pem_certificates(ca_crt).into_iter().next();
        Ok(CaKeyPair { chain, key, root })
    }

    /// The root of the CA's chain, PEM (`ca.crt` of what it signs): the Secret's `ca.crt`,
    /// else the last certificate of `tls.crt`.
    pub(crate) fn root_pem(&self) -> String {
        self.root
            .as_ref()
            .or(self.chain.last())
            .map(|der| to_pem(der))
            .unwrap_or_default()
    }

    /// The CA certificate, DER.
    pub(crate) fn certificate_der(&self) -> &[u8] {
        self.chain.first().map(Vec::as_slice).unwrap_or_default()
    }

    /// What goes under a leaf in `tls.crt`: the CA's chain without a self-signed root.
    fn intermediates_pem(&self) -> String {
        let mut out = String::new();
        for der in &self.chain {
            let self_signed = X509Certificate::from_der(der)
                .map(|(_, c)| c.subject() == c.issuer() && c.verify_signature(None).is_ok())
                .unwrap_or(false);
            if !self_signed {
                out.push_str(&to_pem(der));
            }
        }
        out
    }
}

/// A freshly issued certificate, as the Secret and the CertificateRequest hold it.
pub(crate) struct Issued {
    /// `tls.crt`: the leaf, then the chain below the root.
    pub chain_pem: String,
    /// `tls.key`: the private key, PKCS#8 PEM (PKCS#1 for RSA unless asked otherwise).
    pub key_pem: String,
    /// `ca.crt`: the root (the certificate itself when self-signed).
    pub ca_pem: String,
    /// The CSR that was signed, PEM.
    pub csr_pem: String,
}

/// The key to issue with: with `rotationPolicy: Never`, `existing` (the Secret's `tls.key`)
/// when it is of the algorithm and size the spec asks for; else a new one (for RSA, slow: call
/// it off the async runtime).
pub(crate) fn private_key(spec: &CertificateSpec, existing: Option<&str>) -> Result<KeyPair> {
    let wanted = keys::wanted(spec)?;
    let never =
        spec.private_key.as_ref().and_then(|k| k.rotation_policy) == Some(RotationPolicy::Never);
    if never {
        if let Some(key) = existing
            .and_then(|pem| keys::parse(pem).ok())
            .filter(|key| keys::fits(key, &wanted))
        {
            return Ok(key);
        }
    }
    keys::generate(&wanted)
}

/// Issues `spec` with `key`, signed by `signer`, valid from `now` for the requested duration.
pub(crate) fn issue(
    spec: &CertificateSpec,
    key: &KeyPair,
    signer: &Signer,
    now: DateTime<Utc>,
) -> Result<Issued> {
    let mut params = parameters(spec, now)?;
    // A CSR carries no serial number or basic constraints (the CertificateRequest's `isCA`
    // says that).
    let mut request = params.clone();
    request.serial_number = None;
    request.is_ca = IsCa::NoCa;
    let csr_pem = request.serialize_request(key)?.pem()?;
    let (chain_pem, ca_pem) = match signer {
        Signer::SelfSigned => {
            let cert = params.self_signed(key)?;
            (cert.pem(), cert.pem())
        }
        Signer::Ca(ca) => {
            params.use_authority_key_identifier_extension = true;
            let issuer = Issuer::from_ca_cert_der(&ca.certificate_der().into(), &ca.key)?;
            let cert = params.signed_by(key, &issuer)?;
            (
                format!("{}{}", cert.pem(), ca.intermediates_pem()),
                ca.root_pem(),
            )
        }
    };
    Ok(Issued {
        chain_pem,
        key_pem: keys::encode(key, &keys::wanted(spec)?)?,
        ca_pem,
        csr_pem,
    })
}

/// The certificate's parameters from `spec`, valid from `now`.
pub(crate) fn parameters(spec: &CertificateSpec, now: DateTime<Utc>) -> Result<CertificateParams> {
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(spec);
    params.subject_alt_names = subject_alt_names(spec)?;
    let has_names = spec.common_name.as_deref().is_some_and(|cn| !cn.is_empty())
        || !params.subject_alt_names.is_empty();
    if !has_names {
        return Err(PkiError::Spec(
            "at least one of commonName, dnsNames, uris, emailAddresses or ipAddresses must be set"
                .to_owned(),
        ));
    }
    let is_ca = spec.is_ca.unwrap_or(false);
    params.is_ca = if is_ca {
        IsCa::Ca(BasicConstraints::Unconstrained)
    } else {
        IsCa::ExplicitNoCa
    };
    let (mut usages, extended) = usages(spec)?;
    if is_ca && !usages.contains(&KeyUsagePurpose::KeyCertSign) {
        usages.push(KeyUsagePurpose::KeyCertSign);
    }
    params.key_usages = usages;
    params.extended_key_usages = extended;
    let start = to_offset(now)?;
    let lifetime = requested_duration(spec)?;
    params.not_before = start;
    params.not_after = start
        + time::Duration::try_from(lifetime)
            .map_err(|_| PkiError::Spec("duration is too long".to_owned()))?;
    params.serial_number = Some(random_serial()?);
    Ok(params)
}

/// The subject: the common name and `spec.subject`'s fields.
pub(crate) fn distinguished_name(spec: &CertificateSpec) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    let subject = spec.subject.clone().unwrap_or_default();
    let lists: [(DnType, &[String]); 7] = [
        (DnType::CountryName, &subject.countries),
        (DnType::StateOrProvinceName, &subject.provinces),
        (DnType::LocalityName, &subject.localities),
        (
            DnType::CustomDnType(vec![2, 5, 4, 9]),
            &subject.street_addresses,
        ),
        (
            DnType::CustomDnType(vec![2, 5, 4, 17]),
            &subject.postal_codes,
        ),
        (DnType::OrganizationName, &subject.organizations),
        (
            DnType::OrganizationalUnitName,
            &subject.organizational_units,
        ),
    ];
    for (ty, values) in lists {
        // rcgen keeps one value per attribute type: the first, as most tools read it.
        if let Some(value) = values.first() {
            dn.push(ty, value.as_str());
        }
    }
    if let Some(serial) = subject.serial_number.filter(|s| !s.is_empty()) {
        dn.push(DnType::CustomDnType(vec![2, 5, 4, 5]), serial);
    }
    if let Some(cn) = spec.common_name.as_deref().filter(|cn| !cn.is_empty()) {
        dn.push(DnType::CommonName, cn);
    }
    dn
}

fn subject_alt_names(spec: &CertificateSpec) -> Result<Vec<SanType>> {
    let ia5 = |what: &str, value: &str| {
        Ia5String::try_from(value.to_owned())
            .map_err(|_| PkiError::Spec(format!("{what} {value:?} is not ASCII")))
    };
    let mut sans = Vec::new();
    for dns in spec.dns_names.iter().flatten() {
        sans.push(SanType::DnsName(ia5("DNS name", dns)?));
    }
    for ip in spec.ip_addresses.iter().flatten() {
        let parsed: IpAddr = ip
            .parse()
            .map_err(|_| PkiError::Spec(format!("{ip:?} is not an IP address")))?;
        sans.push(SanType::IpAddress(parsed));
    }
    for uri in spec.uris.iter().flatten() {
        sans.push(SanType::URI(ia5("URI", uri)?));
    }
    for email in spec.email_addresses.iter().flatten() {
        sans.push(SanType::Rfc822Name(ia5("email address", email)?));
    }
    Ok(sans)
}

/// Key usages and extended key usages from cert-manager's usage names (default `digital
/// signature` and `key encipherment`).
pub(crate) fn usages(
    spec: &CertificateSpec,
) -> Result<(Vec<KeyUsagePurpose>, Vec<ExtendedKeyUsagePurpose>)> {
    let default = [
        "digital signature".to_owned(),
        "key encipherment".to_owned(),
    ];
    let names = spec.usages.as_deref().unwrap_or(&default);
    let mut key = Vec::new();
    let mut extended = Vec::new();
    for name in names {
        let usage = match name.as_str() {
            "signing" | "digital signature" => Some(KeyUsagePurpose::DigitalSignature),
            "content commitment" => Some(KeyUsagePurpose::ContentCommitment),
            "key encipherment" => Some(KeyUsagePurpose::KeyEncipherment),
            "key agreement" => Some(KeyUsagePurpose::KeyAgreement),
            "data encipherment" => Some(KeyUsagePurpose::DataEncipherment),
            "cert sign" => Some(KeyUsagePurpose::KeyCertSign),
            "crl sign" => Some(KeyUsagePurpose::CrlSign),
            "encipher only" => Some(KeyUsagePurpose::EncipherOnly),
            "decipher only" => Some(KeyUsagePurpose::DecipherOnly),
            _ => None,
        };
        let ext = match name.as_str() {
            "any" => Some(ExtendedKeyUsagePurpose::Any),
            "server auth" => Some(ExtendedKeyUsagePurpose::ServerAuth),
            "client auth" => Some(ExtendedKeyUsagePurpose::ClientAuth),
            "code signing" => Some(ExtendedKeyUsagePurpose::CodeSigning),
            "email protection" | "s/mime" => Some(ExtendedKeyUsagePurpose::EmailProtection),
            "timestamping" => Some(ExtendedKeyUsagePurpose::TimeStamping),
            "ocsp signing" => Some(ExtendedKeyUsagePurpose::OcspSigning),
            _ => None,
        };
        match (usage, ext) {
            (Some(u), _) if !key.contains(&u) => key.push(u),
            (_, Some(e)) if !extended.contains(&e) => extended.push(e),
            (None, None) => {
                return Err(PkiError::Spec(format!("usage {name:?} is not supported")));
            }
            _ => {}
        }
    }
    Ok((key, extended))
}

/// The PEM blocks labelled `CERTIFICATE` in `text`, DER.
pub(crate) fn pem_certificates(text: &str) -> Vec<Vec<u8>> {
    x509_parser::pem::Pem::iter_from_buffer(text.as_bytes())
        .filter_map(std::result::Result::ok)
        .filter(|p| p.label == "CERTIFICATE")
        .map(|p| p.contents)
        .collect()
}

/// `der` as one PEM `CERTIFICATE` block.
pub(crate) fn to_pem(der: &[u8]) -> String {
    let body = base64_lines(der);
    format!("-----BEGIN CERTIFICATE-----\n{body}-----END CERTIFICATE-----\n")
}

fn base64_lines(der: &[u8]) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::with_capacity(encoded.len() + encoded.len() / 64 + 1);
    for chunk in encoded.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out
}

fn to_offset(at: DateTime<Utc>) -> Result<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(at.timestamp())
        .map_err(|_| PkiError::Spec(format!("time {at} is out of range")))
}

/// 16 random bytes, the top bit cleared so the DER integer stays positive.
fn random_serial() -> Result<SerialNumber> {
    let mut bytes = [0_u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| PkiError::Spec("no randomness for a serial number".to_owned()))?;
    bytes[0] &= 0x7f;
    Ok(SerialNumber::from_slice(&bytes))
}
