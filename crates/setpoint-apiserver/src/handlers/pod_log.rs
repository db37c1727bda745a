//! `GET pods/{name}/log`: chooses the container, finds the pod's node agent and streams its
//! answer back — the container's log as `text/plain`, chunk by chunk (so `follow` works), or
//! the agent's error `Status` as ours.
//!
//! The log options are checked first, as kube-apiserver checks `PodLogOptions`: a value that
//! is not of its type is a 400, a value out of range (or `sinceSeconds` with `sinceTime`) a 422
//! `PodLogOptions "<pod>" is invalid`; only checked, normalised options reach the agent.
//!
//! Without node credentials (an [`Api`](super::Api) built without [`NodeClient`], e.g. in
//! tests that never start the HTTPS transport) the answer is a 503 saying so.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt as _, Limited};
use serde_json::Value;
use setpoint_core::{ApiError, Cause, Reason};

use super::read::read_object;
use super::response::Body;
use super::Ctx;
use crate::node_client::NodeClient;

/// The annotation naming the container `kubectl logs` and `exec` pick by default.
const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";
/// The boolean log options, passed on to the agent as `true` or `false`.
const BOOL_OPTIONS: &[&str] = &["follow", "previous", "timestamps"];
/// The integer log options, passed on to the agent as decimal numbers once checked.
const INT_OPTIONS: &[&str] = &["tailLines", "sinceSeconds", "limitBytes"];
/// The most of an agent's error body read.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Answers `GET pods/{name}/log`.
pub(crate) async fn pod_log(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let name = ctx.name();
    // kube-apiserver checks the options before it looks the pod up.
    let options = log_options(ctx.query, name)?;
    let pod = read_object(ctx).await?;
    let container = choose_container(&pod, name, ctx.query.get("container").map(String::as_str))?;
    let Some(node_name) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) else {
        return Err(ApiError::bad_request(format!(
            "container {container:?} in pod {name:?} is waiting to start: ContainerCreating"
        )));
    };
    let client = ctx.api.node_client.get().ok_or_else(|| {
        ApiError::new(
            Reason::ServiceUnavailable,
            "pods/log is unavailable: this API server has no credentials to call node agents",
        )
    })?;
    let node = read_node(ctx, node_name).await?;
    let address = agent_address(&node, node_name)?;
    let namespace = ctx.req.namespace.as_deref().unwrap_or("default");
    let path = format!(
        "/containerLogs/{}/{}/{}?{}",
        encode(namespace),
        encode(name),
        encode(&container),
        agent_query(
            &options,
            pod["metadata"]["uid"].as_str().unwrap_or_default()
        ),
    );
    proxy(client, address, &path).await
}

/// The container the request is for: the one named, the pod's only one, or the one the
/// default-container annotation names.
pub(super) fn choose_container(
    pod: &Value,
    pod_name: &str,
    requested: Option<&str>,
) -> Result<String, ApiError> {
    let names = |field: &str| -> Vec<String> {
        pod["spec"][field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect()
    };
    let containers = names("containers");
    let init = names("initContainers");
    let ephemeral = names("ephemeralContainers");
    if let Some(requested) = requested.filter(|c| !c.is_empty()) {
        if [&containers, &init, &ephemeral]
            .iter()
            .any(|list| list.iter().any(|c| c == requested))
        {
            return Ok(requested.to_owned());
        }
        return Err(ApiError::bad_request(format!(
            "container {requested} is not valid for pod {pod_name}"
        )));
    }
    if let [only] = containers.as_slice() {
        return Ok(only.clone());
    }
    if let Some(default) = pod["metadata"]["annotations"][DEFAULT_CONTAINER_ANNOTATION]
        .as_str()
        .filter(|d| containers.iter().any(|c| c == d))
    {
        return Ok(default.to_owned());
    }
    let mut message = format!(
        "a container name must be specified for pod {pod_name}, choose one of: [{}]",
        containers.join(" ")
    );
    if !init.is_empty() {
        message.push_str(&format!(
            " or one of the init containers: [{}]",
            init.join(" ")
        ));
    }
    if !ephemeral.is_empty() {
        message.push_str(&format!(
            " or one of the ephemeral containers: [{}]",
            ephemeral.join(" ")
        ));
    }
    Err(ApiError::bad_request(message))
}

pub(super) async fn read_node(ctx: &Ctx<'_>, node_name: &str) -> Result<Value, ApiError> {
    ctx.api
        .registry_store_of("", "v1", "nodes")?
        .get(None, node_name)
        .await
}

/// The node's `InternalIP` and its agent's port.
pub(super) fn agent_address(node: &Value, node_name: &str) -> Result<SocketAddr, ApiError> {
    let addresses = node["status"]["addresses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ip = addresses
        .iter()
        .filter(|a| a["type"] == "InternalIP")
        .find_map(|a| a["address"].as_str().and_then(|s| s.parse::<IpAddr>().ok()))
        .ok_or_else(|| {
            ApiError::internal(format!(
                "node {node_name:?} has no InternalIP address to reach its agent at"
            ))
        })?;
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .ok_or_else(|| {
            ApiError::internal(format!(
                "node {node_name:?} publishes no agent port (status.daemonEndpoints.kubeletEndpoint.Port)"
            ))
        })?;
    Ok(SocketAddr::new(ip, port))
}

/// The request's log options, checked as kube-apiserver checks `PodLogOptions` (its query
/// decoding, then its validation), as the `(key, value)` pairs to pass on to the agent.
fn log_options(
    query: &BTreeMap<String, String>,
    pod_name: &str,
) -> Result<Vec<(&'static str, String)>, ApiError> {
    let mut options = Vec::new();
    for key in BOOL_OPTIONS {
        if let Some(value) = query.get(*key) {
            // As apimachinery converts a query parameter to a bool: only `0`, `f` and
            // `false` (any case) are false.
            let false_ = value == "0"
                || value.eq_ignore_ascii_case("f")
                || value.eq_ignore_ascii_case("false");
            options.push((*key, (!false_).to_string()));
        }
    }
    let mut ints = BTreeMap::new();
    for key in INT_OPTIONS {
        if let Some(value) = query.get(*key) {
            let n = value.parse::<i64>().map_err(|e| {
                let why = match e.kind() {
                    std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                        "value out of range"
                    }
                    _ => "invalid syntax",
                };
                ApiError::bad_request(format!("strconv.ParseInt: parsing {value:?}: {why}"))
            })?;
            ints.insert(*key, n);
            options.push((*key, n.to_string()));
        }
    }
    let since_time = query.get("sinceTime");
    if let Some(value) = since_time {
        chrono::DateTime::parse_from_rfc3339(value).map_err(|e| {
            ApiError::bad_request(format!("sinceTime: {value:?} is not an RFC 3339 time: {e}"))
        })?;
        options.push(("sinceTime", value.clone()));
    }
    let mut causes = Vec::new();
    if let Some(&n) = ints.get("tailLines").filter(|n| **n < 0) {
        causes.push(Cause::invalid(
            "tailLines",
            &Value::from(n),
            "must be greater than or equal to 0",
        ));
    }
    if let Some(&n) = ints.get("limitBytes").filter(|n| **n < 1) {
        causes.push(Cause::invalid(
            "limitBytes",
            &Value::from(n),
            "must be greater than 0",
        ));
    }
    match (ints.get("sinceSeconds"), since_time) {
        // kube-apiserver reports this one on the empty field path: its message reads
        // `: Forbidden: …`, its cause `Forbidden: …` with no field.
        (Some(_), Some(_)) => causes.push(Cause::new(
            "FieldValueForbidden",
            "",
            ": Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified",
        )),
        (Some(&n), None) if n < 1 => {
            causes.push(Cause::invalid(
                "sinceSeconds",
                &Value::from(n),
                "must be greater than 0",
            ));
        }
        _ => {}
    }
    if causes.is_empty() {
        return Ok(options);
    }
    let mut error = ApiError::invalid("PodLogOptions", "", pod_name, causes);
    for cause in error.details.iter_mut().flat_map(|d| d.causes.iter_mut()) {
        if cause.field.is_empty() {
            if let Some(body) = cause.message.strip_prefix(": ") {
                cause.message = body.to_owned();
            }
        }
    }
    Err(error)
}

/// The agent's query: the checked log options, and the pod's UID.
fn agent_query(options: &[(&'static str, String)], uid: &str) -> String {
    let mut pairs: Vec<String> = options
        .iter()
        .map(|(key, value)| format!("{key}={}", encode(value)))
        .collect();
    pairs.push(format!("podUID={}", encode(uid)));
    pairs.join("&")
}

/// Calls the agent and answers with what it says.
async fn proxy(
    client: &NodeClient,
    address: SocketAddr,
    path: &str,
) -> Result<Response<Body>, ApiError> {
    let response = client
        .get(address, path)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let status = response.status();
    if !status.is_success() {
        let body = Limited::new(response.into_body(), MAX_ERROR_BODY)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Err(agent_error(status, &body));
    }
    let body = response.into_body().map_err(io::Error::other).boxed();
    let mut answer = Response::new(body);
    answer
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(answer)
}

/// The agent's error as ours: its `Status` message with the reason for its code.
fn agent_error(status: StatusCode, body: &Bytes) -> ApiError {
    let message = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
    let reason = match status.as_u16() {
        400 => Reason::BadRequest,
        401 => Reason::Unauthorized,
        403 => Reason::Forbidden,
        404 => Reason::NotFound,
        422 => Reason::Invalid,
        503 => Reason::ServiceUnavailable,
        _ => Reason::InternalError,
    };
    let message = if message.is_empty() {
        format!("the node agent answered {status}")
    } else {
        message
    };
    ApiError::new(reason, message)
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub(super) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(containers: &[&str], init: &[&str], default: Option<&str>) -> Value {
        let list = |names: &[&str]| names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>();
        let mut pod = json!({
            "metadata": {"name": "p"},
            "spec": {"containers": list(containers), "initContainers": list(init)},
        });
        if let Some(d) = default {
            pod["metadata"]["annotations"] = json!({DEFAULT_CONTAINER_ANNOTATION: d});
        }
        pod
    }

    #[test]
    fn choose_container_should_pick_the_only_one_or_the_default() {
        assert_eq!(
            choose_container(&pod(&["a"], &[], None), "p", None).ok(),
            Some("a".into())
        );
        assert_eq!(
            choose_container(&pod(&["a", "b"], &[], Some("b")), "p", None).ok(),
            Some("b".into())
        );
        assert_eq!(
            choose_container(&pod(&["a", "b"], &["i"], None), "p", Some("i")).ok(),
            Some("i".into())
        );
    }

    #[test]
    fn choose_container_should_word_errors_like_kube_apiserver() {
        let e = choose_container(&pod(&["a", "b"], &[], None), "p", None).expect_err("ambiguous");
        assert_eq!(e.reason, Reason::BadRequest);
        assert_eq!(
            e.message,
            "a container name must be specified for pod p, choose one of: [a b]"
        );
        let e = choose_container(&pod(&["a", "b"], &["i"], Some("zz")), "p", None)
            .expect_err("ambiguous");
        assert_eq!(
            e.message,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
        );
        let e = choose_container(&pod(&["a"], &[], None), "p", Some("c")).expect_err("unknown");
        assert_eq!(e.message, "container c is not valid for pod p");
    }

    #[test]
    fn agent_error_should_carry_the_agents_status_message() {
        let body = Bytes::from_static(br#"{"kind":"Status","message":"previous terminated container \"c\" in pod \"p\" not found","code":400}"#);
        let e = agent_error(StatusCode::BAD_REQUEST, &body);
        assert_eq!(e.reason, Reason::BadRequest);
        assert_eq!(
            e.message,
            "previous terminated container \"c\" in pod \"p\" not found"
        );
        let e = agent_error(StatusCode::BAD_GATEWAY, &Bytes::from_static(b"oops\n"));
        assert_eq!(
            (e.reason, e.message.as_str()),
            (Reason::InternalError, "oops")
        );
    }

    #[test]
    fn encode_should_escape_reserved_characters() {
        assert_eq!(encode("2026-01-01T00:00:00Z"), "2026-01-01T00%3A00%3A00Z");
        assert_eq!(encode("a b&c"), "a%20b%26c");
    }
}
