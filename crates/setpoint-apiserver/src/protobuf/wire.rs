//! The protobuf wire format, read without a schema: a message is a sequence of fields, each a
//! varint key (field number and wire type) followed by a varint, 8 bytes, a length-delimited
//! byte string or 4 bytes. [`Reader`] walks those fields and never panics on malformed input:
//! every truncation, overlong varint, reserved field number or group wire type is a
//! [`WireError`].

use thiserror::Error;

/// What is wrong with the bytes of a protobuf message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum WireError {
    /// The input ends inside a field.
    #[error("the message ends inside a field")]
    Truncated,
    /// A varint runs over 10 bytes.
    #[error("a varint is longer than 10 bytes")]
    VarintTooLong,
    /// A field key carries field number 0 or one over 2^29 - 1.
    #[error("invalid field number {0}")]
    InvalidFieldNumber(u64),
    /// A field key carries a wire type this decoder does not read (groups: 3, 4) or that does
    /// not exist (6, 7).
    #[error("field {number} has unsupported wire type {wire_type}")]
    UnsupportedWireType {
        /// The field number.
        number: u32,
        /// The wire type from the key.
        wire_type: u8,
    },
}

/// The largest valid protobuf field number.
const MAX_FIELD_NUMBER: u64 = (1 << 29) - 1;

/// One field's value as it appears on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireValue<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1, little-endian.
    Fixed64(u64),
    /// Wire type 2: strings, bytes, embedded messages and packed repeated scalars.
    Len(&'a [u8]),
    /// Wire type 5, little-endian.
    Fixed32(u32),
}

impl WireValue<'_> {
    /// The wire type's name, for error messages.
    pub(crate) fn wire_type_name(&self) -> &'static str {
        match self {
            WireValue::Varint(_) => "varint",
            WireValue::Fixed64(_) => "64-bit",
            WireValue::Len(_) => "length-delimited",
            WireValue::Fixed32(_) => "32-bit",
        }
    }
}

/// Walks the fields of one protobuf message. Each call to [`Reader::next_field`] consumes one
/// field; after an error the reader's position is unspecified and it should be dropped.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    /// The bytes not yet read.
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over the whole of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    /// The next field's number and value, or `None` at the end of the input.
    pub(crate) fn next_field(&mut self) -> Result<Option<(u32, WireValue<'a>)>, WireError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 || number > MAX_FIELD_NUMBER {
            return Err(WireError::InvalidFieldNumber(number));
        }
        // In range of u32 by the check above.
        let number = number as u32;
        let value = match key & 7 {
            0 => WireValue::Varint(self.varint()?),
            1 => WireValue::Fixed64(u64::from_le_bytes(self.array::<8>()?)),
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len).map_err(|_| WireError::Truncated)?;
                if len > self.rest.len() {
                    return Err(WireError::Truncated);
                }
                let (bytes, rest) = self.rest.split_at(len);
                self.rest = rest;
                WireValue::Len(bytes)
            }
            5 => WireValue::Fixed32(u32::from_le_bytes(self.array::<4>()?)),
            other => {
                return Err(WireError::UnsupportedWireType {
                    number,
                    // `key & 7` fits in a u8.
                    wire_type: other as u8,
                });
            }
        };
        Ok(Some((number, value)))
    }

    /// Reads one varint (at most 10 bytes; bits past the 64th are dropped, as Go does).
    pub(crate) fn varint(&mut self) -> Result<u64, WireError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let (&byte, rest) = self.rest.split_first().ok_or(WireError::Truncated)?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError::VarintTooLong)
    }

    /// Whether every byte has been read.
    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        if self.rest.len() < N {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.rest.split_at(N);
        self.rest = rest;
        let mut out = [0u8; N];
        out.copy_from_slice(head);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_should_read_each_wire_type() {
        let bytes = [
            0x08, 0x96, 0x01, // 1: varint 150
            0x11, 1, 0, 0, 0, 0, 0, 0, 0, // 2: fixed64 1
            0x1a, 2, b'h', b'i', // 3: "hi"
            0x25, 2, 0, 0, 0, // 4: fixed32 2
        ];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.next_field(), Ok(Some((1, WireValue::Varint(150)))));
        assert_eq!(r.next_field(), Ok(Some((2, WireValue::Fixed64(1)))));
        assert_eq!(r.next_field(), Ok(Some((3, WireValue::Len(b"hi")))));
        assert_eq!(r.next_field(), Ok(Some((4, WireValue::Fixed32(2)))));
        assert_eq!(r.next_field(), Ok(None));
    }

    #[test]
    fn reader_should_reject_a_length_past_the_end() {
        let mut r = Reader::new(&[0x0a, 5, b'a']);
        assert_eq!(r.next_field(), Err(WireError::Truncated));
    }

    #[test]
    fn reader_should_reject_an_overlong_varint() {
        let mut r = Reader::new(&[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ]);
        assert_eq!(r.next_field(), Err(WireError::VarintTooLong));
    }

    #[test]
    fn reader_should_reject_field_number_zero_and_groups() {
        assert_eq!(
            Reader::new(&[0x00, 0x01]).next_field(),
            Err(WireError::InvalidFieldNumber(0))
        );
        assert_eq!(
            Reader::new(&[0x0b]).next_field(),
            Err(WireError::UnsupportedWireType {
                number: 1,
                wire_type: 3
            })
        );
    }

    #[test]
    fn reader_should_decode_a_negative_int32_from_ten_bytes() {
        let bytes = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        let mut r = Reader::new(&bytes);
        let Ok(Some((1, WireValue::Varint(v)))) = r.next_field() else {
            panic!("expected a varint");
        };
        assert_eq!(v as i64, -1);
    }
}
