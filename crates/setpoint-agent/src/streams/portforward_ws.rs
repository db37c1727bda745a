//! Port-forward over a WebSocket channel protocol (Python's and kube-rs's clients): the
//! ports come from `?ports=` (repeated or comma-separated); port `i` has data channel `2i`
//! and error channel `2i+1`, and the server's first message on each is the port number
//! (2 bytes, little-endian) alone. Each port gets one connection in the pod; the WebSocket
//! closes when every port's connection has ended.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;

use setpoint_core::{query_pairs, ApiError};

use super::channels::{ChannelProtocol, Incoming};
use super::ws::{self, WsSender, CLOSE_NORMAL};
use super::PortDialer;

/// The largest client message accepted.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// Bytes read from the pod per message.
const CHUNK: usize = 64 * 1024;

/// The ports asked for in the query, or the refusal.
pub(crate) fn ports(query: &str) -> Result<Vec<u16>, ApiError> {
    let mut ports = Vec::new();
    for (key, value) in query_pairs(query) {
        if key != "ports" {
            continue;
        }
        for text in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            match text.parse::<u16>() {
                Ok(port) if port > 0 => ports.push(port),
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "invalid port: {text:?}: ports must be integers between 1 and 65535"
                    )))
                }
            }
        }
    }
    if ports.is_empty() {
        return Err(ApiError::bad_request("at least one port must be specified"));
    }
    // Channels are numbered by port index: two per port within one byte.
    if ports.len() > 127 {
        return Err(ApiError::bad_request("too many ports"));
    }
    Ok(ports)
}

/// Runs the session on an upgraded connection.
pub(crate) async fn run<IO>(
    io: IO,
    protocol: ChannelProtocol,
    ports: Vec<u16>,
    dialer: Arc<dyn PortDialer>,
) where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut reader, sender, writer) = ws::split(io, MAX_MESSAGE);
    let mut to_pod: Vec<Option<mpsc::Sender<Bytes>>> = Vec::new();
    let mut copies = Vec::new();
    for (index, port) in ports.iter().copied().enumerate() {
        let data = u8::try_from(2 * index).unwrap_or(u8::MAX - 1);
        let prefix = Bytes::copy_from_slice(&port.to_le_bytes());
        if protocol.send(&sender, data, prefix.clone()).await.is_err()
            || protocol.send(&sender, data + 1, prefix).await.is_err()
        {
            return;
        }
        let (tx, rx) = mpsc::channel(16);
        to_pod.push(Some(tx));
        copies.push(tokio::spawn(forward_port(
            dialer.clone(),
            port,
            data,
            protocol,
            sender.clone(),
            rx,
        )));
    }
    let all_done = async {
        for copy in copies {
            let _ = copy.await;
        }
    };
    let route = async {
        while let Ok(Some(message)) = reader.next().await {
            if let Incoming::Data(channel, bytes) = protocol.decode(message) {
                if channel % 2 != 0 || bytes.is_empty() {
                    continue;
                }
                let slot = to_pod.get_mut(usize::from(channel / 2));
                if let Some(Some(tx)) = slot.as_deref() {
                    if tx.send(bytes).await.is_err() {
                        if let Some(slot) = to_pod.get_mut(usize::from(channel / 2)) {
                            *slot = None;
                        }
                    }
                }
            }
        }
    };
    tokio::select! {
        () = all_done => {}
        () = route => {}
    }
    let _ = sender.close(CLOSE_NORMAL).await;
    drop(sender);
    let _ = writer.await;
}

/// Dials `port` and copies both ways; a failure is reported on the error channel.
async fn forward_port(
    dialer: Arc<dyn PortDialer>,
    port: u16,
    data: u8,
    protocol: ChannelProtocol,
    sender: WsSender,
    from_client: mpsc::Receiver<Bytes>,
) {
    let connection = match dialer.dial(port).await {
        Ok(connection) => connection,
        Err(error) => {
            let message = format!("error forwarding port {port} to pod: {error}");
            let _ = protocol.send(&sender, data + 1, Bytes::from(message)).await;
            return;
        }
    };
    let (mut read, write) = connection.into_split();
    let upstream = tokio::spawn(copy_to_pod(from_client, write));
    loop {
        let mut buf = BytesMut::with_capacity(CHUNK);
        match read.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if protocol.send(&sender, data, buf.freeze()).await.is_err() {
                    break;
                }
            }
        }
    }
    upstream.abort();
}

async fn copy_to_pod(mut from_client: mpsc::Receiver<Bytes>, mut write: OwnedWriteHalf) {
    while let Some(bytes) = from_client.recv().await {
        if write.write_all(&bytes).await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}
