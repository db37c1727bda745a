//! The health endpoints, `/healthz`, `/livez` and `/readyz`, served without authentication as
//! kube-apiserver serves them to anonymous clients. Every endpoint runs `ping` and the
//! handler's checks ([`Handler::health_checks`]: for the [`Api`](crate::Api), `etcd`, the
//! store answering; `/readyz` adds `etcd-readiness`, `informer-sync` and `shutdown`, which
//! fails once the server is shutting down). The endpoint answers `ok` when all pass, else
//! `500` listing them; `?verbose` lists them anyway (`[+]etcd ok`, `[-]etcd failed: reason
//! withheld`); `?exclude=NAME` skips a check; `/<endpoint>/<check>` runs one (`ok`, or `500`
//! `internal server error: <why>`); any other path below an endpoint is 404. All answers are
//! `text/plain`.

use http::header::{CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use http::{HeaderValue, Response, StatusCode, Uri};

use super::handler::{full_body, Body, Handler};

/// The health endpoints.
const ENDPOINTS: [&str; 3] = ["/healthz", "/livez", "/readyz"];

/// Whether `uri` is a health endpoint or below one (answered without authentication).
pub(crate) fn is_health(uri: &Uri) -> bool {
    endpoint_of(uri.path()).is_some()
}

/// The answer to a request for a health path (see [`is_health`]); `shutting_down` fails
/// `/readyz`'s `shutdown` check.
pub(crate) async fn respond(
    uri: &Uri,
    handler: &dyn Handler,
    shutting_down: bool,
) -> Response<Body> {
    let path = uri.path();
    let Some(endpoint) = endpoint_of(path) else {
        return text(StatusCode::NOT_FOUND, "404 page not found\n".to_owned());
    };
    let name = endpoint.trim_start_matches('/');
    let mut checks: Vec<(String, Result<(), String>)> = vec![("ping".to_owned(), Ok(()))];
    checks.extend(handler.health_checks(name).await);
    if name == "readyz" {
        let shutdown = if shutting_down {
            Err("the server is shutting down".to_owned())
        } else {
            Ok(())
        };
        checks.push(("shutdown".to_owned(), shutdown));
    }
    let rest = &path[endpoint.len()..];
    if !rest.is_empty() {
        let wanted = rest.trim_start_matches('/');
        return match checks.into_iter().find(|(check, _)| check == wanted) {
            Some((_, Ok(()))) => text(StatusCode::OK, "ok".to_owned()),
            Some((_, Err(why))) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal server error: {why}\n"),
            ),
            None => text(StatusCode::NOT_FOUND, "404 page not found\n".to_owned()),
        };
    }
    let query = setpoint_core::query_pairs(uri.query().unwrap_or_default());
    let verbose = query.iter().any(|(key, _)| key == "verbose");
    let excluded: Vec<&str> = query
        .iter()
        .filter(|(key, _)| key == "exclude")
        .map(|(_, value)| value.as_str())
        .collect();
    checks.retain(|(check, _)| !excluded.contains(&check.as_str()));
    let failed = checks.iter().any(|(_, result)| result.is_err());
    if !failed && !verbose {
        return text(StatusCode::OK, "ok".to_owned());
    }
    let mut out: String = checks
        .iter()
        .map(|(check, result)| match result {
            Ok(()) => format!("[+]{check} ok\n"),
            Err(_) => format!("[-]{check} failed: reason withheld\n"),
        })
        .collect();
    for check in excluded {
        out.push_str(&format!("[+]{check} excluded: ok\n"));
    }
    if failed {
        out.push_str(&format!("{name} check failed\n"));
        text(StatusCode::INTERNAL_SERVER_ERROR, out)
    } else {
        out.push_str(&format!("{name} check passed\n"));
        text(StatusCode::OK, out)
    }
}

fn text(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(full_body(text));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    response
}

fn endpoint_of(path: &str) -> Option<&'static str> {
    ENDPOINTS.into_iter().find(|endpoint| {
        path.strip_prefix(endpoint)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::BodyExt as _;

    use super::*;
    use crate::auth::User;

    /// A handler whose `etcd` check passes or fails.
    struct Checks {
        etcd: bool,
    }

    #[async_trait::async_trait]
    impl Handler for Checks {
        async fn handle(&self, _: http::Request<Bytes>, _: User) -> Response<Body> {
            Response::new(full_body(""))
        }

        async fn health_checks(&self, _endpoint: &str) -> Vec<(String, Result<(), String>)> {
            let etcd = if self.etcd {
                Ok(())
            } else {
                Err("no leader".to_owned())
            };
            vec![("etcd".to_owned(), etcd)]
        }
    }

    async fn answer(uri: &str, etcd: bool, shutting_down: bool) -> (StatusCode, String) {
        let response = respond(&uri.parse().unwrap(), &Checks { etcd }, shutting_down).await;
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[test]
    fn is_health_should_claim_endpoints_and_their_subpaths_only() {
        for path in ["/healthz", "/livez/ping", "/readyz/etcd", "/healthz/"] {
            assert!(is_health(&path.parse().unwrap()), "{path}");
        }
        for path in ["/healthz_", "/api", "/", "/version", "/apis/healthz"] {
            assert!(!is_health(&path.parse().unwrap()), "{path}");
        }
    }

    #[tokio::test]
    async fn endpoints_should_run_their_checks_like_kube_apiserver() {
        assert_eq!(
            answer("/readyz", true, false).await,
            (StatusCode::OK, "ok".to_owned())
        );
        assert_eq!(
            answer("/readyz?verbose", true, false).await,
            (
                StatusCode::OK,
                "[+]ping ok\n[+]etcd ok\n[+]shutdown ok\nreadyz check passed\n".to_owned()
            )
        );
        assert_eq!(
            answer("/livez?verbose", false, false).await,
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "[+]ping ok\n[-]etcd failed: reason withheld\nlivez check failed\n".to_owned()
            )
        );
        assert_eq!(
            answer("/livez?exclude=etcd", false, false).await,
            (StatusCode::OK, "ok".to_owned())
        );
        assert_eq!(
            answer("/readyz/etcd", false, false).await,
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal server error: no leader\n".to_owned()
            )
        );
        assert_eq!(
            answer("/readyz/shutdown", true, true).await.0,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            answer("/livez/shutdown", true, true).await.0,
            StatusCode::NOT_FOUND
        );
        assert_eq!(answer("/healthz/ping", true, false).await.1, "ok");
        assert_eq!(
            answer("/readyz/nothing", true, false).await.0,
            StatusCode::NOT_FOUND
        );
    }
}
