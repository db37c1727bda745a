//! The built-in signers (kube-controller-manager's `csrsigning`): which requests each accepts
//! and the certificate it issues.
//!
//! | signer | accepts |
//! |---|---|
//! | `kubernetes.io/kube-apiserver-client` | any subject; usages among `digital signature`, `key encipherment`, `client auth`, with `client auth` |
//! | `kubernetes.io/kube-apiserver-client-kubelet` | `CN=system:node:…`, `O=system:nodes` only, no SANs; usages exactly `digital signature`, `client auth` (+ `key encipherment`) |
//! | `kubernetes.io/kubelet-serving` | `CN=system:node:…`, `O=system:nodes` only, at least one DNS or IP SAN, no e-mail/URI; usages exactly `digital signature`, `server auth` (+ `key encipherment`) |
//!
//! The certificate keeps the request's subject and DNS/IP names and public key, carries the
//! spec's usages, is backdated five minutes for skewed clocks, and lasts the signing duration
//! (`--cluster-signing-duration`, one year) or `spec.expirationSeconds` if shorter, never past
//! the CA's own expiry.

use std::fmt;
use std::time::Duration;

use rcgen::KeyPair;
use time::OffsetDateTime;

use super::request::Request;
use super::x509::{self, Template};

/// The signer of client certificates for the API server.
pub(crate) const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
/// The signer of node agents' client certificates.
pub(crate) const KUBELET_CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The signer of node agents' serving certificates.
pub(crate) const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";
/// How far a certificate's `notBefore` lies in the past.
const BACKDATE: time::Duration = time::Duration::minutes(5);

/// The CA the signers sign with (`--cluster-signing-cert-file`, `--cluster-signing-key-file`;
/// `DATA_DIR/pki/ca.crt` and `ca.key` in `setpoint server`), PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningCa {
    /// The CA certificate.
    pub cert_pem: String,
    /// The CA's private key (PKCS #8). A secret.
    pub key_pem: String,
}

impl fmt::Debug for SigningCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningCa").finish_non_exhaustive()
    }
}

/// Why a signer refuses a request (the message of its `Failed` condition), or cannot sign.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    /// The request does not meet the signer's rules.
    #[error("{0}")]
    Invalid(String),
    /// The CA or the request's key cannot be used.
    #[error("cannot sign: {0}")]
    Signing(String),
}

/// Whether `signer` is one of the built-in signers.
pub(crate) fn is_builtin(signer: &str) -> bool {
    matches!(
        signer,
        KUBE_APISERVER_CLIENT | KUBELET_CLIENT | KUBELET_SERVING
    )
}

/// Checks `request` with `usages` against the rules of `signer` (a built-in one).
pub(crate) fn check(signer: &str, request: &Request, usages: &[String]) -> Result<(), Refusal> {
    let invalid = |m: &str| Err(Refusal::Invalid(m.to_owned()));
    let has = |u: &str| usages.iter().any(|x| x == u);
    match signer {
        KUBE_APISERVER_CLIENT => {
            if let Some(u) = usages.iter().find(|u| {
                !matches!(
                    u.as_str(),
                    "digital signature" | "key encipherment" | "client auth"
                )
            }) {
                return Err(Refusal::Invalid(format!(
                    "invalid usage for client certificate: {u}"
                )));
            }
            if !has("client auth") {
                return invalid("missing required usage for client certificate: client auth");
            }
            Ok(())
        }
        KUBELET_CLIENT | KUBELET_SERVING => {
            if request.organizations != ["system:nodes"] {
                return invalid("subject organization is not system:nodes");
            }
            if !request.common_name().starts_with("system:node:") {
                return invalid("subject common name does not begin with system:node:");
            }
            let serving = signer == KUBELET_SERVING;
            if !request.other_names.is_empty() {
                return invalid("Email and URI subjectAltNames are not allowed");
            }
            if serving && request.dns_names.is_empty() && request.ip_addresses.is_empty() {
                return invalid("DNS or IP subjectAltName is required");
            }
            if !serving && (!request.dns_names.is_empty() || !request.ip_addresses.is_empty()) {
                return invalid("DNS or IP subjectAltNames are not allowed");
            }
            let purpose = if serving {
                "server auth"
            } else {
                "client auth"
            };
            let mut sorted: Vec<&str> = usages.iter().map(String::as_str).collect();
            sorted.sort_unstable();
            sorted.dedup();
            let mut plain = vec!["digital signature", purpose];
            plain.sort_unstable();
            let mut with_key = vec!["digital signature", "key encipherment", purpose];
            with_key.sort_unstable();
            if sorted != plain && sorted != with_key {
                return Err(Refusal::Invalid(format!(
                    "usages did not match [{}] or [{}]",
                    plain.join(" "),
                    with_key.join(" ")
                )));
            }
            Ok(())
        }
        other => Err(Refusal::Invalid(format!(
            "unrecognized signerName: {other:?}"
        ))),
    }
}

/// Issues the certificate (PEM) for `request` with `usages`, lasting `duration` (already the
/// smaller of the signing duration and the requested one) from `now`.
pub(crate) fn sign(
    ca: &SigningCa,
    request: &Request,
    usages: &[String],
    duration: Duration,
    now: OffsetDateTime,
) -> Result<String, Refusal> {
    let lifetime = time::Duration::try_from(duration).unwrap_or(time::Duration::days(365));
    let template = Template {
        subject: &request.subject,
        public_key: &request.public_key,
        dns_names: &request.dns_names,
        ip_addresses: &request.ip_addresses,
        usages,
        not_before: now - BACKDATE,
        not_after: now + lifetime,
    };
    x509::issue(&ca.cert_pem, &ca.key_pem, &template, &random_serial()?, now)
        .map_err(|e| Refusal::Signing(e.to_string()))
}

/// Why a client certificate could not be issued.
#[derive(Debug, thiserror::Error)]
#[error("cannot issue the client certificate: {0}")]
pub struct IssueError(String);

/// A client certificate for `common_name` in `groups` (one `O` each), with a new ECDSA P-256
/// key, valid for `validity` from now (never past the CA's expiry), signed by `ca`: what
/// `setpoint kubeconfig` hands a user or a node. Returns the certificate and the key, PEM.
pub fn issue_client_certificate(
    ca: &SigningCa,
    common_name: &str,
    groups: &[String],
    validity: time::Duration,
) -> Result<(String, String), IssueError> {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| IssueError(e.to_string()))?;
    let now = OffsetDateTime::now_utc();
    let subject = x509::subject(common_name, groups);
    let public_key = rcgen::PublicKeyData::subject_public_key_info(&key);
    let usages = ["digital signature".to_owned(), "client auth".to_owned()];
    let template = Template {
        subject: &subject,
        public_key: &public_key,
        dns_names: &[],
        ip_addresses: &[],
        usages: &usages,
        not_before: now - BACKDATE,
        not_after: now + validity,
    };
    let serial = random_serial().map_err(|e| IssueError(e.to_string()))?;
    let cert = x509::issue(&ca.cert_pem, &ca.key_pem, &template, &serial, now)
        .map_err(|e| IssueError(e.to_string()))?;
    Ok((cert, key.serialize_pem()))
}

/// 16 random bytes, the top bit cleared so the DER integer stays positive and 16 bytes long.
fn random_serial() -> Result<[u8; 16], Refusal> {
    let mut bytes = [0_u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| Refusal::Signing("no random numbers for a serial number".to_owned()))?;
    bytes[0] = (bytes[0] & 0x7f) | 0x01;
    Ok(bytes)
}
