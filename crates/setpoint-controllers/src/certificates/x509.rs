//! Writing an X.509 certificate (DER, then PEM) from its parts and signing it with the CA's
//! key. The subject is written as given (the request's own encoded subject, as
//! kube-controller-manager's signer copies it; or one made by [`subject`] with one `O`
//! attribute per group, which rcgen's distinguished names, one value per attribute type,
//! cannot hold). The CA key may be ECDSA P-256 or P-384, Ed25519 or RSA (signed SHA-256).

use std::net::IpAddr;

use rcgen::{KeyPair, PublicKeyData as _, SigningKey as _};
use time::OffsetDateTime;
use x509_parser::extensions::ParsedExtension;
use yasna::models::{GeneralizedTime, ObjectIdentifier, UTCTime};
use yasna::{DERWriter, Tag};

const OID_CN: &[u64] = &[2, 5, 4, 3];
const OID_O: &[u64] = &[2, 5, 4, 10];
const OID_KEY_USAGE: &[u64] = &[2, 5, 29, 15];
const OID_SAN: &[u64] = &[2, 5, 29, 17];
const OID_BASIC_CONSTRAINTS: &[u64] = &[2, 5, 29, 19];
const OID_AKI: &[u64] = &[2, 5, 29, 35];
const OID_EKU: &[u64] = &[2, 5, 29, 37];
const OID_SERVER_AUTH: &[u64] = &[1, 3, 6, 1, 5, 5, 7, 3, 1];
const OID_CLIENT_AUTH: &[u64] = &[1, 3, 6, 1, 5, 5, 7, 3, 2];

/// Why a certificate could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum X509Error {
    /// The CA certificate or key cannot be used.
    #[error("the signing CA cannot be used: {0}")]
    Ca(String),
    /// Signing failed.
    #[error("signing failed: {0}")]
    Sign(String),
}

/// What goes into a certificate besides the issuer.
pub(crate) struct Template<'a> {
    /// The encoded subject `Name`.
    pub(crate) subject: &'a [u8],
    /// The encoded SubjectPublicKeyInfo.
    pub(crate) public_key: &'a [u8],
    /// DNS subject alternative names.
    pub(crate) dns_names: &'a [String],
    /// IP subject alternative names.
    pub(crate) ip_addresses: &'a [IpAddr],
    /// Key usages and extended key usages by their Kubernetes names (`client auth`, …).
    pub(crate) usages: &'a [String],
    /// Validity.
    pub(crate) not_before: OffsetDateTime,
    /// Validity (capped by the CA's own).
    pub(crate) not_after: OffsetDateTime,
}

/// An encoded `Name` of one `O` per organization, then the `CN`.
pub(crate) fn subject(common_name: &str, organizations: &[String]) -> Vec<u8> {
    yasna::construct_der(|w| {
        w.write_sequence(|w| {
            let mut attribute = |oid: &[u64], value: &str| {
                w.next().write_set(|w| {
                    w.next().write_sequence(|w| {
                        w.next().write_oid(&ObjectIdentifier::from_slice(oid));
                        w.next().write_utf8_string(value);
                    });
                });
            };
            for organization in organizations {
                attribute(OID_O, organization);
            }
            attribute(OID_CN, common_name);
        });
    })
}

/// The CA's encoded subject, key identifier (if it has one) and expiry.
struct CaFacts {
    subject: Vec<u8>,
    key_id: Option<Vec<u8>>,
    not_after: OffsetDateTime,
}

fn ca_facts(cert_pem: &str, now: OffsetDateTime) -> Result<CaFacts, X509Error> {
    let (_, block) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
        .map_err(|e| X509Error::Ca(format!("certificate: {e}")))?;
    let cert = block
        .parse_x509()
        .map_err(|e| X509Error::Ca(format!("certificate: {e}")))?;
    if !cert.is_ca() {
        return Err(X509Error::Ca("the certificate is not a CA".into()));
    }
    let not_after = cert.validity().not_after.to_datetime();
    if not_after <= now {
        return Err(X509Error::Ca("the CA certificate has expired".into()));
    }
    let key_id = cert
        .extensions()
        .iter()
        .find_map(|e| match e.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(id) => Some(id.0.to_vec()),
            _ => None,
        });
    Ok(CaFacts {
        subject: cert.subject().as_raw().to_vec(),
        key_id,
        not_after,
    })
}

/// The signature AlgorithmIdentifier for the CA key's algorithm.
fn signature_algorithm(key: &KeyPair) -> Result<(&'static [u64], bool), X509Error> {
    let alg = key.algorithm();
    if alg == &rcgen::PKCS_ECDSA_P256_SHA256 {
        Ok((&[1, 2, 840, 10045, 4, 3, 2], false))
    } else if alg == &rcgen::PKCS_ECDSA_P384_SHA384 {
        Ok((&[1, 2, 840, 10045, 4, 3, 3], false))
    } else if alg == &rcgen::PKCS_ED25519 {
        Ok((&[1, 3, 101, 112], false))
    } else if alg == &rcgen::PKCS_RSA_SHA256 {
        Ok((&[1, 2, 840, 113549, 1, 1, 11], true))
    } else {
        Err(X509Error::Ca(format!("unsupported key algorithm {alg:?}")))
    }
}

fn write_algorithm(w: DERWriter<'_>, oid: &[u64], null: bool) {
    w.write_sequence(|w| {
        w.next().write_oid(&ObjectIdentifier::from_slice(oid));
        if null {
            w.next().write_null();
        }
    });
}

fn write_time(w: DERWriter<'_>, at: OffsetDateTime) {
    let at = at.replace_nanosecond(0).unwrap_or(at);
    match UTCTime::from_datetime_opt(at) {
        Some(utc) if at.year() < 2050 => w.write_utctime(&utc),
        _ => w.write_generalized_time(&GeneralizedTime::from_datetime(at)),
    }
}

fn write_extension(w: DERWriter<'_>, oid: &[u64], critical: bool, value: &[u8]) {
    w.write_sequence(|w| {
        w.next().write_oid(&ObjectIdentifier::from_slice(oid));
        if critical {
            w.next().write_bool(true);
        }
        w.next().write_bytes(value);
    });
}

/// Signs `template` with the CA (`cert_pem`, `key_pem`), with serial number `serial`;
/// returns the certificate in PEM.
pub(crate) fn issue(
    cert_pem: &str,
    key_pem: &str,
    template: &Template<'_>,
    serial: &[u8],
    now: OffsetDateTime,
) -> Result<String, X509Error> {
    let ca = ca_facts(cert_pem, now)?;
    let key = KeyPair::from_pem(key_pem).map_err(|e| X509Error::Ca(format!("key: {e}")))?;
    if let Ok((_, cert_block)) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()) {
        let matches = cert_block
            .parse_x509()
            .is_ok_and(|c| c.public_key().raw == key.subject_public_key_info().as_slice());
        if !matches {
            return Err(X509Error::Ca(
                "the key does not belong to the certificate".into(),
            ));
        }
    }
    let (alg_oid, alg_null) = signature_algorithm(&key)?;
    let not_after = template.not_after.min(ca.not_after);
    let key_usage = {
        let digital = template.usages.iter().any(|u| u == "digital signature");
        let encipher = template.usages.iter().any(|u| u == "key encipherment");
        let byte = (if digital { 0x80 } else { 0 }) | (if encipher { 0x20 } else { 0 });
        let bits = if encipher { 3 } else { usize::from(digital) };
        (bits > 0).then(|| yasna::construct_der(|w| w.write_bitvec_bytes(&[byte], bits)))
    };
    let ekus: Vec<&[u64]> = template
        .usages
        .iter()
        .filter_map(|u| match u.as_str() {
            "server auth" => Some(OID_SERVER_AUTH),
            "client auth" => Some(OID_CLIENT_AUTH),
            _ => None,
        })
        .collect();
    let tbs = yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_tagged(Tag::context(0), |w| w.write_u8(2));
            w.next().write_bigint_bytes(serial, true);
            write_algorithm(w.next(), alg_oid, alg_null);
            w.next().write_der(&ca.subject);
            w.next().write_sequence(|w| {
                write_time(w.next(), template.not_before);
                write_time(w.next(), not_after);
            });
            w.next().write_der(template.subject);
            w.next().write_der(template.public_key);
            w.next().write_tagged(Tag::context(3), |w| {
                w.write_sequence(|w| {
                    if let Some(value) = &key_usage {
                        write_extension(w.next(), OID_KEY_USAGE, true, value);
                    }
                    if !ekus.is_empty() {
                        let value = yasna::construct_der(|w| {
                            w.write_sequence(|w| {
                                for oid in &ekus {
                                    w.next().write_oid(&ObjectIdentifier::from_slice(oid));
                                }
                            });
                        });
                        write_extension(w.next(), OID_EKU, false, &value);
                    }
                    let constraints = yasna::construct_der(|w| w.write_sequence(|_| {}));
                    write_extension(w.next(), OID_BASIC_CONSTRAINTS, true, &constraints);
                    if let Some(id) = &ca.key_id {
                        let value = yasna::construct_der(|w| {
                            w.write_sequence(|w| {
                                w.next()
                                    .write_tagged_implicit(Tag::context(0), |w| w.write_bytes(id));
                            });
                        });
                        write_extension(w.next(), OID_AKI, false, &value);
                    }
                    if !template.dns_names.is_empty() || !template.ip_addresses.is_empty() {
                        let value = yasna::construct_der(|w| {
                            w.write_sequence(|w| {
                                for dns in template.dns_names {
                                    w.next().write_tagged_implicit(Tag::context(2), |w| {
                                        w.write_bytes(dns.as_bytes());
                                    });
                                }
                                for ip in template.ip_addresses {
                                    let octets = match ip {
                                        IpAddr::V4(v4) => v4.octets().to_vec(),
                                        IpAddr::V6(v6) => v6.octets().to_vec(),
                                    };
                                    w.next().write_tagged_implicit(Tag::context(7), |w| {
                                        w.write_bytes(&octets);
                                    });
                                }
                            });
                        });
                        write_extension(w.next(), OID_SAN, false, &value);
                    }
                });
            });
        });
    });
    let signature = key.sign(&tbs).map_err(|e| X509Error::Sign(e.to_string()))?;
    let der = yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_der(&tbs);
            write_algorithm(w.next(), alg_oid, alg_null);
            w.next().write_bitvec_bytes(&signature, signature.len() * 8);
        });
    });
    Ok(pem(&der))
}

/// PEM `CERTIFICATE` text of `der`, lines of 64.
fn pem(der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in text.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}
