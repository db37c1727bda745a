//! ServiceAccount issuer discovery, as kube-apiserver serves it: `GET
//! /.well-known/openid-configuration` (the OpenID provider metadata of the issuer: `issuer`,
//! `jwks_uri` = the issuer URL + `/openid/v1/jwks`, ES256) and `GET /openid/v1/jwks` (the
//! signing key as a JSON Web Key Set), so a relying party can verify ServiceAccount tokens
//! without asking the server. Both are non-resource paths that RBAC lets
//! `system:service-account-issuer-discovery` read; both may be cached an hour.

use http::{HeaderValue, Response, StatusCode};
use serde_json::json;

use super::response::{self, Body};
use crate::api::Api;

/// The discovery document's path.
pub(crate) const DISCOVERY_PATH: &str = "/.well-known/openid-configuration";
/// The key set's path.
pub(crate) const JWKS_PATH: &str = "/openid/v1/jwks";

/// Answers a GET of one of the two paths; `None` for any other path.
pub(crate) fn serve(api: &Api, path: &str) -> Option<Response<Body>> {
    if path != DISCOVERY_PATH && path != JWKS_PATH {
        return None;
    }
    let authenticator = api.authenticator()?;
    let (body, content_type) = if path == DISCOVERY_PATH {
        let issuer = authenticator.issuer().trim_end_matches('/');
        let document = json!({
            "issuer": authenticator.issuer(),
            "jwks_uri": format!("{issuer}{JWKS_PATH}"),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        });
        (document, "application/json")
    } else {
        (
            json!({"keys": [authenticator.key().jwk()]}),
            "application/jwk-set+json",
        )
    };
    let mut answer = response::json(StatusCode::OK, &body);
    let headers = answer.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    Some(answer)
}
