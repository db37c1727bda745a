//! Private keys: what the spec asks for, generating one, reading one back from a Secret, and
//! writing it in the encoding asked for.
//!
//! ECDSA (P-256, P-384) and Ed25519 keys come from ring through rcgen. ring cannot generate RSA
//! keys, so RSA keys (2048 to 8192 bits) come from the `rsa` crate (constant-time arithmetic),
//! fed by ring's system random; rcgen then signs with them through ring. As in cert-manager, an
//! RSA key signs with SHA-256, SHA-384 from 3072 bits, SHA-512 from 4096 bits; RSA keys are
//! written PKCS#1 unless `encoding: PKCS8` (other keys are always PKCS#8).

use rcgen::{KeyPair, PublicKeyData as _, SignatureAlgorithm};
use ring::rand::SecureRandom as _;
use rsa::pkcs1::{DecodeRsaPrivateKey as _, EncodeRsaPrivateKey as _, LineEnding};
use rsa::pkcs8::{DecodePrivateKey as _, EncodePrivateKey as _};
use rsa::traits::PublicKeyParts as _;
use rustls_pki_types::PrivatePkcs8KeyDer;
use x509_parser::prelude::FromDer as _;
use x509_parser::public_key::PublicKey;
use x509_parser::x509::SubjectPublicKeyInfo;

use super::certificate::{CertificateSpec, KeyAlgorithm, KeyEncoding};
use super::pki::PkiError;

/// The RSA sizes Setpoint generates (cert-manager accepts 2048 to 8192 bits).
const RSA_SIZES: std::ops::RangeInclusive<usize> = 2048..=8192;

/// The key a spec asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// What the key signs with (also says the curve for ECDSA).
    pub sign: &'static SignatureAlgorithm,
    /// The modulus size, for RSA.
    pub rsa_bits: Option<usize>,
    /// `tls.key` as PKCS#1 (RSA only).
    pub pkcs1: bool,
}

/// What `spec.privateKey` asks for (default ECDSA P-256; RSA 2048 when only the algorithm is
/// given), or why it cannot be had.
pub(crate) fn wanted(spec: &CertificateSpec) -> Result<Wanted, PkiError> {
    let key = spec.private_key.clone().unwrap_or_default();
    let size = key.size.filter(|&s| s != 0);
    let plain = |sign| Wanted {
        sign,
        rsa_bits: None,
        pkcs1: false,
    };
    match (key.algorithm.unwrap_or(KeyAlgorithm::Ecdsa), size) {
        (KeyAlgorithm::Ecdsa, None | Some(256)) => Ok(plain(&rcgen::PKCS_ECDSA_P256_SHA256)),
        (KeyAlgorithm::Ecdsa, Some(384)) => Ok(plain(&rcgen::PKCS_ECDSA_P384_SHA384)),
        (KeyAlgorithm::Ecdsa, Some(size)) => Err(PkiError::Spec(format!(
            "ECDSA keys of size {size} are not supported (256 or 384)"
        ))),
        (KeyAlgorithm::Ed25519, _) => Ok(plain(&rcgen::PKCS_ED25519)),
        (KeyAlgorithm::Rsa, size) => {
            let bits = usize::try_from(size.unwrap_or(2048)).unwrap_or(0);
            if !RSA_SIZES.contains(&bits) {
                return Err(PkiError::Spec(format!(
                    "RSA keys of size {} are not supported (2048 to 8192 bits)",
                    size.unwrap_or_default()
                )));
            }
            Ok(Wanted {
                sign: rsa_signature(bits),
                rsa_bits: Some(bits),
                pkcs1: key.encoding != Some(KeyEncoding::Pkcs8),
            })
        }
    }
}

/// The signature an RSA key of `bits` makes (cert-manager's choice).
fn rsa_signature(bits: usize) -> &'static SignatureAlgorithm {
    if bits >= 4096 {
        &rcgen::PKCS_RSA_SHA512
    } else if bits >= 3072 {
        &rcgen::PKCS_RSA_SHA384
    } else {
        &rcgen::PKCS_RSA_SHA256
    }
}

/// A new key as `wanted` says. RSA generation takes a while (tens of milliseconds to seconds,
/// growing with the size): call it off the async runtime.
pub(crate) fn generate(wanted: &Wanted) -> Result<KeyPair, PkiError> {
    let Some(bits) = wanted.rsa_bits else {
        return Ok(KeyPair::generate_for(wanted.sign)?);
    };
    let key = rsa::PrivateKey::new(&mut SystemRng, bits)
        .map_err(|e| PkiError::Spec(format!("generating an RSA key: {e}")))?;
    let der = key
        .to_pkcs8_der()
        .map_err(|e| PkiError::Spec(format!("encoding an RSA key: {e}")))?;
    Ok(KeyPair::from_pkcs8_der_and_sign_algo(
        &PrivatePkcs8KeyDer::from(der.as_bytes()),
        wanted.sign,
    )?)
}

/// Reads a private key from PEM: PKCS#8 of any algorithm, or PKCS#1 (`RSA PRIVATE KEY`). An
/// RSA key signs as [`wanted`] would for its size.
pub(crate) fn parse(pem: &str) -> Result<KeyPair, String> {
    let (pkcs8, bits) = if pem.contains("-----BEGIN RSA PRIVATE KEY-----") {
        let key =
            rsa::PrivateKey::from_pkcs1_pem(pem).map_err(|e| format!("a bad PKCS#1 key: {e}"))?;
        let der = key
            .to_pkcs8_der()
            .map_err(|e| format!("re-encoding a PKCS#1 key: {e}"))?;
        (der.as_bytes().to_vec(), key.size() * 8)
    } else {
        let key = KeyPair::from_pem(pem)
            .map_err(|_| "not a PKCS#8 ECDSA, Ed25519 or RSA key".to_owned())?;
        match rsa_bits(&key) {
            None => return Ok(key),
            // ring took it as SHA-256; load it again to sign as its size says.
            Some(bits) => (key.serialized_der().to_vec(), bits),
        }
    };
    KeyPair::from_pkcs8_der_and_sign_algo(&PrivatePkcs8KeyDer::from(pkcs8), rsa_signature(bits))
        .map_err(|e| format!("an RSA key ring cannot use: {e}"))
}

/// Whether `key` is what `wanted` asks for: the algorithm (curve, signature) and, for RSA,
/// the size.
pub(crate) fn fits(key: &KeyPair, wanted: &Wanted) -> bool {
    key.algorithm() == wanted.sign && rsa_bits(key) == wanted.rsa_bits
}

/// The modulus size of an RSA key; `None` for other keys.
fn rsa_bits(key: &KeyPair) -> Option<usize> {
    let spki = key.subject_public_key_info();
    let (_, info) = SubjectPublicKeyInfo::from_der(&spki).ok()?;
    match info.parsed().ok()? {
        PublicKey::RSA(rsa) => Some(rsa.key_size()),
        _ => None,
    }
}

/// `tls.key` for `key`: PKCS#1 PEM for an RSA key when `wanted` says so, else PKCS#8 PEM.
pub(crate) fn encode(key: &KeyPair, wanted: &Wanted) -> Result<String, PkiError> {
    if !(wanted.pkcs1 && rsa_bits(key).is_some()) {
        return Ok(key.serialize_pem());
    }
    let rsa = rsa::PrivateKey::from_pkcs8_der(key.serialized_der())
        .map_err(|e| PkiError::Spec(format!("reading back an RSA key: {e}")))?;
    let pem = rsa
        .to_pkcs1_pem(LineEnding::LF)
        .map_err(|e| PkiError::Spec(format!("encoding an RSA key as PKCS#1: {e}")))?;
    Ok(pem.to_string())
}

/// The `rsa` crate's randomness: ring's system random (the one the rest of Setpoint's crypto
/// uses).
struct SystemRng;

/// The system's random source failed.
#[derive(Debug, thiserror::Error)]
#[error("the system random source failed")]
struct RandomFailed;

impl rsa::rand_core::TryRng for SystemRng {
    type Error = RandomFailed;

    fn try_next_u32(&mut self) -> Result<u32, RandomFailed> {
        let mut bytes = [0u8; 4];
        self.try_fill_bytes(&mut bytes)?;
        Ok(u32::from_le_bytes(bytes))
    }

    fn try_next_u64(&mut self) -> Result<u64, RandomFailed> {
        let mut bytes = [0u8; 8];
        self.try_fill_bytes(&mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), RandomFailed> {
        ring::rand::SystemRandom::new()
            .fill(dst)
            .map_err(|_| RandomFailed)
    }
}

impl rsa::rand_core::TryCryptoRng for SystemRng {}
