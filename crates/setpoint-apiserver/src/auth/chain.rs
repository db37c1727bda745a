//! The authenticator chain, as kube-apiserver's: a verified client certificate first (CN =
//! user, O = groups), then the bearer token, tried as the admin token, a line of the static
//! token file, a bootstrap token, and a ServiceAccount JWT (bound, from TokenRequest, or legacy,
//! from a `kubernetes.io/service-account-token` Secret). The first that accepts decides; a
//! request none accepts is anonymous (the transport answers 401). [`TokenAuthenticator`] also
//! issues ServiceAccount tokens (it holds the signing key) and answers TokenReviews.
//!
//! Audiences: a ServiceAccount token names its audiences (`aud`) and is good where one of them
//! is wanted — a request to this server wants the API audiences (`--api-audiences`, by default
//! the first `--service-account-issuer`). The other tokens, and legacy tokens, name none and are
//! good for the API audiences only.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use http::HeaderMap;

use super::cache::TokenCache;
use super::jwt::{looks_like_jwt, JwtError, SigningKey};
use super::service_account::{self as sa, BoundToken, NameUid, Validated, LEGACY_ISSUER};
use super::static_tokens::StaticTokens;
use super::{admin_user, bearer_token, bootstrap, parse_bearer, ObjectLookup, User};
use crate::pki::BearerToken;

/// kube-apiserver's default ServiceAccount issuer (and so its default API audience).
pub const DEFAULT_SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// How the server authenticates: the `setpoint server` flags of the same names.
#[derive(Clone, Debug, Default)]
pub struct AuthenticationConfig {
    /// `--service-account-issuer`: the `iss` of the tokens issued (the first) and accepted (all);
    /// none: [`DEFAULT_SERVICE_ACCOUNT_ISSUER`].
    pub service_account_issuers: Vec<String>,
    /// `--api-audiences`: the audiences a token must name to be accepted by this server; none:
    /// the first issuer.
    pub api_audiences: Vec<String>,
    /// `--service-account-max-token-expiration`: longer TokenRequests are shortened to this.
    pub service_account_max_token_expiration: Option<Duration>,
    /// `--token-auth-file`: the static token file; none: `DATA_DIR/pki/tokens.csv`.
    pub token_auth_file: Option<PathBuf>,
}

impl AuthenticationConfig {
    /// The issuers, the first signing.
    pub(crate) fn issuers(&self) -> Vec<String> {
        if self.service_account_issuers.is_empty() {
            vec![DEFAULT_SERVICE_ACCOUNT_ISSUER.to_owned()]
        } else {
            self.service_account_issuers.clone()
        }
    }

    /// The API audiences.
    pub(crate) fn audiences(&self) -> Vec<String> {
        if self.api_audiences.is_empty() {
            self.issuers().into_iter().take(1).collect()
        } else {
            self.api_audiences.clone()
        }
    }
}

/// What a [`TokenAuthenticator`] is built from.
pub(crate) struct Parts {
    pub(crate) config: AuthenticationConfig,
    /// The admin token (none in an API never served over HTTPS).
    pub(crate) admin: Option<BearerToken>,
    pub(crate) key: SigningKey,
    /// The static token file, if any.
    pub(crate) static_file: Option<PathBuf>,
    /// Where the objects tokens name are looked up.
    pub(crate) objects: Arc<dyn ObjectLookup>,
    /// The cluster CA, PEM (legacy token Secrets carry it), if served.
    pub(crate) ca_pem: Option<String>,
}

/// The server's token authenticator and issuer; cheap to clone.
#[derive(Clone)]
pub(crate) struct TokenAuthenticator {
    inner: Arc<Inner>,
}

struct Inner {
    admin: Option<BearerToken>,
    key: SigningKey,
    issuers: Vec<String>,
    audiences: Vec<String>,
    max_expiration: Option<i64>,
    static_tokens: Option<StaticTokens>,
    objects: Arc<dyn ObjectLookup>,
    cache: TokenCache,
    ca_pem: Option<String>,
}

impl std::fmt::Debug for TokenAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAuthenticator")
            .field("issuers", &self.inner.issuers)
            .field("audiences", &self.inner.audiences)
            .finish_non_exhaustive()
    }
}

impl TokenAuthenticator {
    pub(crate) fn new(parts: Parts) -> Self {
        let max_expiration = parts
            .config
            .service_account_max_token_expiration
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        Self {
            inner: Arc::new(Inner {
                admin: parts.admin,
                key: parts.key,
                issuers: parts.config.issuers(),
                audiences: parts.config.audiences(),
                max_expiration,
                static_tokens: parts.static_file.map(StaticTokens::new),
                objects: parts.objects,
                cache: TokenCache::default(),
                ca_pem: parts.ca_pem,
            }),
        }
    }

    /// Who sends a request: its client certificate's user, else its bearer token's.
    pub(crate) fn authenticate_request(
        &self,
        certificate_user: Option<&User>,
        headers: &HeaderMap,
    ) -> Option<User> {
        if let Some(user) = certificate_user {
            return Some(user.clone());
        }
        self.authenticate(bearer_token(headers)?)
    }

    /// The user `token` stands for, as a request to this server bearing it.
    pub(crate) fn authenticate(&self, token: &str) -> Option<User> {
        self.review(token, &[]).map(|(user, _)| user)
    }

    /// The user `token` stands for and the audiences of `wanted` (the API audiences when empty)
    /// it is good for; `None` when it is good for none of them or not at all.
    pub(crate) fn review(&self, token: &str, wanted: &[String]) -> Option<(User, Vec<String>)> {
        let header = format!("Bearer {token}");
        let token = parse_bearer(&header)?;
        let wanted: &[String] = if wanted.is_empty() {
            &self.inner.audiences
        } else {
            wanted
        };
        let agnostic = |user: User| {
            let audiences = intersect(wanted, &self.inner.audiences);
            (!audiences.is_empty()).then_some((user, audiences))
        };
        if let Some(admin) = &self.inner.admin {
            if admin.matches(token.as_bytes()) {
                return agnostic(admin_user());
            }
        }
        if let Some(user) = self
            .inner
            .static_tokens
            .as_ref()
            .and_then(|s| s.authenticate(token))
        {
            return agnostic(user);
        }
        if let Some(user) = bootstrap::authenticate(token, self.inner.objects.as_ref(), Utc::now())
        {
            return agnostic(user);
        }
        if !looks_like_jwt(token) {
            return None;
        }
        let Validated { user, audiences } = match self.service_account(token) {
            Ok(validated) => validated,
            Err(reason) => {
                tracing::debug!(%reason, "ServiceAccount token refused");
                return None;
            }
        };
        match audiences {
            None => agnostic(user),
            Some(named) => {
                let audiences = intersect(wanted, &named);
                (!audiences.is_empty()).then_some((user, audiences))
            }
        }
    }

    /// Validates a ServiceAccount JWT: its signature (remembered briefly), then its claims.
    fn service_account(&self, token: &str) -> Result<Validated, String> {
        let now = Instant::now();
        let claims = match self.inner.cache.get(token, now) {
            Some(claims) => claims,
            None => {
                let claims = self.inner.key.verify(token).map_err(|e| e.to_string())?;
                self.inner.cache.insert(token, claims.clone(), now);
                claims
            }
        };
        if claims["iss"] == LEGACY_ISSUER {
            return sa::validate_legacy(token, &claims, self.inner.objects.as_ref());
        }
        sa::validate_bound(
            &claims,
            &self.inner.issuers,
            self.inner.objects.as_ref(),
            Utc::now().timestamp(),
        )
    }

    /// Issues a bound token: the token, its expiry (Unix seconds) and its `jti`.
    pub(crate) fn issue(&self, token: &BoundToken) -> Result<(String, i64), JwtError> {
        let now = Utc::now().timestamp();
        let (claims, _jti) = sa::bound_claims(token, self.issuer(), now);
        let signed = self.inner.key.sign(&claims)?;
        Ok((signed, now + token.expiration_seconds))
    }

    /// Issues a legacy token for the Secret `secret` of the ServiceAccount `account`.
    pub(crate) fn issue_legacy(
        &self,
        namespace: &str,
        account: &NameUid,
        secret: &str,
    ) -> Result<String, JwtError> {
        self.inner
            .key
            .sign(&sa::legacy_claims(namespace, account, secret))
    }

    /// The issuer tokens are issued by.
    pub(crate) fn issuer(&self) -> &str {
        self.inner
            .issuers
            .first()
            .map_or(DEFAULT_SERVICE_ACCOUNT_ISSUER, String::as_str)
    }

    /// The API audiences.
    pub(crate) fn audiences(&self) -> &[String] {
        &self.inner.audiences
    }

    /// The longest token TokenRequest issues, in seconds, if limited.
    pub(crate) fn max_expiration(&self) -> Option<i64> {
        self.inner.max_expiration
    }

    /// The cluster CA, PEM, if the API is served.
    pub(crate) fn ca_pem(&self) -> Option<&str> {
        self.inner.ca_pem.as_deref()
    }

    /// The signing key (for the JWKS).
    pub(crate) fn key(&self) -> &SigningKey {
        &self.inner.key
    }
}

#[cfg(test)]
impl TokenAuthenticator {
    /// An authenticator accepting `admin`, with an in-memory key, the default configuration and
    /// no objects.
    pub(crate) fn for_tests(admin: BearerToken) -> Self {
        struct Nothing;
        impl ObjectLookup for Nothing {
            fn object(&self, _: &str, _: Option<&str>, _: &str) -> Option<serde_json::Value> {
                None
            }
        }
        Self::new(Parts {
            config: AuthenticationConfig::default(),
            admin: Some(admin),
            key: SigningKey::ephemeral().expect("a key"),
            static_file: None,
            objects: Arc::new(Nothing),
            ca_pem: None,
        })
    }
}

/// The audiences of `wanted` also in `allowed`, in `wanted`'s order.
fn intersect(wanted: &[String], allowed: &[String]) -> Vec<String> {
    wanted
        .iter()
        .filter(|a| allowed.contains(a))
        .cloned()
        .collect()
}
