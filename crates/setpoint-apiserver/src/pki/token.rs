//! The admin bearer token: 32 bytes of OS randomness, base64url without padding (43
//! characters). Comparing a presented token with it takes the same time wherever they differ,
//! and the token never appears in `Debug` output.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::rngs::OsRng;
use rand::RngCore as _;
use subtle::ConstantTimeEq as _;

/// Bytes of randomness in a generated token.
const TOKEN_BYTES: usize = 32;
/// Shortest token accepted from the token file (a generated one is 43 characters).
pub(crate) const MIN_TOKEN_LEN: usize = 32;

/// A secret bearer token.
#[derive(Clone)]
pub(crate) struct BearerToken {
    /// Printable ASCII without spaces, at least [`MIN_TOKEN_LEN`] characters.
    secret: String,
}

impl BearerToken {
    /// Generates a token from the operating system's random source.
    pub(crate) fn generate() -> Self {
        let mut bytes = [0_u8; TOKEN_BYTES];
        OsRng.fill_bytes(&mut bytes);
        Self {
            secret: URL_SAFE_NO_PAD.encode(bytes),
        }
    }

    /// Parses the contents of a token file (surrounding whitespace is ignored), or `None` when
    /// it is too short or holds characters an HTTP header cannot carry.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let secret = text.trim();
        let printable = secret.bytes().all(|byte| byte.is_ascii_graphic());
        (printable && secret.len() >= MIN_TOKEN_LEN).then(|| Self {
            secret: secret.to_owned(),
        })
    }

    /// The token itself, for a kubeconfig or a client.
    pub(crate) fn expose(&self) -> &str {
        &self.secret
    }

    /// Whether `presented` is this token, in time independent of where they differ.
    pub(crate) fn matches(&self, presented: &[u8]) -> bool {
        self.secret.as_bytes().ct_eq(presented).into()
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_token_should_be_43_base64url_characters_and_differ_each_time() {
        let a = BearerToken::generate();
        let b = BearerToken::generate();
        assert_eq!(a.expose().len(), 43);
        assert!(a
            .expose()
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_ne!(a.expose(), b.expose());
    }

    #[test]
    fn matches_should_accept_only_the_exact_token() {
        let token = BearerToken::generate();
        assert!(token.matches(token.expose().as_bytes()));
        assert!(!token.matches(&token.expose().as_bytes()[1..]));
        assert!(!token.matches(b""));
        let mut other = token.expose().as_bytes().to_vec();
        other[0] ^= 1;
        assert!(!token.matches(&other));
    }

    #[test]
    fn parse_should_trim_and_reject_short_or_unprintable_tokens() {
        let token = BearerToken::generate();
        let parsed = BearerToken::parse(&format!("{}\n", token.expose())).unwrap();
        assert_eq!(parsed.expose(), token.expose());
        assert!(BearerToken::parse("short").is_none());
        assert!(BearerToken::parse(&format!("{} x", token.expose())).is_none());
    }

    #[test]
    fn debug_should_not_reveal_the_token() {
        let token = BearerToken::generate();
        assert!(!format!("{token:?}").contains(token.expose()));
    }
}
