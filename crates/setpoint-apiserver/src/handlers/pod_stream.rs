//! `pods/{name}/exec`, `pods/{name}/attach` and `pods/{name}/portforward` (GET for WebSocket
//! clients, POST for SPDY ones): the request is checked as kube-apiserver checks it, then
//! proxied to the pod's node agent as an upgrade — the agent speaks every stream protocol, this
//! server only splices bytes (`docs/design/streams.md`).
//!
//! Checks, in order: the pod exists (404); it has not completed (400, kubectl's words); exec
//! names a command (400); the container is named, the pod's only one or the default-container
//! annotation's (400 otherwise, `pod_log.rs`'s choice and words); the pod is bound to a node
//! (400 `pod X does not have a host assigned`); the request is an HTTP/1.1 upgrade (400
//! `Upgrade request required`, as kube-apiserver answers a plain request).
//!
//! The agent gets `/{exec|attach}/{ns}/{pod}/{uid}/{container}?{query}` or
//! `/portforward/{ns}/{pod}/{uid}?{query}`, the client's query verbatim, with the client's
//! method and headers less its credentials. A `101` is answered with the agent's headers and
//! the two upgraded connections are spliced byte for byte until both sides are done (or the
//! server's shutdown grace period ends: the task runs on the transport's
//! [`Upgrades`](crate::server::Upgrades)); any other answer is relayed as it is — so a
//! WebSocket attempt the agent refuses makes kubectl fall back to SPDY, as against a kubelet.

use std::io;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{header, HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Empty};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use setpoint_core::{query_pairs, ApiError, Reason};

use super::pod_log::{agent_address, choose_container, encode, read_node};
use super::read::read_object;
use super::response::Body;
use super::Ctx;
use crate::server::Upgrades;
use crate::telemetry::{hold_longrunning, RequestLabels};

/// The buffer of each direction of a splice: large, so a bulk transfer (port-forward) moves
/// in few system calls.
const SPLICE_BUFFER: usize = 256 * 1024;

/// The client headers never passed to the agent: credentials, and what describes this hop's
/// message rather than the request (`Connection` and `Upgrade` are passed: the agent must
/// see the upgrade).
const DROPPED_REQUEST_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "host",
    "content-length",
    "transfer-encoding",
    "te",
    "trailer",
    "keep-alive",
    "proxy-connection",
];

/// The agent's headers not relayed with a non-101 answer (they describe its connection; the
/// body is re-framed here).
const DROPPED_RESPONSE_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "content-length",
    "te",
    "trailer",
    "upgrade",
];

/// Which stream a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Exec,
    Attach,
    PortForward,
}

impl Stream {
    fn of(subresource: &str) -> Option<Stream> {
        match subresource {
            "exec" => Some(Stream::Exec),
            "attach" => Some(Stream::Attach),
            "portforward" => Some(Stream::PortForward),
            _ => None,
        }
    }

    /// The first segment of the agent's path.
    fn agent_route(self) -> &'static str {
        match self {
            Stream::Exec => "exec",
            Stream::Attach => "attach",
            Stream::PortForward => "portforward",
        }
    }

    /// The refusal for a pod in phase `phase` (`Succeeded` or `Failed`), in kubectl's words
    /// (kubectl refuses before it asks; clients that do not ask first hear the same here).
    fn completed(self, phase: &str) -> String {
        match self {
            Stream::Exec => {
                format!("cannot exec into a container in a completed pod; current phase is {phase}")
            }
            Stream::Attach => {
                format!("cannot attach a container in a completed pod; current phase is {phase}")
            }
            Stream::PortForward => {
                format!("unable to forward port because pod is not running. Current status={phase}")
            }
        }
    }
}

/// Whether `subresource` of core `pods` is one of the stream subresources served here.
pub(crate) fn is_stream(group: &str, resource: &str, subresource: Option<&str>) -> bool {
    group.is_empty() && resource == "pods" && subresource.and_then(Stream::of).is_some()
}

/// What a stream request brings beyond its path and query, taken from the request before it
/// is turned into a handler context (which keeps only its body).
pub(crate) struct Connect {
    method: Method,
    headers: HeaderMap,
    /// The query as the client wrote it (passed to the agent verbatim).
    raw_query: String,
    /// hyper's handle on the client's connection once it is upgraded; `None` unless the
    /// request is an HTTP/1.1 upgrade request served by the transport.
    upgrade: Option<OnUpgrade>,
    /// Where the transport tracks upgraded connections; `None` for in-process requests.
    upgrades: Option<Upgrades>,
    /// The request's metric labels: an open stream counts as a long-running request.
    labels: RequestLabels,
}

impl Connect {
    /// Takes what a stream request needs out of `request`.
    pub(crate) fn take<B>(request: &mut Request<B>) -> Connect {
        Connect {
            method: request.method().clone(),
            headers: request.headers().clone(),
            raw_query: request.uri().query().unwrap_or_default().to_owned(),
            upgrade: request.extensions_mut().remove::<OnUpgrade>(),
            upgrades: request.extensions().get::<Upgrades>().cloned(),
            labels: RequestLabels::of(request),
        }
    }

    /// Whether the client asked to upgrade (`Connection: upgrade`, as Go's
    /// `httpstream.IsUpgradeRequest` decides) on a connection that can be upgraded.
    fn is_upgrade(&self) -> bool {
        let asks = self
            .headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
        asks && self.upgrade.is_some()
    }
}

/// Answers a stream request: checks it, then proxies it to the pod's node agent.
pub(crate) async fn connect(
    ctx: &Ctx<'_>,
    subresource: &str,
    connect: Connect,
) -> Result<Response<Body>, ApiError> {
    let Some(stream) = Stream::of(subresource) else {
        return Err(ApiError::no_such_path());
    };
    if !matches!(connect.method, Method::GET | Method::POST) {
        return Err(ApiError::method_not_supported(
            &ctx.gr(),
            ctx.req.verb.as_str(),
        ));
    }
    let name = ctx.name();
    let pod = read_object(ctx).await?;
    let pairs = query_pairs(&connect.raw_query);
    let first = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    if let Some(phase) = pod["status"]["phase"]
        .as_str()
        .filter(|p| matches!(*p, "Succeeded" | "Failed"))
    {
        return Err(ApiError::bad_request(stream.completed(phase)));
    }
    if stream == Stream::Exec && !pairs.iter().any(|(k, _)| k == "command") {
        return Err(ApiError::bad_request(
            "you must specify at least one command for the container",
        ));
    }
    let container = match stream {
        Stream::PortForward => None,
        Stream::Exec | Stream::Attach => Some(choose_container(&pod, name, first("container"))?),
    };
    let Some(node_name) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) else {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    };
    if !connect.is_upgrade() {
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    let client = ctx.api.node_client.get().ok_or_else(|| {
        ApiError::new(
            Reason::ServiceUnavailable,
            format!(
                "pods/{subresource} is unavailable: this API server has no credentials to call node agents"
            ),
        )
    })?;
    let node = read_node(ctx, node_name).await?;
    let address = agent_address(&node, node_name)?;
    let path = agent_path(
        stream,
        ctx.req.namespace.as_deref().unwrap_or("default"),
        name,
        &pod,
        container.as_deref(),
        &connect.raw_query,
    );
    proxy(ctx, client, address, &path, connect).await
}

/// The agent's path and query for `stream` into `pod`.
fn agent_path(
    stream: Stream,
    namespace: &str,
    name: &str,
    pod: &Value,
    container: Option<&str>,
    raw_query: &str,
) -> String {
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let mut path = format!(
        "/{}/{}/{}/{}",
        stream.agent_route(),
        encode(namespace),
        encode(name),
        encode(uid)
    );
    if let Some(container) = container {
        path.push('/');
        path.push_str(&encode(container));
    }
    if !raw_query.is_empty() {
        path.push('?');
        path.push_str(raw_query);
    }
    path
}

/// Sends the request to the agent and answers with what it says; after a `101`, splices the
/// two connections in the background.
async fn proxy(
    ctx: &Ctx<'_>,
    client: &crate::node_client::NodeClient,
    address: SocketAddr,
    path: &str,
    connect: Connect,
) -> Result<Response<Body>, ApiError> {
    let Connect {
        method,
        headers,
        upgrade,
        upgrades,
        labels,
        ..
    } = connect;
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .body(Empty::<Bytes>::new())
        .map_err(|e| ApiError::internal(format!("building the node agent request: {e}")))?;
    *request.headers_mut() = forwarded_request_headers(&headers);
    let mut response = client
        .send(address, request)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let status = response.status();
    if status != StatusCode::SWITCHING_PROTOCOLS {
        return Ok(relay(response));
    }
    let (Some(client_side), Some(upgrades)) = (upgrade, upgrades) else {
        // `connect` checked the request is an upgrade served by the transport.
        return Err(ApiError::internal(
            "the client's connection cannot be upgraded",
        ));
    };
    let agent_side = hyper::upgrade::on(&mut response);
    let open = hold_longrunning(&ctx.api.telemetry, labels);
    upgrades.spawn(async move {
        let _open = open;
        if let Err(error) = splice(client_side, agent_side).await {
            tracing::debug!(%error, "stream connection ended with an error");
        }
    });
    let mut answer = Response::new(crate::server::empty_body());
    *answer.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *answer.headers_mut() = response.headers().clone();
    Ok(answer)
}

/// The client's headers as the agent gets them: all but its credentials, its impersonation
/// requests and this hop's framing.
fn forwarded_request_headers(headers: &HeaderMap) -> HeaderMap {
    let mut forwarded = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let lower = name.as_str();
        if DROPPED_REQUEST_HEADERS.contains(&lower) || lower.starts_with("impersonate-") {
            continue;
        }
        forwarded.append(name.clone(), value.clone());
    }
    forwarded
}

/// The agent's non-101 answer as ours: its status, its headers but the hop's, its body as it
/// streams.
fn relay(response: Response<hyper::body::Incoming>) -> Response<Body> {
    let (parts, body) = response.into_parts();
    let mut answer = Response::new(body.map_err(io::Error::other).boxed());
    *answer.status_mut() = parts.status;
    for (name, value) in &parts.headers {
        if !DROPPED_RESPONSE_HEADERS.contains(&name.as_str()) {
            answer.headers_mut().append(name.clone(), value.clone());
        }
    }
    answer
}

/// Copies bytes both ways between the client's upgraded connection and the agent's until
/// both directions have ended (an end of one is passed on as a half-close of the other).
async fn splice(client: OnUpgrade, agent: OnUpgrade) -> Result<(), hyper::Error> {
    let (client, agent) = tokio::try_join!(client, agent)?;
    let mut client = TokioIo::new(client);
    let mut agent = TokioIo::new(agent);
    match tokio::io::copy_bidirectional_with_sizes(
        &mut client,
        &mut agent,
        SPLICE_BUFFER,
        SPLICE_BUFFER,
    )
    .await
    {
        Ok((up, down)) => tracing::debug!(up, down, "stream connection ended"),
        Err(error) => tracing::debug!(%error, "stream connection ended abruptly"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use serde_json::json;

    use super::*;

    #[test]
    fn agent_paths_should_carry_the_uid_container_and_query_verbatim() {
        let pod = json!({"metadata": {"uid": "u-1"}});
        assert_eq!(
            agent_path(
                Stream::Exec,
                "ns",
                "web",
                &pod,
                Some("app"),
                "command=sh&command=-c&command=echo%20hi&stdout=true"
            ),
            "/exec/ns/web/u-1/app?command=sh&command=-c&command=echo%20hi&stdout=true"
        );
        assert_eq!(
            agent_path(Stream::PortForward, "ns", "web", &pod, None, ""),
            "/portforward/ns/web/u-1"
        );
    }

    #[test]
    fn forwarded_headers_should_keep_the_upgrade_and_drop_credentials() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "Upgrade"),
            ("upgrade", "SPDY/3.1"),
            ("x-stream-protocol-version", "v4.channel.k8s.io"),
            ("x-stream-protocol-version", "v3.channel.k8s.io"),
            ("sec-websocket-protocol", "v5.channel.k8s.io"),
            ("authorization", "Bearer secret"),
            ("impersonate-user", "someone"),
            ("host", "apiserver:6443"),
            ("content-length", "0"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        let forwarded = forwarded_request_headers(&headers);
        let names: Vec<&str> = forwarded.keys().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "connection",
                "upgrade",
                "x-stream-protocol-version",
                "sec-websocket-protocol"
            ]
        );
        assert_eq!(
            forwarded
                .get_all("x-stream-protocol-version")
                .iter()
                .count(),
            2
        );
    }

    #[test]
    fn only_connection_upgrade_with_an_upgradable_connection_is_an_upgrade() {
        let mut request = Request::get("/").body(()).unwrap();
        request.headers_mut().insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        // In-process: no connection to upgrade.
        assert!(!Connect::take(&mut request).is_upgrade());
        assert!(is_stream("", "pods", Some("exec")));
        assert!(!is_stream("", "pods", Some("log")));
        assert!(!is_stream("apps", "pods", Some("exec")));
    }
}
