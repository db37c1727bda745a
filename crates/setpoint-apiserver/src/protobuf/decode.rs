//! Decodes one protobuf message into a JSON object, driven by a descriptor table
//! ([`Message`]). The JSON is what Go's `encoding/json` would produce for the same Kubernetes
//! object: absent fields are absent, `omitempty` scalars at their zero value are left out
//! (Kubernetes' protobuf writes them anyway), messages that are present are kept even when
//! empty (`resources: {}`), and Kubernetes' special types get their JSON forms (`Time` as
//! RFC 3339, `IntOrString` as a number or string, `Quantity` as a string, `bytes` as base64).
//!
//! Protobuf semantics otherwise: a repeated occurrence of a single scalar replaces it, of a
//! single message merges into it; packed and unpacked repeated scalars are both read. The
//! tables are not recursive, so the nesting depth is bounded by them, not by the input.

use base64::Engine as _;
use serde_json::{Map, Value};

use super::schema::{Field, Kind, Message, Shape};
use super::wire::{Reader, WireValue};
use super::ProtobufError;

/// Seconds from the Unix epoch to Go's zero `time.Time` (0001-01-01T00:00:00Z).
const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// Decodes `bytes` as one `message` into a JSON object.
pub(crate) fn decode_message(
    bytes: &[u8],
    message: &'static Message,
) -> Result<Map<String, Value>, ProtobufError> {
    let mut out = Map::new();
    decode_into(bytes, message, &mut out)?;
    Ok(out)
}

/// Decodes `bytes` as `message`, merging into `out` (protobuf's rule for a message field that
/// occurs more than once).
fn decode_into(
    bytes: &[u8],
    message: &'static Message,
    out: &mut Map<String, Value>,
) -> Result<(), ProtobufError> {
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = next(&mut reader, message)? {
        let field = message
            .field(number)
            .ok_or_else(|| unsupported(message, number))?;
        match field.shape {
            Shape::Single => decode_single(message, field, value, out)?,
            Shape::Inline => {
                let Kind::Message(inner) = field.kind else {
                    return Err(unsupported(message, number));
                };
                decode_into(expect_len(message, number, value)?, inner, out)?;
            }
            Shape::Repeated => {
                let items = decode_repeated(message, field, value)?;
                if !items.is_empty() {
                    array_entry(out, field.json).extend(items);
                }
            }
            Shape::Map => {
                let bytes = expect_len(message, field.number, value)?;
                let (key, value) = decode_map_entry(message, field, bytes)?;
                object_entry(out, field.json).insert(key, value);
            }
        }
    }
    Ok(())
}

/// The reader's next field, wire errors attributed to `message`.
pub(crate) fn next<'a>(
    reader: &mut Reader<'a>,
    message: &'static Message,
) -> Result<Option<(u32, WireValue<'a>)>, ProtobufError> {
    reader
        .next_field()
        .map_err(|problem| ProtobufError::Malformed {
            message: message.name,
            problem,
        })
}

fn decode_single(
    message: &'static Message,
    field: &'static Field,
    value: WireValue<'_>,
    out: &mut Map<String, Value>,
) -> Result<(), ProtobufError> {
    if let Kind::Message(inner) = field.kind {
        let bytes = expect_len(message, field.number, value)?;
        return decode_into(bytes, inner, object_entry(out, field.json));
    }
    match decode_value(message, field, value)? {
        Some(v) if field.keep_zero || !is_zero(&v) => {
            out.insert(field.json.to_owned(), v);
        }
        _ => {
            out.remove(field.json);
        }
    }
    Ok(())
}

/// The elements one occurrence of a repeated field carries: one, or for a packed scalar
/// field, any number.
fn decode_repeated(
    message: &'static Message,
    field: &'static Field,
    value: WireValue<'_>,
) -> Result<Vec<Value>, ProtobufError> {
    let packable = matches!(field.kind, Kind::Bool | Kind::Int32 | Kind::Int64);
    let mut items = Vec::new();
    if let (true, WireValue::Len(bytes)) = (packable, value) {
        let mut reader = Reader::new(bytes);
        while !reader.is_empty() {
            let v = reader
                .varint()
                .map_err(|problem| ProtobufError::Malformed {
                    message: message.name,
                    problem,
                })?;
            items.extend(decode_value(message, field, WireValue::Varint(v))?);
        }
    } else {
        items.extend(decode_value(message, field, value)?);
    }
    Ok(items)
}

/// Decodes one value of `field.kind`; `None` for a value JSON leaves out (the zero `Time`).
fn decode_value(
    message: &'static Message,
    field: &'static Field,
    value: WireValue<'_>,
) -> Result<Option<Value>, ProtobufError> {
    let v = match field.kind {
        Kind::String => Value::String(expect_string(message, field.number, value)?),
        Kind::Bytes => Value::String(base64::engine::general_purpose::STANDARD.encode(expect_len(
            message,
            field.number,
            value,
        )?)),
        Kind::Bool => Value::Bool(expect_varint(message, field.number, value)? != 0),
        // Protobuf's int32 is the low 32 bits of the varint (negative ones are sign-extended).
        Kind::Int32 => Value::from(expect_varint(message, field.number, value)? as i32),
        Kind::Int64 => Value::from(expect_varint(message, field.number, value)? as i64),
        Kind::Message(inner) => Value::Object(decode_message(
            expect_len(message, field.number, value)?,
            inner,
        )?),
        Kind::Time => return decode_time(expect_len(message, field.number, value)?, false),
        Kind::MicroTime => return decode_time(expect_len(message, field.number, value)?, true),
        Kind::RawJson => decode_raw_json(expect_len(message, field.number, value)?)?,
        Kind::IntOrString => decode_int_or_string(expect_len(message, field.number, value)?)?,
        Kind::Quantity => decode_quantity(expect_len(message, field.number, value)?)?,
        Kind::StringList => decode_string_list(expect_len(message, field.number, value)?)?,
    };
    Ok(Some(v))
}

/// A map entry is a message {key = 1, value = 2}; a missing part is its zero value.
fn decode_map_entry(
    message: &'static Message,
    field: &'static Field,
    bytes: &[u8],
) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut val = None;
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = next(&mut reader, message)? {
        match number {
            1 => key = expect_string(message, field.number, value)?,
            2 => val = decode_value(message, field, value)?,
            _ => return Err(unsupported(message, field.number)),
        }
    }
    Ok((key, val.unwrap_or_else(|| zero_value(field.kind))))
}

/// `meta.v1.Time` (or, with `micro`, `MicroTime`): Go's zero time (an empty message) is left
/// out, as `omitempty` would on a pointer and as `null` means on a struct.
fn decode_time(bytes: &[u8], micro: bool) -> Result<Option<Value>, ProtobufError> {
    let mut seconds: i64 = 0;
    let mut nanos: i64 = 0;
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = next(&mut reader, &TIME)? {
        match (number, value) {
            (1, WireValue::Varint(v)) => seconds = v as i64,
            (2, WireValue::Varint(v)) => nanos = i64::from(v as i32),
            (1 | 2, other) => return Err(wrong_wire_type(&TIME, number, other)),
            _ => return Err(unsupported(&TIME, number)),
        }
    }
    if bytes.is_empty() || (seconds == GO_ZERO_TIME_SECONDS && nanos == 0) {
        return Ok(None);
    }
    let time = u32::try_from(nanos)
        .ok()
        .and_then(|n| chrono::DateTime::from_timestamp(seconds, n))
        .ok_or(ProtobufError::InvalidValue {
            message: TIME.name,
            problem: format!("seconds {seconds} and nanos {nanos} are not a valid time"),
        })?;
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(Some(Value::String(time.format(format).to_string())))
}

/// `meta.v1.FieldsV1` and `runtime.RawExtension`: the JSON in `raw` (an absent `raw` is an
/// empty object).
fn decode_raw_json(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut raw: &[u8] = b"{}";
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = next(&mut reader, &RAW)? {
        match number {
            1 => raw = expect_len(&RAW, 1, value)?,
            _ => return Err(unsupported(&RAW, number)),
        }
    }
    serde_json::from_slice(raw).map_err(|e| ProtobufError::InvalidValue {
        message: RAW.name,
        problem: format!("raw is not JSON: {e}"),
    })
}

/// `util.intstr.IntOrString`.
fn decode_int_or_string(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut kind: i64 = 0;
    let mut int_val: i32 = 0;
    let mut str_val = String::new();
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = next(&mut reader, &INT_OR_STRING)? {
        match (number, value) {
            (1, WireValue::Varint(v)) => kind = v as i64,
            (2, WireValue::Varint(v)) => int_val = v as i32,
            (3, value) => str_val = expect_string(&INT_OR_STRING, 3, value)?,
            (1 | 2, other) => return Err(wrong_wire_type(&INT_OR_STRING, number, other)),
            _ => return Err(unsupported(&INT_OR_STRING, number)),
        }
    }
    match kind {
        0 => Ok(Value::from(int_val)),
        1 => Ok(Value::String(str_val)),
        other => Err(ProtobufError::InvalidValue {
            message: INT_OR_STRING.name,
            problem: format!("type {other} is neither 0 (int) nor 1 (string)"),
        }),
    }
}

/// `api.resource.Quantity`: its string; Go writes the zero quantity as `"0"`.
fn decode_quantity(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut s = String::new();
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = next(&mut reader, &QUANTITY)? {
        match number {
            1 => s = expect_string(&QUANTITY, 1, value)?,
            _ => return Err(unsupported(&QUANTITY, number)),
        }
    }
    if s.is_empty() {
        s.push('0');
    }
    Ok(Value::String(s))
}

/// Names for the special types' errors; their fields are decoded by hand above.
static TIME: Message = Message {
    name: "Time",
    fields: &[],
};
static INT_OR_STRING: Message = Message {
    name: "IntOrString",
    fields: &[],
};
/// A named list of strings (`ExtraValue`): its items, as a JSON array.
fn decode_string_list(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut items = Vec::new();
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = next(&mut reader, &STRING_LIST)? {
        match number {
            1 => items.push(Value::String(expect_string(&STRING_LIST, 1, value)?)),
            _ => return Err(unsupported(&STRING_LIST, number)),
        }
    }
    Ok(Value::Array(items))
}

static STRING_LIST: Message = Message {
    name: "ExtraValue",
    fields: &[],
};
static QUANTITY: Message = Message {
    name: "Quantity",
    fields: &[],
};
static RAW: Message = Message {
    name: "FieldsV1",
    fields: &[],
};

fn zero_value(kind: Kind) -> Value {
    match kind {
        Kind::String | Kind::Bytes => Value::String(String::new()),
        Kind::Bool => Value::Bool(false),
        Kind::Int32 | Kind::Int64 | Kind::IntOrString => Value::from(0),
        Kind::Message(_) => Value::Object(Map::new()),
        Kind::Time | Kind::MicroTime => Value::Null,
        Kind::RawJson => Value::Object(Map::new()),
        Kind::Quantity => Value::String("0".to_owned()),
        Kind::StringList => Value::Array(Vec::new()),
    }
}

/// Whether `v` is the zero value of a scalar (what `omitempty` leaves out).
fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        _ => false,
    }
}

/// The bytes of a length-delimited field.
pub(crate) fn expect_len<'a>(
    message: &'static Message,
    number: u32,
    value: WireValue<'a>,
) -> Result<&'a [u8], ProtobufError> {
    match value {
        WireValue::Len(b) => Ok(b),
        other => Err(wrong_wire_type(message, number, other)),
    }
}

fn expect_varint(
    message: &'static Message,
    number: u32,
    value: WireValue<'_>,
) -> Result<u64, ProtobufError> {
    match value {
        WireValue::Varint(v) => Ok(v),
        other => Err(wrong_wire_type(message, number, other)),
    }
}

fn wrong_wire_type(message: &'static Message, number: u32, got: WireValue<'_>) -> ProtobufError {
    ProtobufError::WrongWireType {
        message: message.name,
        number,
        got: got.wire_type_name(),
    }
}

/// The value of a `string` field.
pub(crate) fn expect_string(
    message: &'static Message,
    number: u32,
    value: WireValue<'_>,
) -> Result<String, ProtobufError> {
    std::str::from_utf8(expect_len(message, number, value)?)
        .map(str::to_owned)
        .map_err(|_| ProtobufError::InvalidUtf8 {
            message: message.name,
            number,
        })
}

/// The unsupported-field error.
pub(crate) fn unsupported(message: &'static Message, number: u32) -> ProtobufError {
    ProtobufError::UnsupportedField {
        message: message.name,
        number,
    }
}

/// The object under `key`, created (or replacing a non-object) if needed.
fn object_entry<'m>(out: &'m mut Map<String, Value>, key: &str) -> &'m mut Map<String, Value> {
    let entry = out.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

/// The array under `key`, created (or replacing a non-array) if needed.
fn array_entry<'m>(out: &'m mut Map<String, Value>, key: &str) -> &'m mut Vec<Value> {
    let entry = out.entry(key).or_insert_with(|| Value::Array(Vec::new()));
    if !entry.is_array() {
        *entry = Value::Array(Vec::new());
    }
    match entry {
        Value::Array(a) => a,
        _ => unreachable!("just made an array"),
    }
}
