//! Test clients for the stream protocols: a masking WebSocket client, a SPDY/3.1 client
//! (opening streams as client-go does), an echoing command, and a dialer to a local TCP echo
//! server.

use std::io;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{
    AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadHalf, WriteHalf,
};

use super::spdy::frame::{self, read_frame, Frame};
use super::spdy::headers::{HeaderBlock, HeaderDecoder, HeaderEncoder};
use super::{BoxFuture, CommandOutcome, PortDialer, RemoteCommandSession};

/// Writes masked client frames.
pub(crate) struct WsWrite<W>(pub(crate) W);

impl<W: AsyncWrite + Unpin> WsWrite<W> {
    /// One frame: `opcode` bits, FIN as given, payload masked with a fixed odd key.
    pub(crate) async fn frame(&mut self, opcode: u8, fin: bool, payload: &[u8]) {
        let mut out = vec![(if fin { 0x80 } else { 0 }) | opcode];
        let len = payload.len();
        if len < 126 {
            out.push(0x80 | len as u8);
        } else if len <= 0xFFFF {
            out.push(0x80 | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            out.push(0x80 | 127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
        let key = [0x37, 0xfa, 0x21, 0x3d];
        out.extend_from_slice(&key);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        self.0.write_all(&out).await.unwrap();
    }

    /// A binary message.
    pub(crate) async fn binary(&mut self, payload: &[u8]) {
        self.frame(0x2, true, payload).await;
    }
}

/// Reads (unmasked) server frames.
pub(crate) struct WsRead<R>(pub(crate) R);

impl<R: AsyncRead + Unpin> WsRead<R> {
    /// The next frame's opcode and payload; `None` at the end of input.
    pub(crate) async fn frame(&mut self) -> Option<(u8, Vec<u8>)> {
        let mut head = [0u8; 2];
        if self.0.read_exact(&mut head).await.is_err() {
            return None;
        }
        assert_eq!(head[1] & 0x80, 0, "server frames are unmasked");
        assert_ne!(head[0] & 0x80, 0, "server frames are not fragmented");
        let len = match head[1] & 0x7F {
            126 => usize::from(self.0.read_u16().await.unwrap()),
            127 => usize::try_from(self.0.read_u64().await.unwrap()).unwrap(),
            n => usize::from(n),
        };
        let mut payload = vec![0u8; len];
        self.0.read_exact(&mut payload).await.unwrap();
        Some((head[0] & 0x0F, payload))
    }
}

/// A SPDY client's writing side.
pub(crate) struct SpdyWrite<W> {
    write: W,
    encoder: HeaderEncoder,
}

impl<W: AsyncWrite + Unpin> SpdyWrite<W> {
    /// Opens stream `id` with `headers`.
    pub(crate) async fn open(&mut self, id: u32, fin: bool, headers: &[(&str, &str)]) {
        let block = HeaderBlock(
            headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        let block = self.encoder.encode(&block).unwrap();
        let mut out = BytesMut::new();
        frame::syn_stream(&mut out, id, fin, &block);
        self.write.write_all(&out).await.unwrap();
    }

    /// A data frame.
    pub(crate) async fn data(&mut self, id: u32, fin: bool, data: &[u8]) {
        self.write
            .write_all(&frame::data_header(id, fin, data.len()))
            .await
            .unwrap();
        self.write.write_all(data).await.unwrap();
    }

    /// The underlying writer, for hand-made frames.
    pub(crate) fn raw(&mut self) -> &mut W {
        &mut self.write
    }

    /// A ping.
    pub(crate) async fn ping(&mut self, id: u32) {
        let mut out = BytesMut::new();
        frame::ping(&mut out, id);
        self.write.write_all(&out).await.unwrap();
    }
}

/// A SPDY client's reading side.
pub(crate) struct SpdyRead<R> {
    read: R,
    decoder: HeaderDecoder,
}

impl<R: AsyncRead + Unpin> SpdyRead<R> {
    /// The next frame (SYN_REPLY headers are decoded to keep the zlib stream in step and
    /// checked to be empty); `None` at the end of input.
    pub(crate) async fn frame(&mut self) -> Option<Frame> {
        let frame = read_frame(&mut self.read).await.ok()??;
        if let Frame::SynReply { headers, .. } = &frame {
            assert_eq!(
                self.decoder.decode(headers).unwrap(),
                HeaderBlock::default()
            );
        }
        Some(frame)
    }
}

/// Splits a client connection into SPDY halves.
pub(crate) fn spdy_client<IO: AsyncRead + AsyncWrite>(
    io: IO,
) -> (SpdyRead<ReadHalf<IO>>, SpdyWrite<WriteHalf<IO>>) {
    let (read, write) = tokio::io::split(io);
    (
        SpdyRead {
            read,
            decoder: HeaderDecoder::default(),
        },
        SpdyWrite {
            write,
            encoder: HeaderEncoder::new().unwrap(),
        },
    )
}

/// A command that copies stdin to stdout, writes `err` to stderr, and exits 3.
pub(crate) fn echo_exit_3(mut session: RemoteCommandSession) -> BoxFuture<()> {
    Box::pin(async move {
        if let Some(stderr) = session.stderr.take() {
            stderr.send(Bytes::from_static(b"err")).await.unwrap();
        }
        if let (Some(mut stdin), Some(stdout)) = (session.stdin.take(), session.stdout.take()) {
            while let Some(bytes) = stdin.recv().await {
                stdout.send(bytes).await.unwrap();
            }
        }
        let _ = session.outcome.send(CommandOutcome::ExitCode(3));
    })
}

/// Dials `127.0.0.1:port`.
pub(crate) struct LoopbackDialer;

impl PortDialer for LoopbackDialer {
    fn dial(&self, port: u16) -> BoxFuture<io::Result<tokio::net::TcpStream>> {
        Box::pin(tokio::net::TcpStream::connect(("127.0.0.1", port)))
    }
}

/// A TCP echo server on a free loopback port; returns the port.
pub(crate) async fn echo_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = conn.into_split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
                let _ = write.shutdown().await;
            });
        }
    });
    port
}

/// The dialer as the entry points take it.
pub(crate) fn loopback() -> Arc<dyn PortDialer> {
    Arc::new(LoopbackDialer)
}
