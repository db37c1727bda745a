//! The API's authenticator (`auth/`): configured by the embedding process
//! ([`Api::set_authentication`]), built when the cluster's credentials are loaded (the admin
//! token, the ServiceAccount signing key `DATA_DIR/pki/sa.key`, the static token file), and
//! looking the objects tokens name up in this API's watch caches. An API never served over
//! HTTPS (in-process tests) gets one on first use with a key that lives in memory only.

use std::sync::{Arc, Weak};

use serde_json::Value;

use super::Api;
use crate::auth::{
    jwt::SigningKey, AuthenticationConfig, ObjectLookup, Parts, TokenAuthenticator, User,
};
use crate::pki::Pki;

/// Looks objects up in the watch caches of an API.
struct CacheLookup(Weak<Api>);

impl ObjectLookup for CacheLookup {
    fn object(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let api = self.0.upgrade()?;
        let store = api.registry_store_of("", "v1", resource).ok()?;
        let key = store.def.key(namespace, name);
        let (objects, _) = store.cache().snapshot();
        let cached = objects.get(key.as_bytes())?;
        serde_json::from_slice(&cached.json.bytes()).ok()
    }
}

impl Api {
    /// Sets how requests are authenticated and ServiceAccount tokens issued (the
    /// `--service-account-issuer`, `--api-audiences`, `--service-account-max-token-expiration`
    /// and `--token-auth-file` flags). Call it before [`serve`](crate::serve); only the first
    /// call counts, and without one the defaults apply.
    pub fn set_authentication(&self, config: AuthenticationConfig) {
        let _ = self.authn_config.set(config);
    }

    fn authn_config(&self) -> AuthenticationConfig {
        self.authn_config.get().cloned().unwrap_or_default()
    }

    /// Builds the authenticator from the cluster's credentials (once; [`Handler::credentials_loaded`]).
    ///
    /// [`Handler::credentials_loaded`]: crate::Handler::credentials_loaded
    pub(crate) fn load_authenticator(&self, pki: &Pki) {
        let Some(key) = SigningKey::from_pkcs8(pki.service_account_key()) else {
            tracing::error!(
                "the ServiceAccount signing key cannot be used: ServiceAccount tokens are refused"
            );
            return;
        };
        let config = self.authn_config();
        let static_file = Some(
            config
                .token_auth_file
                .clone()
                .unwrap_or_else(|| pki.dir().join("tokens.csv")),
        );
        let _ = self.token_authenticator.set(TokenAuthenticator::new(Parts {
            config,
            admin: Some(pki.token().clone()),
            key,
            static_file,
            objects: Arc::new(CacheLookup(self.this.clone())),
            ca_pem: Some(pki.ca_certificate_pem().to_owned()),
        }));
    }

    /// The authenticator; one with an in-memory key if credentials were never loaded.
    pub(crate) fn authenticator(&self) -> Option<&TokenAuthenticator> {
        if let Some(authenticator) = self.token_authenticator.get() {
            return Some(authenticator);
        }
        let key = SigningKey::ephemeral()?;
        let config = self.authn_config();
        let static_file = config.token_auth_file.clone();
        let _ = self.token_authenticator.set(TokenAuthenticator::new(Parts {
            config,
            admin: None,
            key,
            static_file,
            objects: Arc::new(CacheLookup(self.this.clone())),
            ca_pem: None,
        }));
        self.token_authenticator.get()
    }

    /// Who sends a request (see [`crate::Handler::authenticate`]).
    pub(crate) fn authenticate_request(
        &self,
        certificate_user: Option<&User>,
        headers: &http::HeaderMap,
    ) -> Option<User> {
        let by_token = self
            .authenticator()
            .and_then(|chain| chain.authenticate_request(certificate_user, headers));
        // Last in the chain: the web console's session cookie, alone.
        by_token.or_else(|| {
            certificate_user
                .is_none()
                .then(|| self.console_sessions.authenticate(headers))
                .flatten()
        })
    }
}
