//! A short-lived cache of verified token signatures, keyed by the SHA-256 of the token (the
//! token itself is never kept), as kube-apiserver's token cache: a JWS's ECDSA verification is
//! the costly part of authenticating a ServiceAccount token, so it is done once per token per
//! [`TTL`]. Only the signature's verdict is cached — time, audience and the objects a token
//! names are checked on every use. Bounded: when full, it is cleared.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

/// How long a verified signature is remembered.
pub(crate) const TTL: Duration = Duration::from_secs(10);
/// At most this many tokens are remembered.
const CAPACITY: usize = 4096;

/// Verified claims by token digest.
#[derive(Debug, Default)]
pub(crate) struct TokenCache {
    entries: Mutex<HashMap<[u8; 32], (Instant, Value)>>,
}

fn digest(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0_u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl TokenCache {
    /// The claims of `token` if its signature was verified less than [`TTL`] ago.
    pub(crate) fn get(&self, token: &str, now: Instant) -> Option<Value> {
        let key = digest(token);
        let mut entries = self.entries.lock();
        match entries.get(&key) {
            Some((at, claims)) if now.duration_since(*at) < TTL => Some(claims.clone()),
            Some(_) => {
                entries.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Remembers that `token`'s signature is good and it carries `claims`.
    pub(crate) fn insert(&self, token: &str, claims: Value, now: Instant) {
        let mut entries = self.entries.lock();
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(digest(token), (now, claims));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_should_expire_after_the_ttl() {
        let cache = TokenCache::default();
        let now = Instant::now();
        cache.insert("t", Value::Bool(true), now);
        assert_eq!(cache.get("t", now + TTL / 2), Some(Value::Bool(true)));
        assert_eq!(cache.get("u", now), None);
        assert_eq!(cache.get("t", now + TTL), None);
        assert_eq!(cache.get("t", now), None, "an expired entry is removed");
    }
}
