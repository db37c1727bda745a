//! The health endpoints, `/healthz`, `/livez` and `/readyz`, served without authentication as
//! kube-apiserver serves them to anonymous clients. Each has one check, `ping`: the endpoint
//! and `/<endpoint>/ping` answer `ok`; with `?verbose` the endpoint lists its checks; any other
//! path below an endpoint is 404. All answers are `text/plain`.

use http::header::{CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use http::{HeaderValue, Response, StatusCode, Uri};

use super::handler::{full_body, Body};

/// The health endpoints.
const ENDPOINTS: [&str; 3] = ["/healthz", "/livez", "/readyz"];
/// The checks every endpoint runs.
const CHECKS: [&str; 1] = ["ping"];

/// The answer to a request for `uri`, or `None` when it is neither a health endpoint nor below
/// one (and must be authenticated).
pub(crate) fn respond(uri: &Uri) -> Option<Response<Body>> {
    let path = uri.path();
    let endpoint = endpoint_of(path)?;
    let name = endpoint.trim_start_matches('/');
    let rest = &path[endpoint.len()..];
    let (status, text) = if rest.is_empty() {
        if is_verbose(uri.query()) {
            let mut text: String = CHECKS
                .iter()
                .map(|check| format!("[+]{check} ok\n"))
                .collect();
            text.push_str(&format!("{name} check passed\n"));
            (StatusCode::OK, text)
        } else {
            (StatusCode::OK, "ok".to_owned())
        }
    } else if CHECKS.iter().any(|check| rest == format!("/{check}")) {
        (StatusCode::OK, "ok".to_owned())
    } else {
        (StatusCode::NOT_FOUND, "404 page not found\n".to_owned())
    };
    let mut response = Response::new(full_body(text));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    Some(response)
}

fn endpoint_of(path: &str) -> Option<&'static str> {
    ENDPOINTS.into_iter().find(|endpoint| {
        path.strip_prefix(endpoint)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

fn is_verbose(query: Option<&str>) -> bool {
    query.is_some_and(|query| {
        setpoint_core::query_pairs(query)
            .iter()
            .any(|(key, _)| key == "verbose")
    })
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt as _;

    use super::*;

    async fn answer(uri: &str) -> (StatusCode, String) {
        let response = respond(&uri.parse().unwrap()).expect("a health path");
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[test]
    fn respond_should_claim_endpoints_and_their_subpaths_only() {
        for path in ["/healthz", "/livez/ping", "/readyz/etcd", "/healthz/"] {
            assert!(respond(&path.parse().unwrap()).is_some(), "{path}");
        }
        for path in ["/healthzz", "/api", "/", "/version", "/apis/healthz"] {
            assert!(respond(&path.parse().unwrap()).is_none(), "{path}");
        }
    }

    #[tokio::test]
    async fn respond_should_answer_ok_verbose_and_404_like_kube_apiserver() {
        assert_eq!(answer("/readyz").await, (StatusCode::OK, "ok".to_owned()));
        assert_eq!(
            answer("/healthz/ping").await,
            (StatusCode::OK, "ok".to_owned())
        );
        assert_eq!(
            answer("/livez?verbose").await,
            (
                StatusCode::OK,
                "[+]ping ok\nlivez check passed\n".to_owned()
            )
        );
        assert_eq!(answer("/readyz/nothing").await.0, StatusCode::NOT_FOUND);
        assert!(respond(&"/api".parse().unwrap()).is_none());
    }
}
