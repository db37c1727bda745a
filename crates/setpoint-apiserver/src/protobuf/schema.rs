//! The shape of the static descriptor tables: per protobuf message, its fields by number, each
//! with the JSON name Kubernetes gives it, its type, and whether Go's JSON encoding would keep
//! it at its zero value.
//!
//! The tables themselves are generated from Kubernetes' Go types by `scripts/gen-protobuf-tables`
//! (into `generated/`), every field of every message reachable from the kinds Setpoint decodes;
//! a field a table does not list is rejected, never dropped.

/// One protobuf message type.
#[derive(Debug)]
pub(crate) struct Message {
    /// The message's name in its `.proto` file (`ObjectMeta`), for error messages.
    pub(crate) name: &'static str,
    /// The fields decoded, each field number at most once.
    pub(crate) fields: &'static [Field],
}

impl Message {
    /// The field with this number, if the table lists it.
    pub(crate) fn field(&self, number: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.number == number)
    }
}

/// One field of a message.
#[derive(Debug)]
pub(crate) struct Field {
    /// The protobuf field number.
    pub(crate) number: u32,
    /// The JSON field name (`creationTimestamp`).
    pub(crate) json: &'static str,
    /// The type of the value, or of each element of a repeated field or map.
    pub(crate) kind: Kind,
    /// Single value, list or map.
    pub(crate) shape: Shape,
    /// For a single scalar: whether a zero value (`""`, `0`, `false`, no bytes) appears in the
    /// JSON. True where Go's struct field is a pointer or has no `omitempty`; Kubernetes'
    /// protobuf writes every non-pointer scalar, so without this flag each empty string would
    /// become `""` in JSON where Go's encoder would leave the field out.
    pub(crate) keep_zero: bool,
}

/// The type of a field's value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// `string`: a JSON string.
    String,
    /// `bytes`: a base64 (standard, padded) JSON string, as Go encodes `[]byte`.
    Bytes,
    /// `bool`.
    Bool,
    /// `int32`: a JSON number.
    Int32,
    /// `int64`: a JSON number.
    Int64,
    /// An embedded message: a JSON object.
    Message(&'static Message),
    /// `meta.v1.Time` {seconds = 1, nanos = 2}: an RFC 3339 string in UTC to the second; the
    /// zero time is left out.
    Time,
    /// `meta.v1.MicroTime` {seconds = 1, nanos = 2}: an RFC 3339 string in UTC to the
    /// microsecond; the zero time is left out.
    MicroTime,
    /// `meta.v1.FieldsV1` or `runtime.RawExtension` {raw = 1}: `raw` holds JSON, which is the
    /// value itself.
    RawJson,
    /// `util.intstr.IntOrString` {type = 1, intVal = 2, strVal = 3}: a JSON number (type 0)
    /// or string (type 1).
    IntOrString,
    /// `api.resource.Quantity` {string = 1}: a JSON string.
    Quantity,
    /// A named list of strings, which protobuf wraps as {items = 1 (repeated)}
    /// (`ExtraValue`): a JSON array of strings.
    StringList,
}

/// How many values a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `optional`: one value; a repeated occurrence replaces a scalar and merges a message.
    Single,
    /// `repeated`: a JSON array, left out when empty.
    Repeated,
    /// `map<string, kind>`: a JSON object, left out when empty.
    Map,
    /// An embedded Go struct inlined in JSON (`json:",inline"`, a `Volume`'s `VolumeSource`):
    /// a message whose fields go into the enclosing JSON object.
    Inline,
}

/// A single field Go tags `omitempty` (non-pointer): left out of the JSON at its zero value.
pub(crate) const fn field(number: u32, json: &'static str, kind: Kind) -> Field {
    Field {
        number,
        json,
        kind,
        shape: Shape::Single,
        keep_zero: false,
    }
}

/// A single field kept in the JSON even at its zero value: a Go pointer (`*int32`, set to 0 on
/// purpose) or a field without `omitempty` (a container's `name`).
pub(crate) const fn kept(number: u32, json: &'static str, kind: Kind) -> Field {
    Field {
        number,
        json,
        kind,
        shape: Shape::Single,
        keep_zero: true,
    }
}

/// A repeated field.
pub(crate) const fn list(number: u32, json: &'static str, kind: Kind) -> Field {
    Field {
        number,
        json,
        kind,
        shape: Shape::Repeated,
        keep_zero: true,
    }
}

/// A `map<string, kind>` field.
pub(crate) const fn map(number: u32, json: &'static str, kind: Kind) -> Field {
    Field {
        number,
        json,
        kind,
        shape: Shape::Map,
        keep_zero: true,
    }
}

/// An inlined message field (`json:",inline"`).
pub(crate) const fn inline(number: u32, kind: Kind) -> Field {
    Field {
        number,
        json: "",
        kind,
        shape: Shape::Inline,
        keep_zero: true,
    }
}
