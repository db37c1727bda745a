//! Reading a CertificateSigningRequest's PEM request: parsed, its signature checked, and what
//! the signers and the approver look at (subject names, subject alternative names, the public
//! key) taken out of it, as kube-controller-manager's certificate controllers read it.

use std::net::IpAddr;

use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer as _;

/// What a certificate request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// The subject's common names (one in practice).
    pub(crate) common_names: Vec<String>,
    /// The subject's organizations (the groups of a client certificate).
    pub(crate) organizations: Vec<String>,
    /// The subject's organizational units.
    pub(crate) organizational_units: Vec<String>,
    /// DNS subject alternative names.
    pub(crate) dns_names: Vec<String>,
    /// IP subject alternative names.
    pub(crate) ip_addresses: Vec<IpAddr>,
    /// e-mail and URI subject alternative names (no built-in signer accepts them).
    pub(crate) other_names: Vec<String>,
    /// The DER SubjectPublicKeyInfo the certificate is issued for.
    pub(crate) public_key: Vec<u8>,
    /// The DER subject `Name`, copied into the certificate as it is.
    pub(crate) subject: Vec<u8>,
}

impl Request {
    /// The single common name, or `""`.
    pub(crate) fn common_name(&self) -> &str {
        self.common_names.first().map_or("", String::as_str)
    }
}

/// Why a request cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadRequest {
    /// No PEM `CERTIFICATE REQUEST` block.
    #[error("PEM block type must be CERTIFICATE REQUEST")]
    NotPem,
    /// The DER does not parse.
    #[error("the certificate request does not parse: {0}")]
    Malformed(String),
    /// The request's self-signature does not verify.
    #[error("the certificate request's signature is invalid")]
    Signature,
}

/// Parses the PEM request (the decoded `spec.request`) and checks its signature.
pub(crate) fn parse(pem: &[u8]) -> Result<Request, BadRequest> {
    let block = x509_parser::pem::Pem::iter_from_buffer(pem)
        .filter_map(Result::ok)
        .find(|p| p.label == "CERTIFICATE REQUEST" || p.label == "NEW CERTIFICATE REQUEST")
        .ok_or(BadRequest::NotPem)?;
    let (_, csr) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| BadRequest::Malformed(e.to_string()))?;
    csr.verify_signature().map_err(|_| BadRequest::Signature)?;
    let info = &csr.certification_request_info;
    let strings = |it: &mut dyn Iterator<Item = &x509_parser::x509::AttributeTypeAndValue<'_>>| {
        it.filter_map(|a| a.as_str().ok().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    let mut request = Request {
        common_names: strings(&mut info.subject.iter_common_name()),
        organizations: strings(&mut info.subject.iter_organization()),
        organizational_units: strings(&mut info.subject.iter_organizational_unit()),
        dns_names: Vec::new(),
        ip_addresses: Vec::new(),
        other_names: Vec::new(),
        public_key: info.subject_pki.raw.to_vec(),
        subject: info.subject.as_raw().to_vec(),
    };
    for extension in csr.requested_extensions().into_iter().flatten() {
        let ParsedExtension::SubjectAlternativeName(san) = extension else {
            continue;
        };
        for name in &san.general_names {
            match name {
                GeneralName::DNSName(dns) => request.dns_names.push((*dns).to_owned()),
                GeneralName::IPAddress(octets) => match ip(octets) {
                    Some(ip) => request.ip_addresses.push(ip),
                    None => {
                        return Err(BadRequest::Malformed(
                            "an IP address SAN is malformed".into(),
                        ))
                    }
                },
                other => request.other_names.push(other.to_string()),
            }
        }
    }
    Ok(request)
}

fn ip(octets: &[u8]) -> Option<IpAddr> {
    match octets.len() {
        4 => <[u8; 4]>::try_from(octets).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(octets).ok().map(IpAddr::from),
        _ => None,
    }
}
