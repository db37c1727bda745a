//! Request bodies in Kubernetes protobuf (`application/vnd.kubernetes.protobuf`), decoded into
//! the JSON object the rest of the server handles. kubectl's generators (`create namespace`,
//! `create configmap|secret|serviceaccount|service|deployment`, `run`) send their objects this
//! way, through client-go's typed clients.
//!
//! A body is the 4 magic bytes `k8s\0` and a `runtime.Unknown` {typeMeta = 1 {apiVersion = 1,
//! kind = 2}, raw = 2, contentEncoding = 3, contentType = 4} whose `raw` is the typed message.
//! [`decode()`] reads it (`envelope.rs`) with a hand-written wire reader (`wire.rs`) driven by
//! static descriptor tables (`schema.rs`), generated from Kubernetes' Go types by
//! `scripts/gen-protobuf-tables` into `generated/` (one module per API package, every field of
//! every message the kinds below reach), and promises:
//! - the JSON is what Go's `encoding/json` would write for the same object, with `apiVersion`
//!   and `kind` from the envelope (see `decode.rs` for the rules);
//! - a field the tables do not list is an error ([`ProtobufError::UnsupportedField`], 400),
//!   never silently dropped;
//! - a kind without tables ([`ProtobufError::UnsupportedKind`]) or an encoded `raw`
//!   ([`ProtobufError::UnsupportedEncoding`]) is a 415 that asks for JSON;
//! - malformed input is an error, never a panic.
//!
//! Kinds with tables: every built-in kind Setpoint serves (v1 Namespace, Pod, Node, ConfigMap,
//! Secret, ServiceAccount, Service, Event, Binding; events.k8s.io/v1 Event;
//! coordination.k8s.io/v1 Lease; apps/v1 Deployment, ReplicaSet; autoscaling/v1
//! HorizontalPodAutoscaler and Scale; autoscaling/v2 HorizontalPodAutoscaler), policy/v1 and
//! v1beta1 `Eviction` (`kubectl drain`), and `DeleteOptions` under any `apiVersion` (client-go
//! sends it as the body of a typed client's DELETE).
//!
//! The tables are those of Kubernetes 1.36 (`k8s.io/api` v0.36.3), a superset of what kubectl
//! 1.27–1.33 send, except one alpha field since removed: `PodResourceClaim.source` (2, dynamic
//! resource allocation before 1.31), which is refused like any unknown field.

mod decode;
mod envelope;
mod generated;
mod schema;
mod wire;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value};
use setpoint_core::{ApiError, Reason};
use thiserror::Error;

use self::envelope::Envelope;
use self::wire::WireError;

/// The media type of Kubernetes protobuf bodies.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a protobuf body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("the body does not start with the Kubernetes protobuf prefix \"k8s\\x00\"")]
    MissingMagic,
    /// The envelope has no `typeMeta.kind`.
    #[error("the protobuf envelope names no kind")]
    MissingKind,
    /// No descriptor tables for this kind.
    #[error("protobuf request bodies are not supported for {api_version}, Kind={kind}; send JSON (application/json) instead")]
    UnsupportedKind {
        /// The envelope's `apiVersion`.
        api_version: String,
        /// The envelope's `kind`.
        kind: String,
    },
    /// `raw` is compressed or not protobuf (client-go sets neither).
    #[error("protobuf envelopes with contentEncoding {encoding:?} and contentType {content_type:?} are not supported; send JSON (application/json) instead")]
    UnsupportedEncoding {
        /// The envelope's `contentEncoding`.
        encoding: String,
        /// The envelope's `contentType`.
        content_type: String,
    },
    /// A field number the message's table does not list.
    #[error("unsupported field {number} in protobuf message {message}; send JSON instead")]
    UnsupportedField {
        /// The message's name.
        message: &'static str,
        /// The field number.
        number: u32,
    },
    /// The bytes of a message are not valid protobuf.
    #[error("malformed protobuf message {message}: {problem}")]
    Malformed {
        /// The message's name.
        message: &'static str,
        /// What is wrong.
        problem: WireError,
    },
    /// A known field arrived with a wire type its type cannot have.
    #[error("field {number} of protobuf message {message} has the wrong wire type ({got})")]
    WrongWireType {
        /// The message's name.
        message: &'static str,
        /// The field number.
        number: u32,
        /// The wire type that arrived.
        got: &'static str,
    },
    /// A string field is not UTF-8.
    #[error("field {number} of protobuf message {message} is not valid UTF-8")]
    InvalidUtf8 {
        /// The message's name.
        message: &'static str,
        /// The field number.
        number: u32,
    },
    /// A well-formed value that means nothing (an `IntOrString` of type 7).
    #[error("invalid {message}: {problem}")]
    InvalidValue {
        /// The message's name.
        message: &'static str,
        /// What is wrong.
        problem: String,
    },
}

impl From<ProtobufError> for ApiError {
    fn from(e: ProtobufError) -> Self {
        match e {
            ProtobufError::UnsupportedKind { .. } | ProtobufError::UnsupportedEncoding { .. } => {
                ApiError::new(Reason::UnsupportedMediaType, e.to_string())
            }
            _ => ApiError::bad_request(format!(
                "the request body is not a valid Kubernetes protobuf object: {e}"
            )),
        }
    }
}

/// Decodes a Kubernetes protobuf request body into a JSON object carrying `apiVersion` and
/// `kind` from the envelope.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = Envelope::decode(body)?;
    if envelope.kind.is_empty() {
        return Err(ProtobufError::MissingKind);
    }
    let mut object = match (
        envelope.content_encoding.as_str(),
        envelope.content_type.as_str(),
    ) {
        ("", "" | MEDIA_TYPE) => {
            let message =
                generated::root(&envelope.api_version, &envelope.kind).ok_or_else(|| {
                    ProtobufError::UnsupportedKind {
                        api_version: envelope.api_version.clone(),
                        kind: envelope.kind.clone(),
                    }
                })?;
            decode::decode_message(envelope.raw, message)?
        }
        (encoding, content_type) => {
            return Err(ProtobufError::UnsupportedEncoding {
                encoding: encoding.to_owned(),
                content_type: content_type.to_owned(),
            })
        }
    };
    let mut out = Map::new();
    if !envelope.api_version.is_empty() {
        out.insert("apiVersion".to_owned(), Value::String(envelope.api_version));
    }
    out.insert("kind".to_owned(), Value::String(envelope.kind));
    out.append(&mut object);
    Ok(Value::Object(out))
}
