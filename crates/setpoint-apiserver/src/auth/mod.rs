//! Authentication: who sent a request, decided as kube-apiserver decides it. A verified client
//! certificate with a common name is the user named by its CN, in the groups named by its O
//! attributes; otherwise the `Authorization: Bearer <token>` header's token is tried by the
//! chain (`chain.rs`): the admin token (compared in constant time), the static token file
//! (`static_tokens.rs`), bootstrap tokens (`bootstrap.rs`), and ServiceAccount JWTs
//! (`service_account.rs`, signed and verified by `jwt.rs`, signatures cached by `cache.rs`).
//! A request with none of these but the web console's session cookie is its session's user
//! (`console.rs`). Every authenticated user is also in `system:authenticated`. Anything else is anonymous,
//! which the server answers with 401 except on the health endpoints.
//! `docs/design/authentication.md` says more.

mod bootstrap;
mod cache;
mod chain;
pub(crate) mod console;
pub(crate) mod jwt;
pub(crate) mod service_account;
mod static_tokens;

pub use chain::{AuthenticationConfig, DEFAULT_SERVICE_ACCOUNT_ISSUER};
pub(crate) use chain::{Parts, TokenAuthenticator};

use http::header::AUTHORIZATION;
use http::HeaderMap;
use rustls::pki_types::CertificateDer;

use crate::pki::{self, BearerToken};

/// The group every authenticated user is in.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// An authenticated user, as handlers see it (kube-apiserver's `user.Info`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    /// The user name, such as `setpoint-admin`.
    pub name: String,
    /// The user's unique id, when the authenticator knows one (a ServiceAccount's uid).
    pub uid: String,
    /// The groups the user is in, such as `system:masters`; always includes
    /// [`AUTHENTICATED_GROUP`].
    pub groups: Vec<String>,
    /// Extra attributes the authenticator recorded (a bound token's
    /// `authentication.kubernetes.io/pod-name`, `credential-id`, …).
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl User {
    /// A user named `name` in `groups` and in [`AUTHENTICATED_GROUP`].
    pub fn new(name: impl Into<String>, groups: impl IntoIterator<Item = String>) -> Self {
        let mut groups: Vec<String> = groups.into_iter().collect();
        if !groups.iter().any(|group| group == AUTHENTICATED_GROUP) {
            groups.push(AUTHENTICATED_GROUP.to_owned());
        }
        Self {
            name: name.into(),
            groups,
            ..Self::default()
        }
    }

    /// Who the server's own in-process clients (its loops) act as: `system:apiserver` in
    /// `system:masters`, kube-apiserver's loopback identity. Admission webhooks see it in
    /// `userInfo`.
    #[must_use]
    pub fn loopback() -> Self {
        Self::new("system:apiserver", ["system:masters".to_owned()])
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|candidate| candidate == group)
    }
}

/// The user a client certificate (already verified against the cluster CA) stands for, or
/// `None` when it has no common name.
pub(crate) fn user_from_certificate(certificate: &CertificateDer<'_>) -> Option<User> {
    let certificate = pki::parse_certificate(certificate).ok()?;
    let name = pki::common_names(&certificate).into_iter().next()?;
    if name.is_empty() {
        return None;
    }
    Some(User::new(name, pki::organizations(&certificate)))
}

/// Where the authenticators find the objects tokens name (ServiceAccounts, bound pods,
/// Secrets, nodes, bootstrap token Secrets): the watch caches, so a lookup is cheap and
/// synchronous. `resource` is a core/v1 plural; `namespace` is `None` for nodes.
pub(crate) trait ObjectLookup: Send + Sync {
    /// The object as served, if it exists.
    fn object(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<serde_json::Value>;
}

/// The admin user that the admin token stands for.
pub(crate) fn admin_user() -> User {
    User::new(pki::ADMIN_COMMON_NAME, [pki::ADMIN_ORGANIZATION.to_owned()])
}

/// Authenticates a request from its connection's client-certificate user and its headers with
/// the transport's own credentials only (a certificate, the admin token): what a [`Handler`]
/// that does not authenticate gets.
///
/// [`Handler`]: crate::Handler
pub(crate) fn authenticate(
    certificate_user: Option<&User>,
    headers: &HeaderMap,
    admin_token: &BearerToken,
) -> Option<User> {
    if let Some(user) = certificate_user {
        return Some(user.clone());
    }
    let token = bearer_token(headers)?;
    admin_token.matches(token.as_bytes()).then(admin_user)
}

/// The token of an `Authorization: Bearer <token>` header, parsed as kube-apiserver does: the
/// scheme is case-insensitive and anything after a second space is ignored.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    parse_bearer(headers.get(AUTHORIZATION)?.to_str().ok()?)
}

/// The token of an `Authorization` header's value (see [`bearer_token`]).
fn parse_bearer(value: &str) -> Option<&str> {
    let value = value.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, authorization.parse().unwrap());
        headers
    }

    #[test]
    fn authenticate_should_accept_the_admin_token_with_any_scheme_case() {
        let token = BearerToken::generate();
        for scheme in ["Bearer", "bearer", "BEARER"] {
            let user = authenticate(
                None,
                &headers(&format!("{scheme} {}", token.expose())),
                &token,
            );
            assert_eq!(user, Some(admin_user()), "{scheme}");
        }
        let user = authenticate(
            None,
            &headers(&format!("  Bearer {} extra ", token.expose())),
            &token,
        );
        assert_eq!(user, Some(admin_user()));
    }

    #[test]
    fn authenticate_should_reject_missing_wrong_or_non_bearer_credentials() {
        let token = BearerToken::generate();
        assert_eq!(authenticate(None, &HeaderMap::new(), &token), None);
        assert_eq!(authenticate(None, &headers("Bearer nope"), &token), None);
        assert_eq!(authenticate(None, &headers("Bearer "), &token), None);
        let basic = format!("Basic {}", token.expose());
        assert_eq!(authenticate(None, &headers(&basic), &token), None);
    }

    #[test]
    fn authenticate_should_prefer_the_client_certificate_user() {
        let token = BearerToken::generate();
        let alice = User::new("alice", ["devs".to_owned()]);
        let user = authenticate(Some(&alice), &headers("Bearer wrong"), &token);
        assert_eq!(user, Some(alice));
    }

    #[test]
    fn new_user_should_be_in_the_authenticated_group_once() {
        let user = User::new("bob", [AUTHENTICATED_GROUP.to_owned(), "a".to_owned()]);
        assert_eq!(user.groups, [AUTHENTICATED_GROUP, "a"]);
        assert!(admin_user().in_group("system:masters"));
        assert!(admin_user().in_group(AUTHENTICATED_GROUP));
    }
}
