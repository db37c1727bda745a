//! The ServiceAccount token signing key: an ECDSA P-256 key in `DATA_DIR/pki/sa.key` (PKCS #8,
//! PEM, mode `0600`) with its public key in `sa.pub` (SubjectPublicKeyInfo, PEM, `0644`),
//! created at first start and reused on every later one, so tokens issued before a restart
//! keep verifying. `auth/` signs and verifies with it.

use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING};

use super::{files, read, tighten, write, PkiError, Result};

/// The DER prefix of a P-256 SubjectPublicKeyInfo, before the 65-byte uncompressed point:
/// SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING }.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The SubjectPublicKeyInfo DER of a P-256 public key given as its uncompressed point.
pub(crate) fn p256_spki(point: &[u8]) -> Vec<u8> {
    let mut der = P256_SPKI_PREFIX.to_vec();
    der.extend_from_slice(point);
    der
}

/// PEM-encodes `der` under `label`, 64 characters a line.
pub(crate) fn pem(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The DER inside the first PEM block labelled `label` of `text`.
pub(crate) fn pem_der(text: &str, label: &str) -> Option<Vec<u8>> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    let body: String = text[start..stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    STANDARD.decode(body).ok()
}

/// Loads the signing key (PKCS #8 DER) from `dir/sa.key`, or creates it (and `sa.pub`).
pub(super) fn load_or_create(dir: &Path) -> Result<Vec<u8>> {
    let key_path = dir.join("sa.key");
    let pub_path = dir.join("sa.pub");
    let rng = SystemRandom::new();
    let invalid = || PkiError::InvalidKey {
        path: key_path.clone(),
    };
    let pkcs8 = match read(&key_path)? {
        Some(text) => {
            tighten(&key_path)?;
            pem_der(&text, "PRIVATE KEY").ok_or_else(invalid)?
        }
        None => {
            let document = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                .map_err(|_| invalid())?;
            let der = document.as_ref().to_vec();
            write(
                &key_path,
                &pem("PRIVATE KEY", &der),
                files::PRIVATE_FILE_MODE,
            )?;
            der
        }
    };
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng)
        .map_err(|_| invalid())?;
    let public = pem("PUBLIC KEY", &p256_spki(pair.public_key().as_ref()));
    if read(&pub_path)?.as_deref() != Some(public.as_str()) {
        write(&pub_path, &public, 0o644)?;
    }
    Ok(pkcs8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_should_be_created_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path()).unwrap();
        let second = load_or_create(dir.path()).unwrap();
        assert_eq!(first, second);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("sa.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let public = std::fs::read_to_string(dir.path().join("sa.pub")).unwrap();
        assert_eq!(pem_der(&public, "PUBLIC KEY").unwrap().len(), 91);
    }

    #[test]
    fn a_damaged_key_file_should_be_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("sa.key"), "nonsense").unwrap();
        assert!(matches!(
            load_or_create(dir.path()),
            Err(PkiError::InvalidKey { .. })
        ));
    }
}
