//! The resolver's sockets: UDP (one datagram per query; answers larger than the client's
//! buffer — 512 bytes, or its EDNS size — are truncated with TC set so it retries over TCP)
//! and TCP (two-byte length-prefixed messages, several per connection). Queries for names
//! outside the cluster domain go to the [`Forwarder`] when there is one (each in its own task,
//! so a slow upstream holds up no other query).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::forward::{DnsUpstream, Forwarder};
use super::records::{answer, relative_to, Directory};

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
    let max = udp_max(&request, limit);
    if let Some(edns) = &request.edns {
        let mut ours = Edns::new();
        ours.set_max_payload(edns.max_payload().max(512));
        response.edns = Some(ours);
    }
    let encoded = response.to_vec().ok()?;
    fit(encoded, max)
}

/// `encoded` when it fits in `max` bytes, else the same message without records and with TC
/// set (the client retries over TCP).
fn fit(encoded: Vec<u8>, max: Option<usize>) -> Option<Vec<u8>> {
    match max {
        Some(max) if encoded.len() > max => {
            let response = Message::from_vec(&encoded).ok()?;
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

/// The UDP size limit for `request` given the transport's `limit` (the client's EDNS size when
/// larger).
fn udp_max(request: &Message, limit: Option<usize>) -> Option<usize> {
    limit.map(|default| {
        request
            .edns
            .as_ref()
            .map_or(default, |e| usize::from(e.max_payload()).max(default))
    })
}

/// The parsed query when it is one to forward: a standard query with one question for a name
/// outside the cluster domain `zone`.
fn to_forward(bytes: &[u8], zone: &str) -> Option<Message> {
    let request = Message::from_vec(bytes).ok()?;
    let [query] = request.queries.as_slice() else {
        return None;
    };
    if request.metadata.message_type != MessageType::Query
        || request.metadata.op_code != OpCode::Query
    {
        return None;
    }
    let name = query.name().to_ascii().to_ascii_lowercase();
    let zone = zone.trim_end_matches('.').to_ascii_lowercase();
    relative_to(name.trim_end_matches('.'), &zone)
        .is_none()
        .then_some(request)
}

/// The answer to the raw query `bytes`: forwarded when it is for a name outside `zone` and
/// there is a forwarder, else [`respond`]'s.
pub(crate) async fn handle(
    bytes: &[u8],
    directory: &impl Directory,
    zone: &str,
    forwarder: Option<&Forwarder>,
    limit: Option<usize>,
) -> Option<Vec<u8>> {
    if let Some(forwarder) = forwarder {
        if let Some(request) = to_forward(bytes, zone) {
            let reply = forwarder.forward(&request, bytes, limit.is_none()).await;
            return fit(reply, udp_max(&request, limit));
        }
    }
    respond(bytes, directory, zone, limit)
}

/// What every query handler shares: the records, the zone, the forwarder.
struct Shared<D> {
    directory: Arc<D>,
    zone: Arc<str>,
    forwarder: Option<Arc<Forwarder>>,
}

impl<D> Clone for Shared<D> {
    fn clone(&self) -> Shared<D> {
        Shared {
            directory: self.directory.clone(),
            zone: self.zone.clone(),
            forwarder: self.forwarder.clone(),
        }
    }
}

impl<D: Directory> Shared<D> {
    async fn handle(&self, bytes: &[u8], limit: Option<usize>) -> Option<Vec<u8>> {
        let forwarder = self.forwarder.as_deref();
        handle(bytes, self.directory.as_ref(), &self.zone, forwarder, limit).await
    }
}

/// Serves `at` over UDP and TCP until `shutdown`, forwarding names outside `zone` to
/// `upstream`. Fails when either socket cannot bind.
pub(crate) async fn serve<D: Directory + Send + Sync + 'static>(
    at: SocketAddr,
    directory: Arc<D>,
    zone: String,
    upstream: DnsUpstream,
    shutdown: CancellationToken,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let udp = UdpSocket::bind(at).await?;
    let bound = udp.local_addr()?;
    // TCP on the same port (the one the UDP socket got, when `at` asked for any).
    let tcp = TcpListener::bind(bound).await?;
    let shared = Shared {
        directory,
        zone: zone.into(),
        forwarder: Forwarder::new(upstream, bound).map(Arc::new),
    };
    let task = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            let udp_task = tokio::spawn(serve_udp(udp, shared.clone(), shutdown.clone()));
            serve_tcp(tcp, shared, shutdown).await;
            let _ = udp_task.await;
        }
    });
    Ok((bound, task))
}

async fn serve_udp<D: Directory + Send + Sync + 'static>(
    socket: UdpSocket,
    shared: Shared<D>,
    shutdown: CancellationToken,
) {
    let socket = Arc::new(socket);
    let mut buffer = vec![0u8; 4096];
    loop {
        let received = tokio::select! {
            received = socket.recv_from(&mut buffer) => received,
            () = shutdown.cancelled() => return,
        };
        let Ok((len, peer)) = received else { continue };
        let query = &buffer[..len];
        if shared.forwarder.is_some() && to_forward(query, &shared.zone).is_some() {
            let (socket, shared, query) = (socket.clone(), shared.clone(), query.to_vec());
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                tokio::select! {
                    reply = shared.handle(&query, Some(512)) => {
                        if let Some(reply) = reply {
                            let _ = socket.send_to(&reply, peer).await;
                        }
                    }
                    () = shutdown.cancelled() => {}
                }
            });
            continue;
        }
        let reply = respond(query, shared.directory.as_ref(), &shared.zone, Some(512));
        if let Some(reply) = reply {
            let _ = socket.send_to(&reply, peer).await;
        }
    }
}

async fn serve_tcp<D: Directory + Send + Sync + 'static>(
    listener: TcpListener,
    shared: Shared<D>,
    shutdown: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => return,
        };
        let Ok((stream, _)) = accepted else { continue };
        let (shared, shutdown) = (shared.clone(), shutdown.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = serve_connection(stream, &shared) => {}
                () = shutdown.cancelled() => {}
            }
        });
    }
}

async fn serve_connection<D: Directory>(mut stream: TcpStream, shared: &Shared<D>) {
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
        let Some(reply) = shared.handle(&query, None).await else {
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
