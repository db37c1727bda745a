//! SPDY/3.1 frames: reading any frame, encoding the ones a server sends. All integers are
//! big-endian; a control frame is `1|version(15)|type(16)|flags(8)|length(24)|payload`, a data
//! frame `0|stream-id(31)|flags(8)|length(24)|data`. Header blocks stay compressed here.

use bytes::{BufMut as _, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt as _};

use super::SpdyError;

/// The protocol version in every control frame.
const VERSION: u16 = 3;
/// FLAG_FIN: the sender's last frame on the stream.
pub(crate) const FLAG_FIN: u8 = 0x01;
/// The largest payload a frame's 24-bit length allows.
pub(crate) const MAX_PAYLOAD: usize = 0x00FF_FFFF;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// RST_STREAM status: the stream was cancelled.
pub(crate) const RST_CANCEL: u32 = 5;
/// RST_STREAM status: the stream was refused.
pub(crate) const RST_REFUSED: u32 = 3;

/// A frame read from the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A new stream from the peer, with its compressed header block.
    SynStream {
        /// Its id (odd: client-initiated).
        stream_id: u32,
        /// Half-closed by the sender at once.
        fin: bool,
        /// The compressed header block.
        headers: Bytes,
    },
    /// An answer to a stream we opened (never expected from a client).
    SynReply {
        /// Its id.
        stream_id: u32,
        /// The compressed header block.
        headers: Bytes,
    },
    /// More headers on a stream.
    Headers {
        /// Its id.
        stream_id: u32,
        /// The compressed header block.
        headers: Bytes,
    },
    /// The stream is aborted.
    RstStream {
        /// Its id.
        stream_id: u32,
        /// Why.
        status: u32,
    },
    /// Settings (ignored).
    Settings,
    /// A ping to echo.
    Ping(u32),
    /// The peer ends the session.
    GoAway {
        /// The last stream it processed.
        last_good: u32,
    },
    /// A window update (ignored: no flow control).
    WindowUpdate,
    /// Stream data.
    Data {
        /// Its stream.
        stream_id: u32,
        /// The sender's last frame on the stream.
        fin: bool,
        /// The bytes.
        data: Bytes,
    },
    /// A control frame of a type we do not know (ignored, as the spec says).
    Unknown,
}

/// Reads one frame; `None` at a clean end of input between frames.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
) -> Result<Option<Frame>, SpdyError> {
    let mut head = [0u8; 8];
    match reader.read(&mut head[..1]).await? {
        0 => return Ok(None),
        _ => reader.read_exact(&mut head[1..]).await?,
    };
    let flags = head[4];
    let len = usize::from(head[5]) << 16 | usize::from(head[6]) << 8 | usize::from(head[7]);
    let mut payload = BytesMut::zeroed(len);
    reader.read_exact(&mut payload).await?;
    let payload = payload.freeze();
    let word = |at: usize| -> Result<u32, SpdyError> {
        payload
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or(SpdyError::Protocol("short control frame"))
    };
    if head[0] & 0x80 == 0 {
        let stream_id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) & 0x7FFF_FFFF;
        return Ok(Some(Frame::Data {
            stream_id,
            fin: flags & FLAG_FIN != 0,
            data: payload,
        }));
    }
    let version = u16::from_be_bytes([head[0] & 0x7F, head[1]]);
    if version != VERSION {
        return Err(SpdyError::Protocol("unsupported SPDY version"));
    }
    let kind = u16::from_be_bytes([head[2], head[3]]);
    Ok(Some(match kind {
        SYN_STREAM => {
            let stream_id = word(0)? & 0x7FFF_FFFF;
            if payload.len() < 10 {
                return Err(SpdyError::Protocol("short SYN_STREAM"));
            }
            Frame::SynStream {
                stream_id,
                fin: flags & FLAG_FIN != 0,
                headers: payload.slice(10..),
            }
        }
        SYN_REPLY => Frame::SynReply {
            stream_id: word(0)? & 0x7FFF_FFFF,
            headers: payload.slice(4..),
        },
        HEADERS => Frame::Headers {
            stream_id: word(0)? & 0x7FFF_FFFF,
            headers: payload.slice(4..),
        },
        RST_STREAM => Frame::RstStream {
            stream_id: word(0)? & 0x7FFF_FFFF,
            status: word(4)?,
        },
        SETTINGS => Frame::Settings,
        PING => Frame::Ping(word(0)?),
        GOAWAY => Frame::GoAway {
            last_good: word(0)? & 0x7FFF_FFFF,
        },
        WINDOW_UPDATE => Frame::WindowUpdate,
        _ => Frame::Unknown,
    }))
}

fn control(out: &mut BytesMut, kind: u16, flags: u8, payload_len: usize) {
    out.put_u16(0x8000 | VERSION);
    out.put_u16(kind);
    out.put_u8(flags);
    put_len(out, payload_len);
}

fn put_len(out: &mut BytesMut, len: usize) {
    let len = u32::try_from(len.min(MAX_PAYLOAD)).unwrap_or(0);
    out.put_slice(&len.to_be_bytes()[1..]);
}

/// SYN_REPLY for `stream_id` with a compressed header block.
pub(crate) fn syn_reply(out: &mut BytesMut, stream_id: u32, headers: &[u8]) {
    control(out, SYN_REPLY, 0, 4 + headers.len());
    out.put_u32(stream_id & 0x7FFF_FFFF);
    out.put_slice(headers);
}

/// SYN_STREAM (used by tests' clients): `stream_id`, no association, priority 0.
#[cfg(test)]
pub(crate) fn syn_stream(out: &mut BytesMut, stream_id: u32, fin: bool, headers: &[u8]) {
    control(
        out,
        SYN_STREAM,
        if fin { FLAG_FIN } else { 0 },
        10 + headers.len(),
    );
    out.put_u32(stream_id & 0x7FFF_FFFF);
    out.put_u32(0);
    out.put_u16(0);
    out.put_slice(headers);
}

/// RST_STREAM.
pub(crate) fn rst_stream(out: &mut BytesMut, stream_id: u32, status: u32) {
    control(out, RST_STREAM, 0, 8);
    out.put_u32(stream_id & 0x7FFF_FFFF);
    out.put_u32(status);
}

/// PING with `id`.
pub(crate) fn ping(out: &mut BytesMut, id: u32) {
    control(out, PING, 0, 4);
    out.put_u32(id);
}

/// GOAWAY (status OK).
pub(crate) fn goaway(out: &mut BytesMut, last_good: u32) {
    control(out, GOAWAY, 0, 8);
    out.put_u32(last_good & 0x7FFF_FFFF);
    out.put_u32(0);
}

/// A data frame's 8-byte header (the data follows it, at most [`MAX_PAYLOAD`] bytes).
pub(crate) fn data_header(stream_id: u32, fin: bool, len: usize) -> [u8; 8] {
    let mut head = [0u8; 8];
    head[..4].copy_from_slice(&(stream_id & 0x7FFF_FFFF).to_be_bytes());
    head[4] = if fin { FLAG_FIN } else { 0 };
    let len = u32::try_from(len.min(MAX_PAYLOAD)).unwrap_or(0);
    head[5..].copy_from_slice(&len.to_be_bytes()[1..]);
    head
}
