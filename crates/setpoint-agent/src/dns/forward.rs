//! Forwarding names outside the cluster domain to the node's upstream resolvers (as CoreDNS's
//! `forward . /etc/resolv.conf`): the `nameserver` lines of the host's `resolv.conf` (re-read
//! when the file changes) or a fixed list. Each upstream is asked over UDP with a timeout, the
//! next one on failure; over TCP when the client asked over TCP or the UDP answer came back
//! truncated. The query goes out under a fresh random ID, and the answer gets the client's ID
//! back; SERVFAIL when no upstream answers. An upstream that is the resolver's own address is
//! skipped (no loops). Positive answers are kept in a small cache for their TTL.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use hickory_proto::op::{Message, MessageType, ResponseCode};
use parking_lot::Mutex;
use ring::rand::{SecureRandom, SystemRandom};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// How long one upstream gets to answer one query (per transport).
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);

/// At most this many answers are cached.
const CACHE_ENTRIES: usize = 1024;

/// Cached answers live at most this long, whatever their TTL.
const CACHE_MAX_TTL: u32 = 300;

/// Where the resolver sends names outside the cluster domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsUpstream {
    /// The `nameserver` lines of this `resolv.conf` (port 53), re-read when it changes.
    ResolvConf(PathBuf),
    /// These resolvers, in order.
    Fixed(Vec<SocketAddr>),
    /// Nothing: names outside the cluster domain are REFUSED.
    None,
}

impl Default for DnsUpstream {
    fn default() -> DnsUpstream {
        DnsUpstream::ResolvConf(PathBuf::from("/etc/resolv.conf"))
    }
}

/// The `nameserver` addresses of a `resolv.conf` text (port 53; zone-scoped IPv6 addresses and
/// lines that do not parse are left out).
pub(crate) fn nameservers(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next()? == "nameserver").then_some(())?;
            let ip: IpAddr = words.next()?.parse().ok()?;
            Some(SocketAddr::new(ip, 53))
        })
        .collect()
}

/// The last read of the host's `resolv.conf`: its modification time and length, and servers.
#[derive(Default)]
struct HostFile {
    stamp: Option<(SystemTime, u64)>,
    servers: Vec<SocketAddr>,
}

/// A cached answer: the message and when it was stored.
struct Cached {
    message: Message,
    stored: Instant,
    ttl: u32,
}

/// The cache key: lowercased name, type, class.
type Key = (String, u16, u16);

/// Forwards queries to upstream resolvers.
pub(crate) struct Forwarder {
    source: DnsUpstream,
    /// The resolver's own address (skipped among upstreams).
    own: SocketAddr,
    host: Mutex<HostFile>,
    cache: Mutex<HashMap<Key, Cached>>,
    random: SystemRandom,
    timeout: Duration,
}

impl Forwarder {
    /// A forwarder for a resolver listening on `own`; `None` when `source` is
    /// [`DnsUpstream::None`].
    pub(crate) fn new(source: DnsUpstream, own: SocketAddr) -> Option<Forwarder> {
        if source == DnsUpstream::None {
            return None;
        }
        Some(Forwarder {
            source,
            own,
            host: Mutex::new(HostFile::default()),
            cache: Mutex::new(HashMap::new()),
            random: SystemRandom::new(),
            timeout: UPSTREAM_TIMEOUT,
        })
    }

    /// The same, with another per-upstream timeout (tests).
    #[cfg(test)]
    pub(crate) fn with_timeout(mut self, timeout: Duration) -> Forwarder {
        self.timeout = timeout;
        self
    }

    /// The upstreams to ask, in order, without the resolver itself.
    pub(crate) fn upstreams(&self) -> Vec<SocketAddr> {
        let all = match &self.source {
            DnsUpstream::ResolvConf(path) => self.host_servers(path),
            DnsUpstream::Fixed(servers) => servers.clone(),
            DnsUpstream::None => Vec::new(),
        };
        all.into_iter().filter(|s| !self.is_self(*s)).collect()
    }

    /// Whether `server` is this resolver: its address, or any local address on its port when it
    /// listens on all addresses.
    fn is_self(&self, server: SocketAddr) -> bool {
        if server.port() != self.own.port() {
            return false;
        }
        let normalize = |ip: IpAddr| match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let (ip, own) = (normalize(server.ip()), normalize(self.own.ip()));
        ip == own || (own.is_unspecified() && (ip.is_loopback() || ip.is_unspecified()))
    }

    /// The servers of `path`, re-read when its modification time or length changed.
    fn host_servers(&self, path: &Path) -> Vec<SocketAddr> {
        let stamp = std::fs::metadata(path)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        let mut host = self.host.lock();
        if stamp.is_none() || host.stamp != stamp {
            host.servers = std::fs::read_to_string(path)
                .map(|text| nameservers(&text))
                .unwrap_or_default();
            host.stamp = stamp;
        }
        host.servers.clone()
    }

    /// The upstream answer to `request` (whose encoded form is `raw`), encoded, with the
    /// client's ID; SERVFAIL when no upstream answers.
    pub(crate) async fn forward(&self, request: &Message, raw: &[u8], over_tcp: bool) -> Vec<u8> {
        let client_id = request.metadata.id;
        if let Some(cached) = self.cached(request) {
            return cached;
        }
        for upstream in self.upstreams() {
            let id = self.fresh_id();
            let mut query = raw.to_vec();
            if let Some(header) = query.get_mut(..2) {
                header.copy_from_slice(&id.to_be_bytes());
            }
            let mut answer = None;
            if !over_tcp {
                answer = ask_udp(upstream, &query, id, request, self.timeout).await;
            }
            let truncated = answer.as_ref().is_some_and(|(m, _)| m.metadata.truncation);
            if over_tcp || truncated {
                let truncated = answer.take();
                answer = ask_tcp(upstream, &query, id, request, self.timeout)
                    .await
                    .or(truncated);
            }
            let Some((message, mut bytes)) = answer else {
                tracing::debug!(%upstream, "upstream DNS server did not answer");
                continue;
            };
            self.store(request, &message);
            bytes[..2].copy_from_slice(&client_id.to_be_bytes());
            return bytes;
        }
        servfail(request)
    }

    fn fresh_id(&self) -> u16 {
        let mut id = [0u8; 2];
        // On failure the ID is 0: still a valid query, only guessable.
        let _ = self.random.fill(&mut id);
        u16::from_be_bytes(id)
    }

    /// A cached answer to `request`, TTLs lowered by its age, with the client's ID.
    fn cached(&self, request: &Message) -> Option<Vec<u8>> {
        let key = key(request)?;
        let mut cache = self.cache.lock();
        let entry = cache.get(&key)?;
        let age = u32::try_from(entry.stored.elapsed().as_secs()).unwrap_or(u32::MAX);
        if age >= entry.ttl {
            cache.remove(&key);
            return None;
        }
        let mut message = entry.message.clone();
        drop(cache);
        message.metadata.id = request.metadata.id;
        message.queries.clone_from(&request.queries);
        // No OPT record for a client that sent none.
        if request.edns.is_none() {
            message.edns = None;
        }
        for record in message
            .answers
            .iter_mut()
            .chain(message.authorities.iter_mut())
            .chain(message.additionals.iter_mut())
        {
            record.ttl = record.ttl.saturating_sub(age);
        }
        message.to_vec().ok()
    }

    /// Keeps a positive, complete answer for its smallest TTL (capped).
    fn store(&self, request: &Message, answer: &Message) {
        let positive = answer.metadata.response_code == ResponseCode::NoError
            && !answer.metadata.truncation
            && !answer.answers.is_empty();
        let Some(key) = key(request).filter(|_| positive) else {
            return;
        };
        let ttl = answer
            .answers
            .iter()
            .map(|r| r.ttl)
            .min()
            .unwrap_or(0)
            .min(CACHE_MAX_TTL);
        if ttl == 0 {
            return;
        }
        let mut cache = self.cache.lock();
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, c| c.stored.elapsed().as_secs() < u64::from(c.ttl));
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
        }
        let cached = Cached {
            message: answer.clone(),
            stored: Instant::now(),
            ttl,
        };
        cache.insert(key, cached);
    }
}

/// The cache key of a single-question query without EDNS options that change the answer
/// (DNSSEC-OK queries are not cached).
fn key(request: &Message) -> Option<Key> {
    let [query] = request.queries.as_slice() else {
        return None;
    };
    if request.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok)
        || request.metadata.checking_disabled
    {
        return None;
    }
    Some((
        query.name().to_ascii().to_ascii_lowercase(),
        u16::from(query.query_type()),
        u16::from(query.query_class()),
    ))
}

/// SERVFAIL for `request`, encoded.
fn servfail(request: &Message) -> Vec<u8> {
    let mut response = Message::new(
        request.metadata.id,
        MessageType::Response,
        request.metadata.op_code,
    );
    response.metadata.recursion_desired = request.metadata.recursion_desired;
    response.metadata.recursion_available = true;
    response.metadata.response_code = ResponseCode::ServFail;
    response.queries.clone_from(&request.queries);
    response.to_vec().unwrap_or_default()
}

/// Whether `bytes` answer the query `id` for `request`'s question.
fn matching(bytes: &[u8], id: u16, request: &Message) -> Option<Message> {
    let message = Message::from_vec(bytes).ok()?;
    let same_question = message.queries.len() == request.queries.len()
        && message.queries.iter().zip(&request.queries).all(|(a, b)| {
            a.query_type() == b.query_type()
                && a.query_class() == b.query_class()
                && a.name()
                    .to_ascii()
                    .eq_ignore_ascii_case(&b.name().to_ascii())
        });
    (message.metadata.id == id
        && message.metadata.message_type == MessageType::Response
        && same_question)
        .then_some(message)
}

/// An unspecified address of `upstream`'s family, any port.
fn any_of(upstream: SocketAddr) -> SocketAddr {
    match upstream {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

/// One UDP exchange with `upstream` (answers with another ID or question are ignored).
async fn ask_udp(
    upstream: SocketAddr,
    query: &[u8],
    id: u16,
    request: &Message,
    timeout: Duration,
) -> Option<(Message, Vec<u8>)> {
    let exchange = async {
        let socket = UdpSocket::bind(any_of(upstream)).await.ok()?;
        socket.connect(upstream).await.ok()?;
        socket.send(query).await.ok()?;
        let mut buffer = vec![0u8; 65535];
        loop {
            // A refused port shows as an error here: give up on this upstream.
            let len = socket.recv(&mut buffer).await.ok()?;
            let bytes = &buffer[..len];
            if let Some(message) = matching(bytes, id, request) {
                return Some((message, bytes.to_vec()));
            }
        }
    };
    tokio::time::timeout(timeout, exchange).await.ok().flatten()
}

/// One TCP exchange with `upstream` (two-byte length prefixes).
async fn ask_tcp(
    upstream: SocketAddr,
    query: &[u8],
    id: u16,
    request: &Message,
    timeout: Duration,
) -> Option<(Message, Vec<u8>)> {
    let exchange = async {
        let mut stream = TcpStream::connect(upstream).await.ok()?;
        let len = u16::try_from(query.len()).ok()?;
        let mut framed = len.to_be_bytes().to_vec();
        framed.extend_from_slice(query);
        stream.write_all(&framed).await.ok()?;
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await.ok()?;
        let mut bytes = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut bytes).await.ok()?;
        let message = matching(&bytes, id, request)?;
        Some((message, bytes))
    };
    tokio::time::timeout(timeout, exchange).await.ok().flatten()
}

#[cfg(test)]
mod tests;
