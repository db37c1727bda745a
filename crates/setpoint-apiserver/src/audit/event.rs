//! One audit record: kube's `audit.k8s.io/v1` `Event`, its `Level`s and `Stage`s, serialized
//! with kube's field names and order (one JSON object per line in the log). Timestamps are
//! kube's `MicroTime`: RFC 3339 in UTC with six fractional digits.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize, Serializer};

use crate::auth::User;

/// How much of a request is recorded; ordered from least to most.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    /// Not recorded.
    None,
    /// Who, what, when and the answer's code; no bodies.
    Metadata,
    /// Metadata and the request body.
    Request,
    /// Metadata, the request body and the response body.
    RequestResponse,
}

impl Level {
    /// Kube's name of the level.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// When in a request's life an event is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) enum Stage {
    /// As soon as the request is received, before it is handled.
    RequestReceived,
    /// When the head of a long-running answer (watch, logs, exec) is sent, before its body.
    ResponseStarted,
    /// When the answer is complete.
    ResponseComplete,
    /// When the handler panicked.
    Panic,
}

/// A user as the audit log names it (kube's `authentication.k8s.io/v1` `UserInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct UserInfo {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) username: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) uid: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) groups: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) extra: BTreeMap<String, Vec<String>>,
}

impl From<&User> for UserInfo {
    fn from(user: &User) -> Self {
        UserInfo {
            username: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
        }
    }
}

/// The object a resource request is about.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectRef {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) uid: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) api_group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) resource_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) subresource: String,
}

/// The answer, as a `Status` (kube's `metav1.Status`, bounded: no details beyond these).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct ResponseStatus {
    /// Always `{}`, as kube writes it.
    pub(crate) metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) details: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) code: u16,
}

fn is_zero(code: &u16) -> bool {
    *code == 0
}

impl ResponseStatus {
    /// A status carrying only `code`.
    pub(crate) fn code(code: u16) -> Self {
        ResponseStatus {
            code,
            ..Self::default()
        }
    }
}

/// An audit event.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Event {
    /// `Event`.
    pub(crate) kind: &'static str,
    /// `audit.k8s.io/v1`.
    pub(crate) api_version: &'static str,
    pub(crate) level: Level,
    #[serde(rename = "auditID")]
    pub(crate) audit_id: String,
    pub(crate) stage: Stage,
    #[serde(rename = "requestURI")]
    pub(crate) request_uri: String,
    pub(crate) verb: String,
    /// Who sent the request (empty when it was not authenticated).
    pub(crate) user: UserInfo,
    /// Whom the sender impersonated, if anyone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) impersonated_user: Option<UserInfo>,
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub(crate) source_ips: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) user_agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) object_ref: Option<ObjectRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) response_status: Option<ResponseStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) request_object: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) response_object: Option<serde_json::Value>,
    #[serde(serialize_with = "micro_time")]
    pub(crate) request_received_timestamp: DateTime<Utc>,
    #[serde(serialize_with = "micro_time")]
    pub(crate) stage_timestamp: DateTime<Utc>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) annotations: BTreeMap<String, String>,
}

impl Event {
    /// A new event at `level` for the request `audit_id`, received at `received`; the caller
    /// fills in the rest.
    pub(crate) fn new(level: Level, audit_id: String, received: DateTime<Utc>) -> Event {
        Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level,
            audit_id,
            stage: Stage::RequestReceived,
            request_uri: String::new(),
            verb: String::new(),
            user: UserInfo::default(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: received,
            stage_timestamp: received,
            annotations: BTreeMap::new(),
        }
    }

    /// The event as one line of the log: JSON and a newline.
    pub(crate) fn to_line(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut line = serde_json::to_vec(self)?;
        line.push(b'\n');
        Ok(line)
    }
}

/// Kube's `MicroTime`: `2006-01-02T15:04:05.000000Z`.
fn micro_time<S: Serializer>(time: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&time.format("%Y-%m-%dT%H:%M:%S%.6fZ"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_should_serialize_with_kubes_names_and_order() {
        let received = DateTime::parse_from_rfc3339("2026-11-28T06:00:00.1234567Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut event = Event::new(Level::Metadata, "id-1".to_owned(), received);
        event.stage = Stage::ResponseComplete;
        event.request_uri = "/api/v1/namespaces/default/configmaps".to_owned();
        event.verb = "create".to_owned();
        event.user = UserInfo::from(&User::new("alice", ["dev".to_owned()]));
        event.source_ips = vec!["127.0.0.1".to_owned()];
        event.object_ref = Some(ObjectRef {
            resource: "configmaps".to_owned(),
            namespace: "default".to_owned(),
            name: "demo".to_owned(),
            api_version: "v1".to_owned(),
            ..ObjectRef::default()
        });
        event.response_status = Some(ResponseStatus::code(201));
        let line = String::from_utf8(event.to_line().unwrap()).unwrap();
        assert_eq!(
            line,
            concat!(
                r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"id-1","#,
                r#""stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/configmaps","#,
                r#""verb":"create","user":{"username":"alice","groups":["dev","system:authenticated"]},"#,
                r#""sourceIPs":["127.0.0.1"],"objectRef":{"resource":"configmaps","namespace":"default","#,
                r#""name":"demo","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"#,
                r#""requestReceivedTimestamp":"2026-11-28T06:00:00.123456Z","#,
                r#""stageTimestamp":"2026-11-28T06:00:00.123456Z"}"#,
                "\n"
            )
        );
    }

    #[test]
    fn levels_should_be_ordered_from_none_to_request_response() {
        assert!(Level::None < Level::Metadata);
        assert!(Level::Metadata < Level::Request);
        assert!(Level::Request < Level::RequestResponse);
    }
}
