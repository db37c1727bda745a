//! The endpoint's routes: `GET /containerLogs/{namespace}/{pod}/{container}?…` streams a
//! container's log as `text/plain`; `GET /metrics/resource` answers the latest
//! resource-usage report as JSON (503 until two samples exist); `GET /healthz` answers `ok`;
//! `/exec/…`, `/attach/…` and `/portforward/…` (GET or POST) upgrade to a stream
//! (`streams.rs`); anything else is a `Status`.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt as _;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};

use setpoint_core::{query_pairs, ApiError, Reason};

use super::streams;
use crate::logs::{pod_dir, read_logs, LogError, LogOptions};
use crate::metrics::Sampler;

/// A response body: a whole `Status`, or a streamed log.
pub(super) type Body = BoxBody<Bytes, io::Error>;

/// Answers one request.
pub(super) async fn handle(
    root: &Path,
    metrics: &Sampler,
    shim: Arc<Vec<OsString>>,
    request: Request<Incoming>,
) -> Response<Body> {
    let path = request.uri().path().to_owned();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let named = |s: &[&str]| s.iter().all(|part| !part.is_empty());
    if request.method() == Method::GET || request.method() == Method::POST {
        match segments.as_slice() {
            [route @ ("exec" | "attach"), namespace, pod, uid, container]
                if named(&[namespace, pod, uid, container]) =>
            {
                let kind = if *route == "exec" {
                    streams::Kind::Exec
                } else {
                    streams::Kind::Attach
                };
                let names = (*namespace, *pod, *uid, *container);
                return streams::remote_command(root, shim, kind, names, request).await;
            }
            ["portforward", namespace, pod, uid] if named(&[namespace, pod, uid]) => {
                return streams::port_forward(root, (namespace, pod, uid), request);
            }
            _ => {}
        }
    }
    if request.method() != Method::GET {
        return status(&ApiError::new(
            Reason::MethodNotAllowed,
            "only GET is served",
        ));
    }
    let path = request.uri().path();
    if path == "/healthz" {
        return text(Bytes::from_static(b"ok"));
    }
    if path == "/metrics/resource" {
        return resource_metrics(metrics).await;
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["containerLogs", namespace, pod, container]
            if !namespace.is_empty() && !pod.is_empty() && !container.is_empty() =>
        {
            let query = request.uri().query().unwrap_or_default();
            container_logs(root, namespace, pod, container, query).await
        }
        _ => status(&ApiError::no_such_path()),
    }
}

async fn container_logs(
    root: &Path,
    namespace: &str,
    pod: &str,
    container: &str,
    query: &str,
) -> Response<Body> {
    let options = match LogOptions::from_query(query, chrono::Utc::now()) {
        Ok(options) => options,
        Err(e) => return log_error(&e),
    };
    let uid = query_pairs(query)
        .into_iter()
        .find(|(k, v)| k == "podUID" && !v.is_empty())
        .map(|(_, v)| v);
    let dir = match uid {
        Some(uid) => pod_dir(root, namespace, pod, &uid),
        None => newest_pod_dir(root, namespace, pod)
            .await
            .unwrap_or_else(|| pod_dir(root, namespace, pod, "unknown")),
    };
    match read_logs(&dir, pod, container, options).await {
        Ok(body) => {
            let frames = body.map_ok(Frame::data);
            let mut response = Response::new(StreamBody::new(frames).boxed());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain"),
            );
            response
        }
        Err(e) => log_error(&e),
    }
}

/// Without a pod UID: the most recently changed directory of a pod of that name (a pod
/// deleted and created again under the same name has several).
async fn newest_pod_dir(root: &Path, namespace: &str, pod: &str) -> Option<PathBuf> {
    let prefix = format!("{namespace}_{pod}_");
    let mut entries = tokio::fs::read_dir(root.join("pods")).await.ok()?;
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    while let Ok(Some(entry)) = entries.next_entry().await {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        if rest.contains('_') {
            continue;
        }
        let modified = entry
            .metadata()
            .await
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH);
        if best.as_ref().is_none_or(|(t, _)| modified > *t) {
            best = Some((modified, entry.path()));
        }
    }
    best.map(|(_, path)| path)
}

async fn resource_metrics(metrics: &Sampler) -> Response<Body> {
    let Some(report) = metrics.current().await else {
        return status(&ApiError::unavailable(
            "resource usage has not been sampled twice yet",
        ));
    };
    match serde_json::to_vec(&*report) {
        Ok(body) => {
            let mut response = Response::new(
                Full::new(Bytes::from(body))
                    .map_err(|never| match never {})
                    .boxed(),
            );
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(e) => status(&ApiError::new(
            Reason::InternalError,
            format!("encoding the resource report: {e}"),
        )),
    }
}

fn log_error(error: &LogError) -> Response<Body> {
    match error {
        LogError::WaitingToStart { .. } | LogError::NoPrevious { .. } | LogError::BadOption(_) => {
            status(&ApiError::bad_request(error.to_string()))
        }
        // The kubelet answers invalid options with 422.
        LogError::InvalidOption(_) => status(&ApiError::new(Reason::Invalid, error.to_string())),
        LogError::Io { .. } => {
            tracing::warn!(error = %error, "agent endpoint: reading a log failed");
            status(&ApiError::new(Reason::InternalError, error.to_string()))
        }
    }
}

fn text(body: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(body).map_err(|never| match never {}).boxed());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    response
}

/// A Kubernetes `Status` response for `error`, its body encoded as the API server encodes
/// every `Status` ([`ApiError::to_body`]).
pub(super) fn status(error: &ApiError) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(error.to_body()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() =
        StatusCode::from_u16(error.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}
