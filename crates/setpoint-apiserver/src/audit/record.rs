//! One request's audit events, around `Api::handle`: [`start`] asks the policy for the
//! request's level and records `RequestReceived`; [`finish`] records `ResponseComplete` with
//! the answer's code (and its `Status` for errors, its body at `RequestResponse`) — or, for a
//! long-running request (watch, logs, exec, attach, port-forward, proxy), `ResponseStarted`
//! when its head is produced and `ResponseComplete` when its body ends or the client goes away.
//! A handler that panics gets a `Panic` event; one dropped unanswered (the request timed out
//! or the client left) gets a `ResponseComplete` saying so.
//!
//! Bodies: at `Request` and above, a JSON request body (object, patch or delete options) is
//! recorded; at `RequestResponse`, a JSON response body that is not streamed. Other bodies
//! (protobuf, YAML apply patches) are left out. A create's or update's `objectRef` takes the
//! object's name, namespace, uid and resourceVersion from its JSON body, as kube does at every
//! level; when that gives no name (a `generateName`, a protobuf body), from the answer.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use chrono::Utc;
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame};
use http_body_util::BodyExt as _;
use parking_lot::Mutex;
use serde_json::Value;

use super::event::{Event, Level, ObjectRef, ResponseStatus, Stage, UserInfo};
use super::policy::{Decision, Facts};
use super::Auditor;
use crate::auth::User;
use crate::request_info::{self, ResourceRequest, Target, Verb};
use crate::server::{body_holding, AuditId, Body, ImpersonatedBy, PeerAddr};

/// kube-apiserver's longest recorded `User-Agent`; longer ones are cut and marked.
const MAX_USER_AGENT: usize = 1024;

/// What other parts of the server add to the events of the request they handle (see
/// [`annotate`](super::annotate)); shared through the request's extensions.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) annotations: Mutex<BTreeMap<String, String>>,
}

/// A request being recorded.
pub(crate) struct Recording {
    auditor: Arc<Auditor>,
    event: Event,
    decision: Decision,
    shared: Arc<Shared>,
    state: State,
}

/// Where the recording is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not answered yet.
    Handling,
    /// A long-running answer's head was produced; its body is being sent.
    Streaming,
    /// `ResponseComplete` was recorded.
    Done,
}

/// Starts recording `request` if the server keeps an audit log and its policy records it; the
/// caller has put the [`User`] in its extensions. Adds the request's [`AuditId`] if the
/// transport did not (an in-process client).
pub(crate) fn start(auditor: &Arc<Auditor>, request: &mut Request<Bytes>) -> Option<Recording> {
    let received = Utc::now();
    let query = request_info::parse_query(request.uri().query());
    let target = request_info::resolve(request.method(), request.uri().path(), &query).ok();
    let resource = match &target {
        Some(Target::Resource(r)) => Some(r),
        _ => None,
    };
    let verb = resource.map_or_else(
        || request.method().as_str().to_ascii_lowercase(),
        |r| r.verb.as_str().to_owned(),
    );
    let user = request.extensions().get::<User>();
    let impersonator = request.extensions().get::<ImpersonatedBy>();
    // As in kube, the policy judges the user who sent the request (an impersonator, not
    // whom it impersonates).
    let sender = impersonator.map(|ImpersonatedBy(sender)| sender).or(user);
    let decision = auditor.policy.decide(&Facts {
        user: sender,
        verb: &verb,
        resource,
        path: request.uri().path(),
    });
    auditor.writer.counters.level(decision.level);
    if decision.level == Level::None {
        return None;
    }
    let given_id = request.extensions().get::<AuditId>().cloned();
    let audit_id = given_id.clone().unwrap_or_else(AuditId::generate);
    let mut event = Event::new(decision.level, audit_id.0.clone(), received);
    event.request_uri = request.uri().path_and_query().map_or_else(
        || request.uri().path().to_owned(),
        |pq| pq.as_str().to_owned(),
    );
    event.verb = verb;
    match (impersonator, user) {
        (Some(ImpersonatedBy(sender)), Some(user)) => {
            event.user = UserInfo::from(sender);
            event.impersonated_user = Some(UserInfo::from(user));
        }
        (_, Some(user)) => event.user = UserInfo::from(user),
        (_, None) => {}
    }
    event.source_ips = source_ips(request.headers(), request.extensions());
    event.user_agent = user_agent(request.headers());
    event.object_ref = resource.map(object_ref);
    if let Some(r) = resource {
        let protobuf = request
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(crate::protobuf::MEDIA_TYPE));
        record_request_body(&mut event, r, request.body(), protobuf, decision);
    }
    if given_id.is_none() {
        request.extensions_mut().insert(audit_id);
    }
    let shared = Arc::new(Shared::default());
    request.extensions_mut().insert(shared.clone());
    let recording = Recording {
        auditor: auditor.clone(),
        event,
        decision,
        shared,
        state: State::Handling,
    };
    recording.emit(Stage::RequestReceived);
    Some(recording)
}

/// Records a request the transport refused itself (see
/// [`Handler::refused_by_transport`](crate::Handler::refused_by_transport)): a 401 as kube
/// records a failed authentication — no user, the methods tried as the message, one event at
/// `ResponseStarted`; a 403 as any refused request of `user`.
pub(crate) fn refused(
    auditor: &Arc<Auditor>,
    request: &http::request::Parts,
    user: Option<&User>,
    failure: &setpoint_core::ApiError,
) {
    let query = request_info::parse_query(request.uri.query());
    let target = request_info::resolve(&request.method, request.uri.path(), &query).ok();
    let resource = match &target {
        Some(Target::Resource(r)) => Some(r),
        _ => None,
    };
    let verb = resource.map_or_else(
        || request.method.as_str().to_ascii_lowercase(),
        |r| r.verb.as_str().to_owned(),
    );
    let decision = auditor.policy.decide(&Facts {
        user,
        verb: &verb,
        resource,
        path: request.uri.path(),
    });
    auditor.writer.counters.level(decision.level);
    if decision.level == Level::None {
        return;
    }
    let audit_id = request
        .extensions
        .get::<AuditId>()
        .cloned()
        .unwrap_or_else(AuditId::generate);
    let mut event = Event::new(decision.level, audit_id.0, Utc::now());
    event.request_uri = request.uri.path_and_query().map_or_else(
        || request.uri.path().to_owned(),
        |pq| pq.as_str().to_owned(),
    );
    event.verb = verb;
    event.user = user.map(UserInfo::from).unwrap_or_default();
    event.source_ips = source_ips(&request.headers, &request.extensions);
    event.user_agent = user_agent(&request.headers);
    event.object_ref = resource.map(object_ref);
    let (stage, status) = match user {
        None => (
            Stage::ResponseStarted,
            ResponseStatus {
                message: authentication_methods(&request.headers),
                code: failure.code(),
                ..ResponseStatus::default()
            },
        ),
        Some(_) => (
            Stage::ResponseComplete,
            ResponseStatus {
                status: "Failure".to_owned(),
                message: failure.message.clone(),
                reason: failure.reason.as_str().to_owned(),
                code: failure.code(),
                ..ResponseStatus::default()
            },
        ),
    };
    event.response_status = Some(status);
    let recording = Recording {
        auditor: auditor.clone(),
        event,
        decision,
        shared: Arc::new(Shared::default()),
        state: State::Done,
    };
    recording.emit(stage);
}

/// kube's message for a failed authentication: the methods the request tried.
fn authentication_methods(headers: &http::HeaderMap) -> String {
    let authorization = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .trim();
    let scheme = authorization.split(' ').next().unwrap_or_default();
    let mut methods = Vec::new();
    if scheme.eq_ignore_ascii_case("basic") {
        methods.push("basic");
    }
    if scheme.eq_ignore_ascii_case("bearer") && authorization.contains(' ') {
        methods.push("bearer");
    }
    if methods.is_empty() {
        "Authentication failed, no credentials provided".to_owned()
    } else {
        format!("Authentication failed, attempted: {}", methods.join(", "))
    }
}

/// Finishes recording with `response` (see the module's docs) and returns it, with its body
/// wrapped for a long-running request.
pub(crate) async fn finish(
    recording: Option<Recording>,
    response: Response<Body>,
) -> Response<Body> {
    let Some(mut recording) = recording else {
        return response;
    };
    let code = response.status().as_u16();
    recording.event.response_status = Some(ResponseStatus::code(code));
    if recording.is_long_running() {
        recording.state = State::Streaming;
        recording.emit(Stage::ResponseStarted);
        // ResponseComplete is recorded when the body (holding the recording) is dropped.
        return response.map(|inner| body_holding(inner, recording));
    }
    let response = if needs_body(&recording, &response) {
        let (parts, body) = response.into_parts();
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(error) => {
                recording.complete();
                return Response::from_parts(parts, Body::new(failed_body(error)));
            }
        };
        recording.record_response_body(code, &bytes);
        Response::from_parts(parts, crate::server::full_body(bytes))
    } else {
        response
    };
    recording.complete();
    response
}

fn failed_body(error: std::io::Error) -> impl HttpBody<Data = Bytes, Error = std::io::Error> {
    http_body_util::StreamBody::new(futures::stream::once(async move {
        Err::<Frame<Bytes>, _>(error)
    }))
}

/// Whether the answer's body is read for the event: an error's `Status`, a create's name when
/// its request did not give it, or the body at `RequestResponse` — never a streamed one.
fn needs_body(recording: &Recording, response: &Response<Body>) -> bool {
    if response.body().size_hint().exact().is_none() || !is_json(response.headers()) {
        return false;
    }
    let unnamed_create = recording.event.verb == "create"
        && recording
            .event
            .object_ref
            .as_ref()
            .is_some_and(|r| r.name.is_empty() && r.subresource.is_empty());
    response.status().as_u16() >= 400
        || unnamed_create
        || recording.decision.level >= Level::RequestResponse
}

fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

impl Recording {
    fn is_long_running(&self) -> bool {
        self.event.verb == "watch"
            || self.event.verb == "proxy"
            || self.event.object_ref.as_ref().is_some_and(|r| {
                matches!(
                    r.subresource.as_str(),
                    "attach" | "exec" | "proxy" | "log" | "portforward"
                )
            })
    }

    fn record_response_body(&mut self, code: u16, bytes: &Bytes) {
        let Ok(mut body) = serde_json::from_slice::<Value>(bytes) else {
            return;
        };
        if body["kind"] == "Status" {
            let text = |key: &str| body[key].as_str().unwrap_or_default().to_owned();
            self.event.response_status = Some(ResponseStatus {
                metadata: serde_json::Map::new(),
                status: text("status"),
                message: text("message"),
                reason: text("reason"),
                details: body.get("details").cloned(),
                code,
            });
        } else if code < 300 {
            if let Some(object_ref) = self.event.object_ref.as_mut() {
                fill_object_ref(object_ref, &body["metadata"]);
            }
        }
        if self.decision.level >= Level::RequestResponse {
            if self.decision.omit_managed_fields {
                strip_managed_fields(&mut body);
            }
            self.event.response_object = Some(body);
        }
    }

    /// Records `ResponseComplete`.
    fn complete(&mut self) {
        self.state = State::Done;
        self.emit(Stage::ResponseComplete);
    }

    /// Sends the event at `stage` unless the policy omits that stage.
    fn emit(&self, stage: Stage) {
        if self.decision.omit_stages.contains(stage) {
            return;
        }
        let mut event = self.event.clone();
        event.stage = stage;
        event.stage_timestamp = if stage == Stage::RequestReceived {
            event.request_received_timestamp
        } else {
            Utc::now()
        };
        let annotations = self.shared.annotations.lock();
        event
            .annotations
            .extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
        drop(annotations);
        self.auditor.writer.send(event);
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        match self.state {
            State::Done => {}
            State::Streaming => self.complete(),
            State::Handling if std::thread::panicking() => {
                self.state = State::Done;
                self.event.response_status = Some(ResponseStatus {
                    status: "Failure".to_owned(),
                    reason: "InternalError".to_owned(),
                    message: "APIServer panic'd: the request handler panicked".to_owned(),
                    code: 500,
                    ..ResponseStatus::default()
                });
                self.emit(Stage::Panic);
            }
            State::Handling => {
                self.event.response_status = Some(ResponseStatus {
                    status: "Failure".to_owned(),
                    message: "the request was abandoned before it was answered (it timed out, \
                              or the client went away)"
                        .to_owned(),
                    ..ResponseStatus::default()
                });
                self.complete();
            }
        }
    }
}

fn object_ref(r: &ResourceRequest) -> ObjectRef {
    ObjectRef {
        resource: r.resource.clone(),
        namespace: r.namespace.clone().unwrap_or_default(),
        name: r.name.clone().unwrap_or_default(),
        api_group: r.group.clone(),
        api_version: r.version.clone(),
        subresource: r.subresource.clone().unwrap_or_default(),
        ..ObjectRef::default()
    }
}

/// Fills the empty fields of `object_ref` from an object's `metadata`.
fn fill_object_ref(object_ref: &mut ObjectRef, metadata: &Value) {
    let fields = [
        (&mut object_ref.namespace, "namespace"),
        (&mut object_ref.name, "name"),
        (&mut object_ref.uid, "uid"),
        (&mut object_ref.resource_version, "resourceVersion"),
    ];
    for (field, key) in fields {
        if field.is_empty() {
            if let Some(value) = metadata[key].as_str() {
                value.clone_into(field);
            }
        }
    }
}

/// The request body's part of the event: the object's identity for a create or update, and
/// at `Request` and above the body itself. A protobuf body (kubectl sends built-in kinds so) is
/// decoded to the JSON form the event records.
fn record_request_body(
    event: &mut Event,
    r: &ResourceRequest,
    body: &Bytes,
    protobuf: bool,
    decision: Decision,
) {
    let writes_object = matches!(r.verb, Verb::Create | Verb::Update);
    let wants_body = decision.level >= Level::Request
        && matches!(
            r.verb,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
        );
    if !(writes_object || wants_body) {
        return;
    }
    if protobuf {
        let Ok(mut object) = crate::protobuf::decode(body) else {
            return;
        };
        if writes_object {
            if let Some(object_ref) = event.object_ref.as_mut() {
                fill_object_ref(object_ref, &object["metadata"]);
            }
        }
        if wants_body {
            if decision.omit_managed_fields {
                strip_managed_fields(&mut object);
            }
            event.request_object = Some(object);
        }
        return;
    }
    if !body.trim_ascii_start().starts_with(b"{") {
        return;
    }
    if !wants_body {
        #[derive(serde::Deserialize)]
        struct Head {
            #[serde(default)]
            metadata: Value,
        }
        if let (Ok(head), Some(object_ref)) = (
            serde_json::from_slice::<Head>(body),
            event.object_ref.as_mut(),
        ) {
            fill_object_ref(object_ref, &head.metadata);
        }
        return;
    }
    let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    if writes_object {
        if let Some(object_ref) = event.object_ref.as_mut() {
            fill_object_ref(object_ref, &object["metadata"]);
        }
    }
    if decision.omit_managed_fields {
        strip_managed_fields(&mut object);
    }
    event.request_object = Some(object);
}

/// Removes `metadata.managedFields` from an object, or from each item of a list.
fn strip_managed_fields(body: &mut Value) {
    if let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    if let Some(items) = body.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            strip_managed_fields(item);
        }
    }
}

/// kube's source IPs: those of `X-Forwarded-For`, then `X-Real-Ip`, then the peer's address,
/// each once.
fn source_ips(headers: &http::HeaderMap, extensions: &http::Extensions) -> Vec<String> {
    let mut ips: Vec<String> = Vec::new();
    let mut add = |ip: &str| {
        let ip = ip.trim();
        if ip.parse::<std::net::IpAddr>().is_ok() && !ips.iter().any(|known| known == ip) {
            ips.push(ip.to_owned());
        }
    };
    if let Some(forwarded) = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        forwarded.split(',').for_each(&mut add);
    }
    if let Some(real) = headers.get("x-real-ip").and_then(|v| v.to_str().ok()) {
        add(real);
    }
    if let Some(PeerAddr(peer)) = extensions.get::<PeerAddr>() {
        add(&peer.ip().to_canonical().to_string());
    }
    ips
}

fn user_agent(headers: &http::HeaderMap) -> String {
    let agent = headers
        .get(http::header::USER_AGENT)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    if agent.len() <= MAX_USER_AGENT {
        return agent;
    }
    let mut cut = MAX_USER_AGENT;
    while !agent.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...TRUNCATED", &agent[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_ips_should_list_forwarded_then_real_then_peer_once_each() {
        let mut request = Request::builder()
            .uri("/api")
            .header("x-forwarded-for", "10.0.0.1, 10.0.0.2, bogus")
            .header("x-real-ip", "10.0.0.2")
            .body(Bytes::new())
            .unwrap();
        request
            .extensions_mut()
            .insert(PeerAddr("[::ffff:127.0.0.1]:5000".parse().unwrap()));
        assert_eq!(
            source_ips(request.headers(), request.extensions()),
            ["10.0.0.1", "10.0.0.2", "127.0.0.1"]
        );
    }

    #[test]
    fn a_long_user_agent_should_be_truncated_and_marked() {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::USER_AGENT, "k".repeat(2000).parse().unwrap());
        let agent = user_agent(&headers);
        assert_eq!(agent.len(), MAX_USER_AGENT + "...TRUNCATED".len());
        assert!(agent.ends_with("k...TRUNCATED"));
    }

    #[test]
    fn managed_fields_should_be_stripped_from_objects_and_list_items() {
        let mut list = serde_json::json!({
            "metadata": {"managedFields": [1], "resourceVersion": "3"},
            "items": [{"metadata": {"name": "a", "managedFields": [2]}}],
        });
        strip_managed_fields(&mut list);
        assert_eq!(
            list,
            serde_json::json!({
                "metadata": {"resourceVersion": "3"},
                "items": [{"metadata": {"name": "a"}}],
            })
        );
    }
}
