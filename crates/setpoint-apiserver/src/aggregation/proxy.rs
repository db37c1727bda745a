//! The proxy: a request under `/apis/{group}/{version}` whose APIService has a Service is
//! answered by that Service's server — before local routing, so an aggregated group-version
//! overrides a local one. As kube-apiserver answers: an APIService not `Available`, a Service
//! without a ready endpoint, or a server that cannot be reached gets `503` with a plain-text
//! body (`service unavailable`, or the dial error); unusable TLS settings `500`. Connections
//! are reused (`transport::Pool`).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt as _;

use super::registered::Registered;
use super::transport;
use crate::api::Api;
use crate::auth::User;
use crate::server::Body;

/// The group and version of a path under `/apis/{group}/{version}` (and below).
pub(crate) fn group_version(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/apis/")?;
    let mut parts = rest.split('/');
    let group = parts.next().filter(|g| !g.is_empty())?;
    let version = parts.next().filter(|v| !v.is_empty())?;
    Some((group, version))
}

/// The APIService with a Service a request to `path` goes to, if any.
pub(crate) fn target(api: &Api, path: &str) -> Option<Arc<Registered>> {
    let (group, version) = group_version(path)?;
    super::remote(api, group, version)
}

/// A plain-text error, as Go's `http.Error` writes it.
pub(crate) fn plain_error(code: StatusCode, message: &str) -> Response<Body> {
    let mut r = Response::new(crate::server::full_body(format!("{message}\n")));
    *r.status_mut() = code;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// Proxies `request` (sent by its [`User`], the admin when none is attached) to the server of
/// `registered`.
pub(crate) async fn proxy(
    api: &Api,
    registered: &Registered,
    request: Request<Bytes>,
) -> Response<Body> {
    let Some(service) = &registered.service else {
        return plain_error(StatusCode::NOT_FOUND, "");
    };
    if !registered.available {
        return plain_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
    }
    let served = api.served();
    let address = match crate::webhook::endpoints::service_address(
        &served,
        &service.namespace,
        &service.name,
        service.port,
    )
    .await
    {
        Ok(address) => address,
        Err(error) => {
            tracing::debug!(apiservice = %registered.name, %error, "cannot proxy");
            return plain_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable");
        }
    };
    let state = super::state(api);
    let tls = match registered.tls(state.identity()) {
        Ok(tls) => tls,
        Err(e) => return plain_error(StatusCode::INTERNAL_SERVER_ERROR, &e),
    };
    let user = request
        .extensions()
        .get::<User>()
        .cloned()
        .unwrap_or_else(crate::auth::admin_user);
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    let host = format!("{}:{}", service.server_name(), service.port);
    let outgoing = transport::Outgoing {
        method: parts.method,
        uri: match path.parse() {
            Ok(uri) => uri,
            Err(_) => return plain_error(StatusCode::BAD_REQUEST, "invalid path"),
        },
        headers: transport::forwarded_headers(&parts.headers, &host, &user),
        body,
    };
    let server_name = service.server_name();
    let to = transport::Destination {
        tls: &tls,
        tls_key: registered.tls_key,
        address,
        server_name: &server_name,
    };
    match transport::send(&state.pool, &to, &outgoing).await {
        Ok(answer) => {
            let (parts, body) = answer.into_parts();
            let mut response = Response::new(body.map_err(std::io::Error::other).boxed());
            *response.status_mut() = parts.status;
            *response.headers_mut() = transport::returned_headers(&parts.headers);
            response
        }
        Err(error) => {
            tracing::debug!(apiservice = %registered.name, %error, "proxying failed");
            plain_error(StatusCode::SERVICE_UNAVAILABLE, &error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_under_a_group_version_should_be_proxied() {
        assert_eq!(
            group_version("/apis/wardle.example.com/v1/namespaces/a/flunders"),
            Some(("wardle.example.com", "v1"))
        );
        assert_eq!(
            group_version("/apis/wardle.example.com/v1"),
            Some(("wardle.example.com", "v1"))
        );
        assert_eq!(group_version("/apis/wardle.example.com"), None);
        assert_eq!(group_version("/apis/wardle.example.com/"), None);
        assert_eq!(group_version("/api/v1/pods"), None);
    }
}
