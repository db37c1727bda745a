//! The resolver's sockets: UDP (one datagram per query; answers larger than the client's
//! buffer — 512 bytes, or its EDNS size — are truncated with TC set so it retries over TCP)
//! and TCP (two-byte length-prefixed messages, several per connection).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::records::{answer, Directory};

/// An idle TCP connection is closed after this long.
const TCP_IDLE: Duration = Duration::from_secs(10);

/// The answer to the raw query `bytes`, encoded; `limit`: the UDP size limit, if any.
/// `None` when the bytes are not even a DNS header (nothing to answer).
pub(crate) fn respond(
    bytes: &[u8],
    directory: &impl Directory,
    zone: &str,
    limit: Option<usize>,
) -> Option<Vec<u8>> {
    let request = match Message::from_vec(bytes) {
        Ok(request) => request,
        Err(_) => {
            // Answer FORMERR when at least the id can be read.
            let id = u16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]);
            let error = Message::error_msg(id, OpCode::Query, ResponseCode::FormErr);
            return error.to_vec().ok();
        }
    };
    let mut response = answer(&request, directory, zone);
    let max = limit.map(|default| {
        request
            .edns
            .as_ref()
            .map_or(default, |e| usize::from(e.max_payload()).max(default))
    });
    if let Some(edns) = &request.edns {
        let mut ours = Edns::new();
        ours.set_max_payload(edns.max_payload().max(512));
        response.edns = Some(ours);
    }
    let encoded = response.to_vec().ok()?;
    match max {
        Some(max) if encoded.len() > max => {
            let mut short = Message::new(
                response.metadata.id,
                MessageType::Response,
                response.metadata.op_code,
            );
            short.metadata = response.metadata;
            short.metadata.truncation = true;
            short.queries = response.queries;
            short.edns = response.edns;
            short.to_vec().ok()
        }
        _ => Some(encoded),
    }
}

/// Serves `at` over UDP and TCP until `shutdown`. Fails when either socket cannot bind.
pub(crate) async fn serve<D: Directory + Send + Sync + 'static>(
    at: SocketAddr,
    directory: Arc<D>,
    zone: String,
    shutdown: CancellationToken,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let udp = UdpSocket::bind(at).await?;
    let bound = udp.local_addr()?;
    // TCP on the same port (the one the UDP socket got, when `at` asked for any).
    let tcp = TcpListener::bind(bound).await?;
    let zone: Arc<str> = zone.into();
    let task = tokio::spawn({
        let (directory, zone) = (directory.clone(), zone.clone());
        let shutdown = shutdown.clone();
        async move {
            let udp_task = tokio::spawn(serve_udp(
                udp,
                directory.clone(),
                zone.clone(),
                shutdown.clone(),
            ));
            serve_tcp(tcp, directory, zone, shutdown).await;
            let _ = udp_task.await;
        }
    });
    Ok((bound, task))
}

async fn serve_udp<D: Directory + Send + Sync + 'static>(
    socket: UdpSocket,
    directory: Arc<D>,
    zone: Arc<str>,
    shutdown: CancellationToken,
) {
    let mut buffer = vec![0u8; 4096];
    loop {
        let received = tokio::select! {
            received = socket.recv_from(&mut buffer) => received,
            () = shutdown.cancelled() => return,
        };
        let Ok((len, peer)) = received else { continue };
        if let Some(reply) = respond(&buffer[..len], directory.as_ref(), &zone, Some(512)) {
            let _ = socket.send_to(&reply, peer).await;
        }
    }
}

async fn serve_tcp<D: Directory + Send + Sync + 'static>(
    listener: TcpListener,
    directory: Arc<D>,
    zone: Arc<str>,
    shutdown: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => return,
        };
        let Ok((stream, _)) = accepted else { continue };
        let (directory, zone, shutdown) = (directory.clone(), zone.clone(), shutdown.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = serve_connection(stream, directory.as_ref(), &zone) => {}
                () = shutdown.cancelled() => {}
            }
        });
    }
}

async fn serve_connection(mut stream: TcpStream, directory: &impl Directory, zone: &str) {
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
        if stream.read_exact(&mut query).await.is_err() {
            return;
        }
        let Some(reply) = respond(&query, directory, zone, None) else {
            return;
        };
        let Ok(reply_len) = u16::try_from(reply.len()) else {
            return;
        };
        let mut framed = reply_len.to_be_bytes().to_vec();
        framed.extend_from_slice(&reply);
        if stream.write_all(&framed).await.is_err() {
            return;
        }
    }
}
