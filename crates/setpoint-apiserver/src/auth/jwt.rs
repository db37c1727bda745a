//! Compact JSON Web Signatures with ES256 (ECDSA P-256, SHA-256; RFC 7515/7518), the only
//! algorithm ServiceAccount tokens are signed with here. A [`SigningKey`] signs claims and
//! verifies tokens; its key id is kube-apiserver's: the base64url SHA-256 of the public key's
//! DER SubjectPublicKeyInfo. [`SigningKey::jwk`] is the public key as a JSON Web Key (JWKS).
//! Parsing never panics: any malformed token is an [`JwtError`].

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair as _, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED,
    ECDSA_P256_SHA256_FIXED_SIGNING,
};
use serde_json::{json, Value};

use crate::pki::sa_key::p256_spki;

/// Why a token was not accepted as a JWS of ours.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum JwtError {
    /// Not three base64url parts with JSON header and payload.
    #[error("malformed token")]
    Malformed,
    /// The header names another algorithm or key.
    #[error("token signed with an unknown algorithm or key")]
    UnknownKey,
    /// The signature does not verify.
    #[error("invalid signature")]
    BadSignature,
    /// Signing failed (the system's random source).
    #[error("cannot sign the token")]
    Sign,
}

/// An ES256 key pair signing and verifying tokens.
pub(crate) struct SigningKey {
    pair: EcdsaKeyPair,
    /// The uncompressed public point (65 bytes).
    point: Vec<u8>,
    kid: String,
    rng: SystemRandom,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// The key of a PKCS #8 DER document (`DATA_DIR/pki/sa.key`).
    pub(crate) fn from_pkcs8(pkcs8: &[u8]) -> Option<Self> {
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &rng).ok()?;
        let point = pair.public_key().as_ref().to_vec();
        let digest = ring::digest::digest(&ring::digest::SHA256, &p256_spki(&point));
        let kid = URL_SAFE_NO_PAD.encode(digest.as_ref());
        Some(Self {
            pair,
            point,
            kid,
            rng,
        })
    }

    /// A fresh key that lives in memory only (an API never served over HTTPS: tests, in-process
    /// environments).
    pub(crate) fn ephemeral() -> Option<Self> {
        let rng = SystemRandom::new();
        let document = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).ok()?;
        Self::from_pkcs8(document.as_ref())
    }

    /// The public key as a JSON Web Key, as kube-apiserver publishes it.
    pub(crate) fn jwk(&self) -> Value {
        let (x, y) = self.point[1..].split_at(32);
        json!({
            "use": "sig",
            "kty": "EC",
            "kid": self.kid,
            "crv": "P-256",
            "alg": "ES256",
            "x": URL_SAFE_NO_PAD.encode(x),
            "y": URL_SAFE_NO_PAD.encode(y),
        })
    }

    /// `claims` signed: `header.payload.signature`.
    pub(crate) fn sign(&self, claims: &Value) -> Result<String, JwtError> {
        let header = json!({"alg": "ES256", "kid": self.kid});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(|_| JwtError::Sign)?;
        Ok(format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }

    /// The claims of `token` if it is an ES256 JWS this key signed.
    pub(crate) fn verify(&self, token: &str) -> Result<Value, JwtError> {
        let (header, claims, input, signature) = split(token)?;
        if header["alg"] != "ES256" {
            return Err(JwtError::UnknownKey);
        }
        if let Some(kid) = header.get("kid") {
            if kid.as_str() != Some(self.kid.as_str()) {
                return Err(JwtError::UnknownKey);
            }
        }
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &self.point)
            .verify(input.as_bytes(), &signature)
            .map_err(|_| JwtError::BadSignature)?;
        Ok(claims)
    }
}

/// Whether `token` looks like a JWS (three dot-separated parts whose payload is JSON with an
/// `iss`), without verifying it: how the chain tells a ServiceAccount token from others.
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    split(token).is_ok_and(|(_, claims, _, _)| claims.get("iss").is_some())
}

/// The header, claims, signing input and signature of a compact JWS.
fn split(token: &str) -> Result<(Value, Value, &str, Vec<u8>), JwtError> {
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Malformed);
    };
    let decode = |part: &str| -> Result<Value, JwtError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|_| JwtError::Malformed)?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|_| JwtError::Malformed)?;
        value
            .is_object()
            .then_some(value)
            .ok_or(JwtError::Malformed)
    };
    let header_value = decode(header)?;
    let claims = decode(payload)?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| JwtError::Malformed)?;
    let input = &token[..header.len() + 1 + payload.len()];
    Ok((header_value, claims, input, signature))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_token_should_verify_and_a_tampered_one_should_not() {
        let key = SigningKey::ephemeral().unwrap();
        let token = key.sign(&json!({"iss": "me", "sub": "you"})).unwrap();
        assert_eq!(key.verify(&token).unwrap()["sub"], "you");
        assert!(looks_like_jwt(&token));
        // Another payload with the same signature.
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(json!({"iss": "me", "sub": "admin"}).to_string());
        parts[1] = &forged;
        assert_eq!(key.verify(&parts.join(".")), Err(JwtError::BadSignature));
        // Signed by another key.
        let other = SigningKey::ephemeral().unwrap();
        let theirs = other.sign(&json!({"iss": "me"})).unwrap();
        assert_eq!(key.verify(&theirs), Err(JwtError::UnknownKey));
    }

    #[test]
    fn malformed_tokens_should_be_errors_not_panics() {
        let key = SigningKey::ephemeral().unwrap();
        for token in [
            "",
            "a",
            "a.b",
            "a.b.c",
            "a.b.c.d",
            "e30.e30.",
            "..",
            "ä.ö.ü",
            "e30.W10.AA",
        ] {
            assert!(key.verify(token).is_err(), "{token}");
            assert!(!looks_like_jwt(token), "{token}");
        }
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(r#"{"iss":"x"}"#)
        );
        assert_eq!(key.verify(&none), Err(JwtError::UnknownKey));
    }

    #[test]
    fn the_jwk_should_carry_the_point_and_kube_style_kid() {
        let key = SigningKey::ephemeral().unwrap();
        let jwk = key.jwk();
        assert_eq!(jwk["kid"].as_str().unwrap().len(), 43);
        let token = key.sign(&json!({"iss": "me"})).unwrap();
        let header = URL_SAFE_NO_PAD
            .decode(token.split('.').next().unwrap())
            .unwrap();
        let header: Value = serde_json::from_slice(&header).unwrap();
        assert_eq!(header["kid"], jwk["kid"]);
        let x = URL_SAFE_NO_PAD.decode(jwk["x"].as_str().unwrap()).unwrap();
        assert_eq!(x.len(), 32);
    }
}
