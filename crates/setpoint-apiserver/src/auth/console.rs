//! The web console's credentials (docs/console.md): one-time login tokens and the sessions they
//! are exchanged for.
//!
//! A login token is minted for a user (by a caller allowed to impersonate that user: the
//! console's `POST /ui/api/login-tokens`), is good once, for [`LOGIN_TOKEN_TTL`]. Redeeming
//! it (`GET /ui/login?token=`) opens a session: a random 256-bit id sent back as the cookie
//! [`COOKIE`] (`Secure; HttpOnly; SameSite=Strict`), valid for [`SESSION_TTL`]. A request
//! that carries no other credentials (no client certificate, no `Authorization` header) and
//! a live session's cookie is that session's user. Everything lives in memory: a restarted
//! server forgets every session.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use http::header::{AUTHORIZATION, COOKIE as COOKIE_HEADER};
use http::HeaderMap;
use rand::rngs::OsRng;
use rand::RngCore as _;

use super::User;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "setpoint-session";
/// How long a login token may wait to be redeemed.
pub(crate) const LOGIN_TOKEN_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a session lasts from its login.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(8 * 60 * 60);
/// At most this many login tokens and sessions each are kept; the oldest go first.
const MAX_ENTRIES: usize = 10_000;

/// The console's login tokens and sessions.
#[derive(Default)]
pub(crate) struct ConsoleSessions {
    tokens: parking_lot::Mutex<HashMap<String, Entry>>,
    sessions: parking_lot::Mutex<HashMap<String, Entry>>,
}

/// Whom a token or session stands for, and until when.
#[derive(Clone)]
struct Entry {
    user: User,
    expires: Instant,
}

/// 32 random bytes from the operating system, base64url without padding.
fn random_id() -> String {
    let mut bytes = [0_u8; 32];
    OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Drops the expired entries of `map` and, if it is still full, the one closest to expiring.
fn prune(map: &mut HashMap<String, Entry>, now: Instant) {
    map.retain(|_, entry| entry.expires > now);
    while map.len() >= MAX_ENTRIES {
        let Some(oldest) = map
            .iter()
            .min_by_key(|(_, entry)| entry.expires)
            .map(|(id, _)| id.clone())
        else {
            break;
        };
        map.remove(&oldest);
    }
}

impl ConsoleSessions {
    /// A new one-time login token for `user`.
    pub(crate) fn mint_login_token(&self, user: User) -> String {
        let token = random_id();
        let now = Instant::now();
        let mut tokens = self.tokens.lock();
        prune(&mut tokens, now);
        tokens.insert(
            token.clone(),
            Entry {
                user,
                expires: now + LOGIN_TOKEN_TTL,
            },
        );
        token
    }

    /// Spends `token` (unknown, used or expired: `None`) and opens a session for its user:
    /// the session id and the user.
    pub(crate) fn redeem(&self, token: &str) -> Option<(String, User)> {
        let now = Instant::now();
        let entry = self.tokens.lock().remove(token)?;
        if entry.expires <= now {
            return None;
        }
        let id = random_id();
        let mut sessions = self.sessions.lock();
        prune(&mut sessions, now);
        sessions.insert(
            id.clone(),
            Entry {
                user: entry.user.clone(),
                expires: now + SESSION_TTL,
            },
        );
        Some((id, entry.user))
    }

    /// The user of the live session `id`.
    pub(crate) fn user(&self, id: &str) -> Option<User> {
        let sessions = self.sessions.lock();
        let entry = sessions.get(id)?;
        (entry.expires > Instant::now()).then(|| entry.user.clone())
    }

    /// Ends the session `id` (logout).
    pub(crate) fn end(&self, id: &str) {
        self.sessions.lock().remove(id);
    }

    /// The user of a request whose only credentials are a live session's cookie.
    pub(crate) fn authenticate(&self, headers: &HeaderMap) -> Option<User> {
        if headers.contains_key(AUTHORIZATION) {
            return None;
        }
        self.user(session_cookie(headers)?)
    }
}

/// The value of the session cookie among `headers`' `Cookie` headers.
pub(crate) fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE_HEADER)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, value)| *name == COOKIE && !value.is_empty())
        .map(|(_, value)| value)
}

/// Whether a request with `headers` (and no client certificate) would be authenticated by
/// the session cookie alone: then an unsafe method needs the console's CSRF header.
pub(crate) fn by_cookie_only(headers: &HeaderMap) -> bool {
    !headers.contains_key(AUTHORIZATION) && session_cookie(headers).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_cookie(cookie: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(COOKIE_HEADER, cookie.parse().unwrap());
        headers
    }

    #[test]
    fn a_login_token_should_open_one_session_only() {
        let sessions = ConsoleSessions::default();
        let jane = User::new("jane", ["dev".to_owned()]);
        let token = sessions.mint_login_token(jane.clone());
        let (id, user) = sessions.redeem(&token).expect("a fresh token is good");
        assert_eq!(user, jane);
        assert!(sessions.redeem(&token).is_none(), "a token is good once");
        assert!(sessions.redeem("made-up").is_none());
        let cookie = with_cookie(&format!("other=1; {COOKIE}={id}"));
        assert_eq!(sessions.authenticate(&cookie), Some(jane));
        assert!(by_cookie_only(&cookie));
        sessions.end(&id);
        assert_eq!(sessions.authenticate(&cookie), None);
    }

    #[test]
    fn a_cookie_should_not_count_beside_a_bearer_token_or_when_unknown() {
        let sessions = ConsoleSessions::default();
        let token = sessions.mint_login_token(User::new("jane", []));
        let (id, _) = sessions.redeem(&token).unwrap();
        let mut headers = with_cookie(&format!("{COOKIE}={id}"));
        headers.insert(AUTHORIZATION, "Bearer x".parse().unwrap());
        assert_eq!(sessions.authenticate(&headers), None);
        assert!(!by_cookie_only(&headers));
        let unknown = with_cookie(&format!("{COOKIE}=nope"));
        assert_eq!(sessions.authenticate(&unknown), None);
    }

    #[test]
    fn an_expired_token_should_be_refused() {
        let sessions = ConsoleSessions::default();
        let token = sessions.mint_login_token(User::new("jane", []));
        sessions.tokens.lock().get_mut(&token).unwrap().expires = Instant::now();
        assert!(sessions.redeem(&token).is_none());
    }
}
