//! The web console (docs/console.md), served under `/ui/` on the API server's own listener.
//!
//! Public (no credentials, [`public`]): the page and its assets (embedded in the binary, no
//! build step) and `GET /ui/login?token=`, which spends a one-time login token and answers
//! with the session cookie (`auth/console.rs`) and a redirect to `/ui/`. Authenticated
//! ([`serve`], called by the handlers before authorization): `POST /ui/api/login-tokens`
//! (mints a login token for the user the caller impersonates, so only a caller allowed to
//! impersonate that user can), `GET /ui/api/session`, `POST /ui/api/logout`, and
//! `GET /ui/api/loops` (the controllers' work-queue and reconcile series of `/metrics`, as
//! JSON, for whoever may read `/metrics`). Everything else the page shows it reads from the
//! Kubernetes API itself, as the logged-in user: RBAC decides.

mod loops;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION, SET_COOKIE};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri};
use serde_json::json;
use setpoint_core::ApiError;

use crate::api::Api;
use crate::auth::console::{self as sessions, COOKIE, LOGIN_TOKEN_TTL, SESSION_TTL};
use crate::auth::User;
use crate::authz::{Attributes, Authorizer as _, Decision};
use crate::server::{failure_response, full_body, Body, ImpersonatedBy};

/// Where the console lives.
pub(crate) const PREFIX: &str = "/ui";

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
/// The modules `app.js` imports: DOM helpers, the charts, the set point/process variable panels.
const DOM_JS: &str = include_str!("assets/dom.js");
const CHARTS_JS: &str = include_str!("assets/charts.js");
const TRACKERS_JS: &str = include_str!("assets/trackers.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// What the page may load: its own assets and its own origin's API, nothing else.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// Whether `path` is the console's.
pub(crate) fn owns(path: &str) -> bool {
    path == PREFIX || path.starts_with("/ui/")
}

/// The answer to a request the console serves without credentials, or `None`.
pub(crate) fn public(
    api: &Api,
    method: &Method,
    uri: &Uri,
    _headers: &HeaderMap,
) -> Option<Response<Body>> {
    let path = uri.path();
    if !owns(path) || path.starts_with("/ui/api/") {
        return None;
    }
    if method != Method::GET && method != Method::HEAD {
        return Some(failure_response(&ApiError::new(
            setpoint_core::Reason::MethodNotAllowed,
            format!("the console's page {path} only answers GET"),
        )));
    }
    Some(match path {
        "/ui" => redirect("/ui/"),
        "/ui/" | "/ui/index.html" => asset("text/html; charset=utf-8", INDEX_HTML),
        "/ui/app.js" => asset("text/javascript; charset=utf-8", APP_JS),
        "/ui/dom.js" => asset("text/javascript; charset=utf-8", DOM_JS),
        "/ui/charts.js" => asset("text/javascript; charset=utf-8", CHARTS_JS),
        "/ui/trackers.js" => asset("text/javascript; charset=utf-8", TRACKERS_JS),
        "/ui/app.css" => asset("text/css; charset=utf-8", APP_CSS),
        "/ui/login" => login(api, uri.query()),
        _ => failure_response(&ApiError::no_such_path()),
    })
}

/// An embedded asset, with the headers that keep it to this origin.
fn asset(content_type: &'static str, text: &'static str) -> Response<Body> {
    let mut response = Response::new(full_body(Bytes::from_static(text.as_bytes())));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    secure_headers(headers);
    response
}

/// Headers every console answer carries: no caching, no sniffing, no framing, no referrer (a
/// login URL's token must not leak to another site).
fn secure_headers(headers: &mut HeaderMap) {
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
}

fn redirect(location: &'static str) -> Response<Body> {
    let mut response = Response::new(full_body(Bytes::new()));
    *response.status_mut() = StatusCode::SEE_OTHER;
    response
        .headers_mut()
        .insert(LOCATION, HeaderValue::from_static(location));
    secure_headers(response.headers_mut());
    response
}

/// The value of `name` in a query string (percent-decoding is not needed: tokens are
/// base64url).
fn query_value<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// `GET /ui/login?token=`: the token spent for a session cookie and a redirect to `/ui/`.
fn login(api: &Api, query: Option<&str>) -> Response<Body> {
    let Some(token) = query_value(query, "token").filter(|t| !t.is_empty()) else {
        return failure_response(&ApiError::bad_request(
            "the login URL has no token: run `setpoint console-url` for one",
        ));
    };
    let Some((session, user)) = api.console_sessions.redeem(token) else {
        return failure_response(&ApiError::new(
            setpoint_core::Reason::Unauthorized,
            "the login token is unknown, already used or expired (they are good once, for 5 \
             minutes): run `setpoint console-url` for a new one",
        ));
    };
    tracing::info!(user = %user.name, "console login");
    let mut response = redirect("/ui/");
    let cookie = format!(
        "{COOKIE}={session}; Path=/; Max-Age={}; Secure; HttpOnly; SameSite=Strict",
        SESSION_TTL.as_secs()
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    response
}

/// Answers an authenticated request under `/ui/`.
pub(crate) fn serve(api: &Api, request: &Request<Bytes>) -> Result<Response<Body>, ApiError> {
    let user = request
        .extensions()
        .get::<User>()
        .cloned()
        .unwrap_or_else(crate::auth::admin_user);
    let path = request.uri().path();
    let method = request.method();
    match (path, method) {
        ("/ui/api/session", &Method::GET) => Ok(json_response(
            StatusCode::OK,
            &json!({"user": user.name, "groups": user.groups}),
        )),
        ("/ui/api/login-tokens", &Method::POST) => mint(api, request, user),
        ("/ui/api/logout", &Method::POST) => {
            if let Some(id) = sessions::session_cookie(request.headers()) {
                api.console_sessions.end(id);
            }
            let mut response = json_response(
                StatusCode::OK,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
            );
            let clear = format!("{COOKIE}=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Strict");
            if let Ok(value) = HeaderValue::from_str(&clear) {
                response.headers_mut().insert(SET_COOKIE, value);
            }
            Ok(response)
        }
        ("/ui/api/loops", &Method::GET) => {
            let attributes = Attributes::non_resource(&user, "get", "/metrics");
            match api.authorizer().authorize(&attributes) {
                Decision::Allow(_) => {}
                refused => return Err(crate::authz::forbidden(&attributes, refused.reason())),
            }
            let exposition = api
                .metrics_renderer
                .get()
                .map(|render| render())
                .unwrap_or_default();
            Ok(json_response(
                StatusCode::OK,
                &loops::from_exposition(&exposition),
            ))
        }
        ("/ui/api/session" | "/ui/api/login-tokens" | "/ui/api/logout" | "/ui/api/loops", _) => {
            Err(ApiError::new(
                setpoint_core::Reason::MethodNotAllowed,
                format!("{method} is not supported on {path}"),
            ))
        }
        _ => Err(ApiError::no_such_path()),
    }
}

/// `POST /ui/api/login-tokens`: a login token for the user the caller impersonates (or, not
/// impersonating, for itself). The transport has authorized an impersonation (`impersonate` on
/// the user and each group); one of oneself is none to it, so the caller must then be allowed
/// to impersonate its own user: either way only a caller allowed to impersonate can mint.
fn mint(api: &Api, request: &Request<Bytes>, user: User) -> Result<Response<Body>, ApiError> {
    let minter = match request.extensions().get::<ImpersonatedBy>() {
        Some(ImpersonatedBy(minter)) => minter.clone(),
        None => {
            let attributes =
                Attributes::resource(&user, "impersonate", "", "users", "", &user.name);
            if !api.authorizer().authorize(&attributes).allowed() {
                return Err(ApiError::forbidden(format!(
                    "User {:?} cannot mint a console login token: only a caller allowed to \
                     impersonate users may (as `setpoint console-url` does with the admin \
                     kubeconfig)",
                    user.name
                )));
            }
            user.clone()
        }
    };
    tracing::info!(minter = %minter.name, user = %user.name, "console login token minted");
    let token = api.console_sessions.mint_login_token(user.clone());
    Ok(json_response(
        StatusCode::CREATED,
        &json!({
            "user": user.name,
            "groups": user.groups,
            "path": format!("{PREFIX}/login?token={token}"),
            "token": token,
            "expiresInSeconds": LOGIN_TOKEN_TTL.as_secs(),
        }),
    ))
}

fn json_response(code: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(full_body(value.to_string()));
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    secure_headers(headers);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_value_should_find_the_token() {
        assert_eq!(query_value(Some("a=1&token=xyz"), "token"), Some("xyz"));
        assert_eq!(query_value(Some("tokens=1"), "token"), None);
        assert_eq!(query_value(None, "token"), None);
    }

    #[test]
    fn owns_should_take_only_the_console_paths() {
        assert!(owns("/ui") && owns("/ui/") && owns("/ui/api/loops"));
        assert!(!owns("/uix") && !owns("/api/v1/ui"));
    }
}
