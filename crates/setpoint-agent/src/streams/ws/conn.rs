//! A WebSocket connection after the handshake, split into a reader of whole messages and a
//! cloneable sender. One writer task owns the socket's write half; senders queue frames to
//! it (bounded: a slow client slows the producers). The reader answers pings with pongs and
//! a close frame with a close frame, reassembles fragmented messages (control frames may sit
//! between fragments), unmasks client frames, and refuses a message over the size limit
//! with close 1009.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::frame::{apply_mask, encode_header, read_header, Opcode};
use super::{WsError, CLOSE_PROTOCOL_ERROR, CLOSE_TOO_BIG};

/// A whole data message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    /// A binary message.
    Binary(Bytes),
    /// A text message (its bytes; UTF-8 is not checked here).
    Text(Bytes),
}

/// A frame queued for the writer task.
#[derive(Debug)]
struct Outgoing {
    opcode: Opcode,
    /// One byte written before `payload` in the same frame (a channel number), so a
    /// channel-prefixed message needs no copy of its payload.
    prefix: Option<u8>,
    payload: Bytes,
}

/// Queues frames for the connection's writer. Cloneable; sending fails once the connection
/// is closed.
#[derive(Debug, Clone)]
pub(crate) struct WsSender {
    tx: mpsc::Sender<Outgoing>,
}

/// The connection is closed (or its writer failed).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("websocket connection closed")]
pub(crate) struct Closed;

impl WsSender {
    /// Sends a binary message: `prefix` (if any) then `payload`.
    pub(crate) async fn binary(&self, prefix: Option<u8>, payload: Bytes) -> Result<(), Closed> {
        self.send(Opcode::Binary, prefix, payload).await
    }

    /// Sends a text message.
    pub(crate) async fn text(&self, payload: Bytes) -> Result<(), Closed> {
        self.send(Opcode::Text, None, payload).await
    }

    /// Sends a close frame with `code`; the writer flushes and shuts the socket's write side
    /// down after it, and drops anything queued later.
    pub(crate) async fn close(&self, code: u16) -> Result<(), Closed> {
        let payload = Bytes::copy_from_slice(&code.to_be_bytes());
        self.send(Opcode::Close, None, payload).await
    }

    async fn send(&self, opcode: Opcode, prefix: Option<u8>, payload: Bytes) -> Result<(), Closed> {
        self.tx
            .send(Outgoing {
                opcode,
                prefix,
                payload,
            })
            .await
            .map_err(|_| Closed)
    }
}

/// Reads whole messages. Not cancel-safe: drop it rather than abandon a pending `next`.
#[derive(Debug)]
pub(crate) struct WsReader<R> {
    reader: BufReader<R>,
    sender: WsSender,
    max_message: usize,
    done: bool,
}

impl<R: AsyncRead + Unpin> WsReader<R> {
    /// The next data message; `None` once the client closed (its close frame was answered)
    /// or the socket ended. A protocol error or an oversized message closes the connection
    /// (1002 / 1009) and is returned.
    pub(crate) async fn next(&mut self) -> Result<Option<Message>, WsError> {
        if self.done {
            return Ok(None);
        }
        let result = self.read_message().await;
        match &result {
            Ok(None) => self.done = true,
            Err(error) => {
                self.done = true;
                let code = match error {
                    WsError::TooBig(_) => CLOSE_TOO_BIG,
                    _ => CLOSE_PROTOCOL_ERROR,
                };
                let _ = self.sender.close(code).await;
            }
            Ok(Some(_)) => {}
        }
        result
    }

    async fn read_message(&mut self) -> Result<Option<Message>, WsError> {
        // The data message being reassembled: its opcode and the bytes so far.
        let mut partial: Option<(Opcode, BytesMut)> = None;
        loop {
            let Some(header) = read_header(&mut self.reader).await? else {
                return Ok(None);
            };
            let mask = header
                .mask
                .ok_or(WsError::Protocol("unmasked client frame"))?;
            let first = partial.as_ref().map(|(opcode, _)| *opcode);
            let so_far = partial.as_ref().map_or(0, |(_, bytes)| bytes.len());
            let len = usize::try_from(header.len).map_err(|_| WsError::TooBig(self.max_message))?;
            if !header.opcode.is_control() && so_far.saturating_add(len) > self.max_message {
                return Err(WsError::TooBig(self.max_message));
            }
            // A continuation is read straight onto the message in progress; any other frame
            // into a buffer of its own.
            let mut payload = match (header.opcode, partial.take()) {
                (Opcode::Continuation, Some((_, bytes))) => bytes,
                (_, taken) => {
                    partial = taken;
                    BytesMut::new()
                }
            };
            let start = payload.len();
            payload.resize(start + len, 0);
            self.reader.read_exact(&mut payload[start..]).await?;
            apply_mask(&mut payload[start..], mask, 0);
            match header.opcode {
                Opcode::Ping => {
                    // A pong only if the connection is still open for writing.
                    let _ = self.sender.send(Opcode::Pong, None, payload.freeze()).await;
                }
                Opcode::Pong => {}
                Opcode::Close => {
                    let code = match payload.get(..2) {
                        Some(&[a, b]) => u16::from_be_bytes([a, b]),
                        _ => super::CLOSE_NORMAL,
                    };
                    let _ = self.sender.close(code).await;
                    return Ok(None);
                }
                Opcode::Text | Opcode::Binary => {
                    if partial.is_some() {
                        return Err(WsError::Protocol("new message inside a fragmented one"));
                    }
                    if header.fin {
                        return Ok(Some(message(header.opcode, payload)));
                    }
                    partial = Some((header.opcode, payload));
                }
                Opcode::Continuation => {
                    // `payload` is the message so far; its opcode was the first fragment's.
                    let Some(opcode) = first else {
                        return Err(WsError::Protocol("continuation without a message"));
                    };
                    if header.fin {
                        return Ok(Some(message(opcode, payload)));
                    }
                    partial = Some((opcode, payload));
                }
            }
        }
    }
}

fn message(opcode: Opcode, payload: BytesMut) -> Message {
    if opcode == Opcode::Text {
        Message::Text(payload.freeze())
    } else {
        Message::Binary(payload.freeze())
    }
}

/// Splits an upgraded connection: the message reader, a sender, and the writer task (it ends
/// after a close frame, when every sender is gone, or on a write error).
pub(crate) fn split<IO>(
    io: IO,
    max_message: usize,
) -> (WsReader<tokio::io::ReadHalf<IO>>, WsSender, JoinHandle<()>)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (read, write) = tokio::io::split(io);
    let (tx, rx) = mpsc::channel(16);
    let writer = tokio::spawn(write_frames(write, rx));
    let sender = WsSender { tx };
    let reader = WsReader {
        reader: BufReader::with_capacity(64 * 1024, read),
        sender: sender.clone(),
        max_message,
        done: false,
    };
    (reader, sender, writer)
}

async fn write_frames<W: AsyncWrite + Unpin>(write: W, mut rx: mpsc::Receiver<Outgoing>) {
    let mut write = tokio::io::BufWriter::with_capacity(64 * 1024, write);
    while let Some(frame) = rx.recv().await {
        let closing = frame.opcode == Opcode::Close;
        if write_frame(&mut write, &frame).await.is_err() {
            return;
        }
        // Flush when nothing else is queued (or at close): batches small frames.
        if (closing || rx.is_empty()) && write.flush().await.is_err() {
            return;
        }
        if closing {
            let _ = write.shutdown().await;
            return;
        }
    }
    let _ = write.flush().await;
    let _ = write.shutdown().await;
}

async fn write_frame<W: AsyncWrite + Unpin>(
    write: &mut W,
    frame: &Outgoing,
) -> std::io::Result<()> {
    let len = frame.payload.len() + usize::from(frame.prefix.is_some());
    let (head, used) = encode_header(true, frame.opcode, len);
    write.write_all(&head[..used]).await?;
    if let Some(prefix) = frame.prefix {
        write.write_all(&[prefix]).await?;
    }
    write.write_all(&frame.payload).await
}
