//! The `aesgcm` provider's keys: AES-GCM (ring) with a random 96-bit nonce per write, in
//! kube-apiserver's stored form `k8s:enc:aesgcm:v1:<key name>:` + nonce + ciphertext + tag,
//! with the storage key as additional authenticated data — so a value copied to another key
//! does not decrypt there.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

use super::TransformError;

/// What every aesgcm value starts with, before its key's name.
pub(crate) const PREFIX: &str = "k8s:enc:aesgcm:v1:";

/// One named AES-GCM key.
pub(crate) struct AesGcmKey {
    name: String,
    /// `k8s:enc:aesgcm:v1:<name>:`.
    prefix: Vec<u8>,
    key: LessSafeKey,
}

impl std::fmt::Debug for AesGcmKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AesGcmKey")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl AesGcmKey {
    /// A key of 16 (AES-128) or 32 (AES-256) bytes; `None` for another length.
    pub(crate) fn new(name: &str, secret: &[u8]) -> Option<AesGcmKey> {
        let algorithm = match secret.len() {
            16 => &AES_128_GCM,
            32 => &AES_256_GCM,
            _ => return None,
        };
        let key = UnboundKey::new(algorithm, secret).ok()?;
        Some(AesGcmKey {
            name: name.to_owned(),
            prefix: format!("{PREFIX}{name}:").into_bytes(),
            key: LessSafeKey::new(key),
        })
    }

    /// The key's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether `stored` was written with this key.
    pub(crate) fn wrote(&self, stored: &[u8]) -> bool {
        stored.starts_with(&self.prefix)
    }

    /// `plain` encrypted for the storage key `storage_key`.
    pub(crate) fn seal(
        &self,
        random: &SystemRandom,
        storage_key: &[u8],
        plain: &[u8],
    ) -> Result<Vec<u8>, TransformError> {
        let mut nonce = [0u8; NONCE_LEN];
        random
            .fill(&mut nonce)
            .map_err(|_| TransformError::Random)?;
        let mut out = Vec::with_capacity(self.prefix.len() + NONCE_LEN + plain.len() + 16);
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(&nonce);
        let body = out.len();
        out.extend_from_slice(plain);
        let mut sealed = out.split_off(body);
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(storage_key),
                &mut sealed,
            )
            .map_err(|_| TransformError::Seal {
                key: self.name.clone(),
            })?;
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// The plaintext of `stored` (which this key [wrote](Self::wrote)) at `storage_key`.
    pub(crate) fn open(
        &self,
        storage_key: &[u8],
        stored: &[u8],
    ) -> Result<Vec<u8>, TransformError> {
        let failed = || TransformError::Open {
            provider: "aesgcm",
            key: self.name.clone(),
        };
        let body = stored.get(self.prefix.len()..).ok_or_else(failed)?;
        if body.len() < NONCE_LEN {
            return Err(failed());
        }
        let (nonce, sealed) = body.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| failed())?;
        let mut sealed = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(storage_key), &mut sealed)
            .map_err(|_| failed())?;
        Ok(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_value_should_open_only_with_its_key_at_its_storage_key() {
        let random = SystemRandom::new();
        let key = AesGcmKey::new("k1", &[3u8; 32]).unwrap();
        let sealed = key
            .seal(&random, b"/registry/secrets/a/b", b"hello")
            .unwrap();
        assert!(sealed.starts_with(b"k8s:enc:aesgcm:v1:k1:"));
        assert!(!sealed.windows(5).any(|w| w == b"hello"));
        assert!(key.wrote(&sealed));
        assert_eq!(
            key.open(b"/registry/secrets/a/b", &sealed).unwrap(),
            b"hello"
        );
        // Another storage key (the additional authenticated data) or another secret fails.
        assert!(key.open(b"/registry/secrets/a/c", &sealed).is_err());
        let other = AesGcmKey::new("k1", &[4u8; 16]).unwrap();
        assert!(other.open(b"/registry/secrets/a/b", &sealed).is_err());
        // Truncated or tampered values fail, never panic.
        assert!(key.open(b"/registry/secrets/a/b", &sealed[..25]).is_err());
        let mut tampered = sealed.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(key.open(b"/registry/secrets/a/b", &tampered).is_err());
        // Two seals of one value differ (random nonces).
        assert_ne!(
            sealed,
            key.seal(&random, b"/registry/secrets/a/b", b"hello")
                .unwrap()
        );
        assert!(AesGcmKey::new("k", &[0u8; 24]).is_none());
    }
}
