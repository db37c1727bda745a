//! Port-forward over SPDY/3.1 (plain, or tunnelled in a WebSocket): for each local
//! connection the client opens an `error` stream and a `data` stream carrying the same
//! `requestid` and `port` headers. Once both exist the port is dialed in the pod and bytes
//! are copied both ways on the data stream; when the pod's side ends, the server FINs the
//! data and error streams. A dial failure is written on the error stream (the client then
//! reports it and ends the session, as with the kubelet).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;

use super::spdy::{Session, SpdyStream};
use super::PortDialer;

/// Bytes read from the pod per data frame.
const CHUNK: usize = 64 * 1024;

/// The two streams of one forwarded connection, as they arrive.
#[derive(Debug, Default)]
struct Pair {
    error: Option<SpdyStream>,
    data: Option<SpdyStream>,
}

/// Runs the session on an upgraded connection until the client ends it.
pub(crate) async fn run<IO>(io: IO, dialer: Arc<dyn PortDialer>)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let Ok(mut session) = Session::start(io) else {
        return;
    };
    let mut pending: HashMap<String, Pair> = HashMap::new();
    while let Some(stream) = session.accept().await {
        let port = stream
            .headers
            .get("port")
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|p| *p > 0);
        let Some(port) = port else {
            let _ = stream.writer.reset().await;
            continue;
        };
        // Old clients send no request id: the error stream's id pairs with data id − 2.
        let request = match stream.headers.get("requestid") {
            Some(id) => id.to_owned(),
            None => match stream.headers.get("streamtype") {
                Some("data") => (stream.id.saturating_sub(2)).to_string(),
                _ => stream.id.to_string(),
            },
        };
        let pair = pending.entry(request.clone()).or_default();
        match stream.headers.get("streamtype") {
            Some("error") if pair.error.is_none() => pair.error = Some(stream),
            Some("data") if pair.data.is_none() => pair.data = Some(stream),
            _ => {
                let _ = stream.writer.reset().await;
                continue;
            }
        }
        if pair.error.is_some() && pair.data.is_some() {
            if let Some(Pair {
                error: Some(error),
                data: Some(data),
            }) = pending.remove(&request)
            {
                tokio::spawn(forward(dialer.clone(), port, error, data));
            }
        }
    }
    session.close().await;
}

/// Serves one forwarded connection.
async fn forward(dialer: Arc<dyn PortDialer>, port: u16, error: SpdyStream, data: SpdyStream) {
    let connection = match dialer.dial(port).await {
        Ok(connection) => connection,
        Err(e) => {
            let message = format!("error forwarding port {port} to pod: {e}");
            let _ = error.writer.write(Bytes::from(message)).await;
            let _ = error.writer.close().await;
            let _ = data.writer.close().await;
            return;
        }
    };
    let (mut read, write) = connection.into_split();
    let SpdyStream {
        incoming, writer, ..
    } = data;
    let upstream = tokio::spawn(copy_to_pod(incoming, write));
    loop {
        let mut buf = BytesMut::with_capacity(CHUNK);
        match read.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if writer.write(buf.freeze()).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = writer.close().await;
    // The client resets the data stream once it has our FIN; the upstream copy then ends.
    let _ = upstream.await;
    let _ = error.writer.close().await;
}

async fn copy_to_pod(
    mut from_client: mpsc::Receiver<Bytes>,
    mut write: tokio::net::tcp::OwnedWriteHalf,
) {
    while let Some(bytes) = from_client.recv().await {
        if write.write_all(&bytes).await.is_err() {
            break;
        }
    }
    let _ = write.shutdown().await;
}
