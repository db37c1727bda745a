//! The transport's `Status` answers: the failures it answers itself, before or instead of the
//! handler (no credentials, an impersonation, a malformed timeout, a body too large or
//! unreadable, a handler that panicked or ran out of time). Each is a [`setpoint_core::ApiError`],
//! encoded by [`ApiError::to_body`] like every other `Status` the server sends; this module
//! only puts it in a response with the transport's headers.

use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, Response, StatusCode};
use setpoint_core::ApiError;

use super::handler::{full_body, Body};

/// The response for a failure the transport answers itself: the error's `Status` body, its
/// code, `application/json` and `Cache-Control: no-cache, private` (as kube-apiserver's
/// filters answer).
pub(crate) fn failure_response(error: &ApiError) -> Response<Body> {
    let mut response = Response::new(full_body(error.to_body()));
    *response.status_mut() =
        StatusCode::from_u16(error.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_response_should_carry_the_code_headers_and_body() {
        let response = failure_response(&ApiError::request_entity_too_large(3));
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(response.headers()[CONTENT_TYPE], "application/json");
        assert_eq!(response.headers()[CACHE_CONTROL], "no-cache, private");
    }

    #[test]
    fn internal_error_should_carry_its_cause() {
        let json = String::from_utf8(ApiError::internal("boom").to_json()).unwrap();
        assert!(json.contains(r#""message":"Internal error occurred: boom","reason":"InternalError","details":{"causes":[{"message":"boom"}]},"code":500"#), "{json}");
    }
}
