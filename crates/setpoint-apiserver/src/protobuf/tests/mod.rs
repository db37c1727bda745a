//! Protobuf bodies built by hand, field by field as client-go's generated marshalling writes
//! them (every non-pointer scalar present, even when empty), decoded and compared with the
//! JSON kubectl would have sent.

mod kinds;
mod kubectl_bodies;
mod malformed;
mod values;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use setpoint_core::ApiError;

use super::decode::decode_message;
use super::schema::{field, kept, list, map, Kind, Message};
use super::{decode, ProtobufError};
use crate::protobuf::wire::WireError;

/// A tiny protobuf encoder: a message under construction.
#[derive(Clone, Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn new() -> Self {
        Enc::default()
    }

    fn key(&mut self, number: u32, wire_type: u8) {
        put_varint(&mut self.0, (u64::from(number) << 3) | u64::from(wire_type));
    }

    /// A varint field (int32, int64, bool); negative numbers are sign-extended to 10 bytes.
    fn int(mut self, number: u32, v: i64) -> Self {
        self.key(number, 0);
        put_varint(&mut self.0, v as u64);
        self
    }

    fn bytes(mut self, number: u32, b: &[u8]) -> Self {
        self.key(number, 2);
        put_varint(&mut self.0, b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    fn str(self, number: u32, s: &str) -> Self {
        self.bytes(number, s.as_bytes())
    }

    fn msg(self, number: u32, m: Enc) -> Self {
        self.bytes(number, &m.0)
    }

    /// A `map<string, string>` entry.
    fn entry(self, number: u32, k: &str, v: &str) -> Self {
        self.msg(number, Enc::new().str(1, k).str(2, v))
    }

    /// A `map<string, bytes>` entry.
    fn bytes_entry(self, number: u32, k: &str, v: &[u8]) -> Self {
        self.msg(number, Enc::new().str(1, k).bytes(2, v))
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The whole body: magic, then `runtime.Unknown` around `raw`.
fn body(api_version: &str, kind: &str, raw: Enc) -> Vec<u8> {
    let unknown = Enc::new()
        .msg(1, Enc::new().str(1, api_version).str(2, kind))
        .msg(2, raw)
        .str(3, "")
        .str(4, "");
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.0);
    out
}

/// `ObjectMeta` as Go writes it for a new object: every string, `generation` and an empty
/// `creationTimestamp`, then the maps.
fn object_meta(name: &str, labels: &[(&str, &str)]) -> Enc {
    let mut m = Enc::new()
        .str(1, name)
        .str(2, "")
        .str(3, "")
        .str(4, "")
        .str(5, "")
        .str(6, "")
        .int(7, 0)
        .msg(8, Enc::new());
    for (k, v) in labels {
        m = m.entry(11, k, v);
    }
    m
}

/// A container as `kubectl create deployment`/`run` build it.
fn container(name: &str, image: &str) -> Enc {
    Enc::new()
        .str(1, name)
        .str(2, image)
        .str(5, "")
        .msg(8, Enc::new())
        .str(13, "")
        .str(14, "")
        .int(16, 0)
        .int(17, 0)
        .int(18, 0)
        .str(20, "")
}

fn decoded(b: &[u8]) -> Value {
    match decode(b) {
        Ok(v) => v,
        Err(e) => panic!("decode failed: {e}"),
    }
}

fn decode_err(b: &[u8]) -> ProtobufError {
    match decode(b) {
        Ok(v) => panic!("decode succeeded: {v}"),
        Err(e) => e,
    }
}

/// A table with every kind and shape, for what the Kubernetes tables do not exercise.
static EVERYTHING: Message = Message {
    name: "Everything",
    fields: &[
        field(1, "i32", Kind::Int32),
        kept(2, "i64", Kind::Int64),
        list(3, "ints", Kind::Int32),
        list(4, "flags", Kind::Bool),
        map(5, "quantities", Kind::Quantity),
        field(6, "bytes", Kind::Bytes),
        field(7, "ios", Kind::IntOrString),
    ],
};
