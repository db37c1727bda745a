//! A UDP port of the balancer: a session per client address. A client's first datagram picks
//! a backend and opens a socket connected to it; the client's datagrams go out on it and the
//! backend's answers come back from the port's own socket (so the client sees the address it
//! sent to). A session idle in both directions for [`IDLE`] is closed.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::backends::{ActiveGuard, Group};
use super::Shared;

/// How long a session lives without a datagram either way.
const IDLE: Duration = Duration::from_secs(30);
/// The largest datagram forwarded.
const DATAGRAM: usize = 65_536;

/// One client's session.
struct Session {
    /// Its number, so a session that ended is not mistaken for a newer one of that client.
    id: u64,
    /// Connected to the session's backend.
    upstream: Arc<UdpSocket>,
    /// When the client last sent, in milliseconds since the port started.
    last_sent: Arc<AtomicU64>,
}

/// Serves `socket` until `stop` or `shutdown`.
pub(super) async fn serve(
    socket: UdpSocket,
    group: Shared<Group>,
    stop: CancellationToken,
    shutdown: CancellationToken,
) {
    let socket = Arc::new(socket);
    let started = Instant::now();
    let mut sessions: HashMap<SocketAddr, Session> = HashMap::new();
    let (ended_tx, mut ended) = mpsc::unbounded_channel::<(SocketAddr, u64)>();
    let mut next_id = 0u64;
    let mut buffer = vec![0u8; DATAGRAM];
    loop {
        let (len, client) = tokio::select! {
            () = stop.cancelled() => return,
            () = shutdown.cancelled() => return,
            Some((client, id)) = ended.recv() => {
                if sessions.get(&client).is_some_and(|s| s.id == id) {
                    sessions.remove(&client);
                }
                continue;
            }
            received = socket.recv_from(&mut buffer) => match received {
                Ok(received) => received,
                Err(error) => {
                    tracing::debug!(%error, "UDP receive failed");
                    continue;
                }
            },
        };
        let now = millis_since(started);
        let session = match sessions.entry(client) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                let current = group.read().clone();
                let Some((upstream, guard)) = open(&current).await else {
                    tracing::debug!(%client, "no backend for a UDP session");
                    continue;
                };
                next_id += 1;
                let session = Session {
                    id: next_id,
                    upstream: Arc::new(upstream),
                    last_sent: Arc::new(AtomicU64::new(now)),
                };
                tokio::spawn(answer(
                    Arc::clone(&socket),
                    Arc::clone(&session.upstream),
                    client,
                    Arc::clone(&session.last_sent),
                    started,
                    guard,
                    shutdown.clone(),
                    (ended_tx.clone(), next_id),
                ));
                entry.insert(session)
            }
        };
        session.last_sent.store(now, Ordering::Relaxed);
        if let Err(error) = session.upstream.send(&buffer[..len]).await {
            tracing::debug!(%client, %error, "UDP send to a backend failed");
        }
    }
}

/// A socket connected to a backend of `group`, and the backend's session count.
async fn open(group: &Group) -> Option<(UdpSocket, ActiveGuard)> {
    let mut tried = Vec::new();
    while let Some(backend) = group.pick(&tried) {
        tried.push(backend.addr);
        let any: IpAddr = if backend.addr.is_ipv4() {
            Ipv4Addr::UNSPECIFIED.into()
        } else {
            Ipv6Addr::UNSPECIFIED.into()
        };
        let socket = match UdpSocket::bind((any, 0)).await {
            Ok(socket) => socket,
            Err(error) => {
                tracing::warn!(%error, "cannot open a UDP session socket");
                return None;
            }
        };
        if socket.connect(backend.addr).await.is_ok() {
            return Some((socket, backend.open()));
        }
        backend.record_refused();
    }
    None
}

/// Sends the backend's datagrams back to `client` until the session is idle.
#[allow(clippy::too_many_arguments)] // one task's whole state; a struct would only rename it
async fn answer(
    socket: Arc<UdpSocket>,
    upstream: Arc<UdpSocket>,
    client: SocketAddr,
    last_sent: Arc<AtomicU64>,
    started: Instant,
    _guard: ActiveGuard,
    shutdown: CancellationToken,
    (ended, id): (mpsc::UnboundedSender<(SocketAddr, u64)>, u64),
) {
    let mut buffer = vec![0u8; DATAGRAM];
    loop {
        let received = tokio::select! {
            () = shutdown.cancelled() => break,
            received = tokio::time::timeout(IDLE, upstream.recv(&mut buffer)) => received,
        };
        match received {
            Ok(Ok(len)) => {
                let _ = socket.send_to(&buffer[..len], client).await;
            }
            // An ICMP error from the backend (nothing listening): the session ends.
            Ok(Err(_)) => break,
            Err(_) => {
                let quiet = millis_since(started).saturating_sub(last_sent.load(Ordering::Relaxed));
                if quiet >= u64::try_from(IDLE.as_millis()).unwrap_or(u64::MAX) {
                    break;
                }
            }
        }
    }
    let _ = ended.send((client, id));
}

fn millis_since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
