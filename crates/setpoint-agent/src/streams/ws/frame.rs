//! RFC 6455 frame codec: reading a frame header (and unmasking its payload), encoding a
//! server frame header. Server frames are never masked; client frames always are.

use tokio::io::{AsyncRead, AsyncReadExt as _};

use super::WsError;

/// A frame's opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opcode {
    /// A further fragment of the message in progress.
    Continuation,
    /// A UTF-8 text message (or its first fragment).
    Text,
    /// A binary message (or its first fragment).
    Binary,
    /// Close, with an optional code and reason.
    Close,
    /// Ping: answered with a pong carrying the same payload.
    Ping,
    /// Pong.
    Pong,
}

impl Opcode {
    fn from_bits(bits: u8) -> Option<Self> {
        Some(match bits {
            0x0 => Self::Continuation,
            0x1 => Self::Text,
            0x2 => Self::Binary,
            0x8 => Self::Close,
            0x9 => Self::Ping,
            0xA => Self::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            Self::Continuation => 0x0,
            Self::Text => 0x1,
            Self::Binary => 0x2,
            Self::Close => 0x8,
            Self::Ping => 0x9,
            Self::Pong => 0xA,
        }
    }

    /// Close, ping and pong: never fragmented, at most 125 bytes, allowed between fragments.
    pub(crate) fn is_control(self) -> bool {
        matches!(self, Self::Close | Self::Ping | Self::Pong)
    }
}

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    /// The last fragment of its message.
    pub(crate) fin: bool,
    /// What the frame carries.
    pub(crate) opcode: Opcode,
    /// The masking key (clients must mask).
    pub(crate) mask: Option<[u8; 4]>,
    /// Payload length in bytes.
    pub(crate) len: u64,
}

/// Reads one frame header; `None` at a clean end of input before any byte of it.
pub(crate) async fn read_header<R: AsyncRead + Unpin>(
    reader: &mut R,
) -> Result<Option<FrameHeader>, WsError> {
    let mut head = [0u8; 2];
    match reader.read(&mut head[..1]).await? {
        0 => return Ok(None),
        _ => reader.read_exact(&mut head[1..]).await?,
    };
    if head[0] & 0x70 != 0 {
        return Err(WsError::Protocol("reserved bits set"));
    }
    let fin = head[0] & 0x80 != 0;
    let opcode = Opcode::from_bits(head[0] & 0x0F).ok_or(WsError::Protocol("unknown opcode"))?;
    let masked = head[1] & 0x80 != 0;
    let len = match head[1] & 0x7F {
        126 => u64::from(reader.read_u16().await?),
        127 => reader.read_u64().await?,
        n => u64::from(n),
    };
    let mask = if masked {
        let mut key = [0u8; 4];
        reader.read_exact(&mut key).await?;
        Some(key)
    } else {
        None
    };
    if opcode.is_control() && (!fin || len > 125) {
        return Err(WsError::Protocol("fragmented or oversized control frame"));
    }
    Ok(Some(FrameHeader {
        fin,
        opcode,
        mask,
        len,
    }))
}

/// Encodes an unmasked (server) frame header for a payload of `len` bytes; returns the buffer
/// and how many of its bytes are used.
pub(crate) fn encode_header(fin: bool, opcode: Opcode, len: usize) -> ([u8; 10], usize) {
    let mut out = [0u8; 10];
    out[0] = (if fin { 0x80 } else { 0 }) | opcode.bits();
    let used = if len < 126 {
        // `len < 126` fits the 7-bit field.
        out[1] = u8::try_from(len).unwrap_or(0);
        2
    } else if let Ok(short) = u16::try_from(len) {
        out[1] = 126;
        out[2..4].copy_from_slice(&short.to_be_bytes());
        4
    } else {
        out[1] = 127;
        out[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    (out, used)
}

/// XORs `data` with `mask`, `offset` bytes into the masked payload (so a payload can be
/// unmasked in pieces). Works eight bytes at a time.
pub(crate) fn apply_mask(data: &mut [u8], mask: [u8; 4], offset: usize) {
    let mut rotated = [0u8; 4];
    for (i, byte) in rotated.iter_mut().enumerate() {
        *byte = mask[(offset + i) % 4];
    }
    let wide = u64::from_ne_bytes([
        rotated[0], rotated[1], rotated[2], rotated[3], rotated[0], rotated[1], rotated[2],
        rotated[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(word) ^ wide).to_ne_bytes());
    }
    for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= rotated[i % 4];
    }
}
