//! Whether a role's password is the one wanted, read from the server itself: PostgreSQL keeps
//! a SCRAM-SHA-256 verifier (`pg_authid.rolpassword`,
//! `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, RFC 5802/7677), and a
//! password matches it when `SHA-256(HMAC(PBKDF2(password, salt, iterations), "Client Key"))`
//! is the StoredKey. So a password changed behind the provider's back is seen as drift.
//!
//! Only for ASCII passwords (the server normalises others with SASLprep, which is not done
//! here); [`matches`] answers `None` when it cannot tell (another format, a non-ASCII
//! password), and the caller falls back to comparing with the published password.

use std::num::NonZeroU32;

use base64::Engine;
use ring::{digest, hmac, pbkdf2};

/// Whether `password` matches the stored `verifier`; `None` when that cannot be told.
pub(crate) fn matches(verifier: &str, password: &str) -> Option<bool> {
    if !password.is_ascii() {
        return None;
    }
    let rest = verifier.strip_prefix("SCRAM-SHA-256$")?;
    let (parameters, keys) = rest.split_once('$')?;
    let (iterations, salt) = parameters.split_once(':')?;
    let (stored_key, _server_key) = keys.split_once(':')?;
    let iterations = NonZeroU32::new(iterations.parse().ok()?)?;
    let engine = base64::engine::general_purpose::STANDARD;
    let salt = engine.decode(salt).ok()?;
    let stored_key = engine.decode(stored_key).ok()?;
    Some(stored_key_of(password, &salt, iterations) == stored_key)
}

/// `SHA-256(HMAC-SHA-256(SaltedPassword, "Client Key"))`.
fn stored_key_of(password: &str, salt: &[u8], iterations: NonZeroU32) -> Vec<u8> {
    let mut salted = [0u8; 32];
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        iterations,
        salt,
        password.as_bytes(),
        &mut salted,
    );
    let client_key = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &salted), b"Client Key");
    digest::digest(&digest::SHA256, client_key.as_ref())
        .as_ref()
        .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verifier(password: &str, salt: &[u8], iterations: u32) -> String {
        let engine = base64::engine::general_purpose::STANDARD;
        let n = NonZeroU32::new(iterations).unwrap();
        format!(
            "SCRAM-SHA-256${iterations}:{}${}:unused",
            engine.encode(salt),
            engine.encode(stored_key_of(password, salt, n))
        )
    }

    #[test]
    fn a_verifier_should_match_its_password_only() {
        let v = verifier("second", b"0123456789abcdef", 4096);
        assert_eq!(matches(&v, "second"), Some(true));
        assert_eq!(matches(&v, "first"), Some(false));
    }

    #[test]
    fn unknown_formats_and_non_ascii_passwords_should_be_undecided() {
        assert_eq!(matches("md5abcdef", "x"), None);
        assert_eq!(matches("SCRAM-SHA-256$garbage", "x"), None);
        let v = verifier("pässword", b"salt", 16);
        assert_eq!(matches(&v, "pässword"), None);
    }
}
