//! A server-side SPDY/3.1 session: the client opens streams (SYN_STREAM), each is answered at
//! once with an empty SYN_REPLY and handed to the application with its headers, an inbound
//! byte channel (closed by the client's FIN or RST_STREAM, or the end of the session) and a
//! writer. PINGs are echoed; GOAWAY or the end of input ends the session. One writer task
//! owns the socket's write half; the reader task the read half.

use std::collections::HashMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::frame::{self, read_frame, Frame, MAX_PAYLOAD, RST_CANCEL, RST_REFUSED};
use super::headers::{HeaderBlock, HeaderDecoder, HeaderEncoder};

/// Inbound data frames buffered per stream before the reader waits (TCP backpressure).
const STREAM_DEPTH: usize = 16;
/// How long [`Session::close`] waits for the client to close its side.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// What the writer task sends.
#[derive(Debug)]
enum Out {
    Data {
        stream_id: u32,
        fin: bool,
        data: Bytes,
    },
    Reply(u32),
    Reset(u32, u32),
    Ping(u32),
    GoAway,
}

/// A stream the client opened.
#[derive(Debug)]
pub(crate) struct SpdyStream {
    /// Its id.
    pub(crate) id: u32,
    /// Its SYN_STREAM headers.
    pub(crate) headers: HeaderBlock,
    /// What the client sends on it; ends at its FIN or reset.
    pub(crate) incoming: mpsc::Receiver<Bytes>,
    /// Writes to it.
    pub(crate) writer: StreamWriter,
}

/// Writes one stream's data. Cloneable.
#[derive(Debug, Clone)]
pub(crate) struct StreamWriter {
    id: u32,
    tx: mpsc::Sender<Out>,
}

/// The session is closed.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("spdy session closed")]
pub(crate) struct Closed;

impl StreamWriter {
    /// Sends `data` (split into frames of at most 16 MiB).
    pub(crate) async fn write(&self, mut data: Bytes) -> Result<(), Closed> {
        while !data.is_empty() {
            let chunk = data.split_to(data.len().min(MAX_PAYLOAD));
            self.send(Out::Data {
                stream_id: self.id,
                fin: false,
                data: chunk,
            })
            .await?;
        }
        Ok(())
    }

    /// Half-closes the stream (an empty data frame with FIN).
    pub(crate) async fn close(&self) -> Result<(), Closed> {
        self.send(Out::Data {
            stream_id: self.id,
            fin: true,
            data: Bytes::new(),
        })
        .await
    }

    /// Resets the stream (RST_STREAM CANCEL).
    pub(crate) async fn reset(&self) -> Result<(), Closed> {
        self.send(Out::Reset(self.id, RST_CANCEL)).await
    }

    async fn send(&self, out: Out) -> Result<(), Closed> {
        self.tx.send(out).await.map_err(|_| Closed)
    }
}

/// A running session: accept the client's streams, then close.
#[derive(Debug)]
pub(crate) struct Session {
    accepted: mpsc::Receiver<SpdyStream>,
    tx: mpsc::Sender<Out>,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl Session {
    /// Starts the session's reader and writer tasks on `io`.
    pub(crate) fn start<IO>(io: IO) -> Result<Self, super::SpdyError>
    where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        let encoder = HeaderEncoder::new()?;
        let (read, write) = tokio::io::split(io);
        let (tx, rx) = mpsc::channel(64);
        let (accepted_tx, accepted) = mpsc::channel(16);
        let writer = tokio::spawn(write_frames(write, rx, encoder));
        let reader = tokio::spawn(read_frames(
            BufReader::with_capacity(64 * 1024, read),
            tx.clone(),
            accepted_tx,
        ));
        Ok(Self {
            accepted,
            tx,
            reader,
            writer,
        })
    }

    /// The next stream the client opens; `None` once the session has ended.
    /// Cancel-safe.
    pub(crate) async fn accept(&mut self) -> Option<SpdyStream> {
        self.accepted.recv().await
    }

    /// Ends the session: GOAWAY after everything already queued, then waits (briefly) for
    /// the client to close the connection.
    pub(crate) async fn close(self) {
        let Self {
            accepted,
            tx,
            mut reader,
            writer,
        } = self;
        drop(accepted);
        let _ = tx.send(Out::GoAway).await;
        drop(tx);
        if tokio::time::timeout(CLOSE_GRACE, &mut reader)
            .await
            .is_err()
        {
            reader.abort();
        }
        let _ = writer.await;
    }
}

async fn read_frames<R: AsyncRead + Unpin>(
    mut read: R,
    tx: mpsc::Sender<Out>,
    accepted: mpsc::Sender<SpdyStream>,
) {
    let mut decoder = HeaderDecoder::default();
    let mut streams: HashMap<u32, mpsc::Sender<Bytes>> = HashMap::new();
    while let Ok(Some(frame)) = read_frame(&mut read).await {
        match frame {
            Frame::SynStream {
                stream_id,
                fin,
                headers,
            } => {
                let Ok(headers) = decoder.decode(&headers) else {
                    // The zlib stream is out of step: nothing later can be read.
                    break;
                };
                if streams.contains_key(&stream_id) || stream_id % 2 == 0 {
                    let _ = tx.send(Out::Reset(stream_id, RST_REFUSED)).await;
                    continue;
                }
                let (data_tx, incoming) = mpsc::channel(STREAM_DEPTH);
                let stream = SpdyStream {
                    id: stream_id,
                    headers,
                    incoming,
                    writer: StreamWriter {
                        id: stream_id,
                        tx: tx.clone(),
                    },
                };
                // Replied before the application sees it: clients open streams one by
                // one, each waiting for its reply.
                if tx.send(Out::Reply(stream_id)).await.is_err() {
                    break;
                }
                if accepted.send(stream).await.is_err() {
                    let _ = tx.send(Out::Reset(stream_id, RST_REFUSED)).await;
                    continue;
                }
                if !fin {
                    streams.insert(stream_id, data_tx);
                }
            }
            Frame::Data {
                stream_id,
                fin,
                data,
            } => {
                if let Some(data_tx) = streams.get(&stream_id) {
                    if !data.is_empty() && data_tx.send(data).await.is_err() {
                        // The application stopped reading this stream.
                        streams.remove(&stream_id);
                    }
                }
                if fin {
                    streams.remove(&stream_id);
                }
            }
            Frame::RstStream { stream_id, .. } => {
                streams.remove(&stream_id);
            }
            Frame::Headers { headers, .. } | Frame::SynReply { headers, .. } => {
                // Decoded only to keep the zlib stream in step.
                if decoder.decode(&headers).is_err() {
                    break;
                }
            }
            Frame::Ping(id) => {
                // Echo the client's (odd) pings; ours would be even, and we send none.
                if id % 2 == 1 && tx.send(Out::Ping(id)).await.is_err() {
                    break;
                }
            }
            Frame::GoAway { .. } => break,
            Frame::Settings | Frame::WindowUpdate | Frame::Unknown => {}
        }
    }
}

async fn write_frames<W: AsyncWrite + Unpin>(
    write: W,
    mut rx: mpsc::Receiver<Out>,
    mut encoder: HeaderEncoder,
) {
    let mut write = tokio::io::BufWriter::with_capacity(64 * 1024, write);
    let mut control = BytesMut::new();
    let mut last_stream = 0;
    while let Some(out) = rx.recv().await {
        control.clear();
        let mut closing = false;
        let result = match out {
            Out::Data {
                stream_id,
                fin,
                data,
            } => {
                let head = frame::data_header(stream_id, fin, data.len());
                match write.write_all(&head).await {
                    Ok(()) => write.write_all(&data).await,
                    Err(e) => Err(e),
                }
            }
            Out::Reply(stream_id) => {
                last_stream = last_stream.max(stream_id);
                match encoder.encode(&HeaderBlock::default()) {
                    Ok(block) => {
                        frame::syn_reply(&mut control, stream_id, &block);
                        write.write_all(&control).await
                    }
                    Err(_) => return,
                }
            }
            Out::Reset(stream_id, status) => {
                frame::rst_stream(&mut control, stream_id, status);
                write.write_all(&control).await
            }
            Out::Ping(id) => {
                frame::ping(&mut control, id);
                write.write_all(&control).await
            }
            Out::GoAway => {
                closing = true;
                frame::goaway(&mut control, last_stream);
                write.write_all(&control).await
            }
        };
        if result.is_err() {
            return;
        }
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
