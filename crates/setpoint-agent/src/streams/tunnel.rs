//! SPDY/3.1 tunnelled in a WebSocket (`SPDY/3.1+portforward.k8s.io`, kubectl 1.31+
//! port-forward): the SPDY session's bytes travel in binary messages whose boundaries mean
//! nothing. The WebSocket is turned back into a byte stream (an in-memory pipe pumped both
//! ways) and a normal SPDY port-forward session runs on it. Close 1000 = end of stream.

use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

use super::ws::{self, Message, CLOSE_NORMAL};
use super::{portforward_spdy, PortDialer};

/// The largest message accepted from the client.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// The in-memory pipe's buffer, and bytes per message sent.
const CHUNK: usize = 64 * 1024;

/// Runs a SPDY port-forward session inside the WebSocket on `io`.
pub(crate) async fn run<IO>(io: IO, dialer: Arc<dyn PortDialer>)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut reader, sender, writer) = ws::split(io, MAX_MESSAGE);
    let (spdy_side, pump_side) = tokio::io::duplex(4 * CHUNK);
    let (mut from_spdy, mut to_spdy) = tokio::io::split(pump_side);
    let inbound = tokio::spawn(async move {
        while let Ok(Some(message)) = reader.next().await {
            let (Message::Binary(bytes) | Message::Text(bytes)) = message;
            if to_spdy.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = to_spdy.shutdown().await;
    });
    let outbound = tokio::spawn(async move {
        loop {
            let mut buf = BytesMut::with_capacity(CHUNK);
            match from_spdy.read_buf(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if sender.binary(None, buf.freeze()).await.is_err() {
                        return;
                    }
                }
            }
        }
        let _ = sender.close(CLOSE_NORMAL).await;
    });
    portforward_spdy::run(spdy_side, dialer).await;
    let _ = outbound.await;
    inbound.abort();
    let _ = writer.await;
}
