//! The envelope of every Kubernetes protobuf body: the magic bytes `k8s\0`, then a
//! `runtime.Unknown` {typeMeta = 1, raw = 2, contentEncoding = 3, contentType = 4} whose
//! `typeMeta` is a `runtime.TypeMeta` {apiVersion = 1, kind = 2} (numbers from apimachinery's
//! `pkg/runtime/generated.proto`; note `meta.v1.TypeMeta` numbers them the other way round).

use super::decode::{expect_len, expect_string, next, unsupported};
use super::schema::Message;
use super::wire::Reader;
use super::ProtobufError;

/// What every Kubernetes protobuf body starts with.
const MAGIC: &[u8; 4] = b"k8s\0";

/// A decoded envelope. Absent fields are empty.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Envelope<'a> {
    /// `typeMeta.apiVersion` (`apps/v1`).
    pub(crate) api_version: String,
    /// `typeMeta.kind` (`Deployment`).
    pub(crate) kind: String,
    /// The typed object's bytes.
    pub(crate) raw: &'a [u8],
    /// How `raw` is compressed; client-go never sets it.
    pub(crate) content_encoding: String,
    /// What `raw` is; empty means protobuf as client-go writes it.
    pub(crate) content_type: String,
}

/// Names for the envelope's errors; its fields are decoded by hand.
static UNKNOWN: Message = Message {
    name: "Unknown",
    fields: &[],
};
static TYPE_META: Message = Message {
    name: "TypeMeta",
    fields: &[],
};

impl<'a> Envelope<'a> {
    /// Checks the magic bytes and decodes the `runtime.Unknown` after them.
    pub(crate) fn decode(body: &'a [u8]) -> Result<Self, ProtobufError> {
        let unknown = body
            .strip_prefix(MAGIC.as_slice())
            .ok_or(ProtobufError::MissingMagic)?;
        let mut envelope = Envelope::default();
        let mut reader = Reader::new(unknown);
        while let Some((number, value)) = next(&mut reader, &UNKNOWN)? {
            match number {
                1 => {
                    let mut type_meta = Reader::new(expect_len(&UNKNOWN, 1, value)?);
                    while let Some((number, value)) = next(&mut type_meta, &TYPE_META)? {
                        match number {
                            1 => envelope.api_version = expect_string(&TYPE_META, 1, value)?,
                            2 => envelope.kind = expect_string(&TYPE_META, 2, value)?,
                            _ => return Err(unsupported(&TYPE_META, number)),
                        }
                    }
                }
                2 => envelope.raw = expect_len(&UNKNOWN, 2, value)?,
                3 => envelope.content_encoding = expect_string(&UNKNOWN, 3, value)?,
                4 => envelope.content_type = expect_string(&UNKNOWN, 4, value)?,
                _ => return Err(unsupported(&UNKNOWN, number)),
            }
        }
        Ok(envelope)
    }
}
