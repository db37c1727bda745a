//! Forwarding against fake upstreams on 127.0.0.1: one that answers a fixed record, one that
//! never answers, one that answers truncated over UDP (and in full over TCP).

use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hickory_proto::op::{Edns, OpCode, Query};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::dns::records::tests::cluster;
use crate::dns::server::handle;

/// How a fake upstream behaves over UDP (over TCP it always answers in full).
#[derive(Clone, Copy)]
enum Fake {
    Answer,
    Silent,
    Truncated,
}

/// A fake upstream: its address, and how many queries it got (UDP, TCP).
struct Upstream {
    at: SocketAddr,
    udp: Arc<AtomicUsize>,
    tcp: Arc<AtomicUsize>,
    stop: CancellationToken,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The answer the fake gives: `192.0.2.1`, TTL 60, for the query's name (none, TC set, when
/// `truncated`).
fn fixed_answer(query: &Message, truncated: bool) -> Vec<u8> {
    let mut reply = Message::new(query.metadata.id, MessageType::Response, OpCode::Query);
    reply.metadata.recursion_desired = query.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.queries.clone_from(&query.queries);
    if truncated {
        reply.metadata.truncation = true;
    } else if let Some(q) = query.queries.first() {
        let data = RData::A(A(Ipv4Addr::new(192, 0, 2, 1)));
        reply
            .answers
            .push(Record::from_rdata(q.name().clone(), 60, data));
    }
    reply.to_vec().expect("encode")
}

async fn fake(behaviour: Fake) -> Upstream {
    // The same port for both: a free UDP port may be taken for TCP, so try again then.
    let mut attempts = 0;
    let (udp, tcp, at) = loop {
        let udp = UdpSocket::bind("127.0.0.1:0").await.expect("bind udp");
        let at = udp.local_addr().expect("addr");
        match TcpListener::bind(at).await {
            Ok(tcp) => break (udp, tcp, at),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && attempts < 50 => attempts += 1,
            Err(e) => panic!("bind tcp {at}: {e}"),
        }
    };
    let (udp_count, tcp_count) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let stop = CancellationToken::new();
    tokio::spawn({
        let (count, stop) = (udp_count.clone(), stop.clone());
        async move {
            let mut buffer = vec![0u8; 4096];
            loop {
                let received = tokio::select! {
                    r = udp.recv_from(&mut buffer) => r,
                    () = stop.cancelled() => return,
                };
                let Ok((len, peer)) = received else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                let query = Message::from_vec(&buffer[..len]).expect("a query");
                let reply = match behaviour {
                    Fake::Answer => fixed_answer(&query, false),
                    Fake::Truncated => fixed_answer(&query, true),
                    Fake::Silent => continue,
                };
                let _ = udp.send_to(&reply, peer).await;
            }
        }
    });
    tokio::spawn({
        let (count, stop) = (tcp_count.clone(), stop.clone());
        async move {
            loop {
                let accepted = tokio::select! {
                    a = tcp.accept() => a,
                    () = stop.cancelled() => return,
                };
                let Ok((mut stream, _)) = accepted else {
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let mut len = [0u8; 2];
                if stream.read_exact(&mut len).await.is_err() {
                    continue;
                }
                let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
                if stream.read_exact(&mut query).await.is_err() {
                    continue;
                }
                let query = Message::from_vec(&query).expect("a query");
                let reply = fixed_answer(&query, false);
                let len = u16::try_from(reply.len()).expect("len");
                let mut framed = len.to_be_bytes().to_vec();
                framed.extend_from_slice(&reply);
                let _ = stream.write_all(&framed).await;
            }
        }
    });
    Upstream {
        at,
        udp: udp_count,
        tcp: tcp_count,
        stop,
    }
}

/// A forwarder to `servers`, as if listening on 127.0.0.1:5399, with a short timeout.
fn forwarder(servers: Vec<SocketAddr>) -> Forwarder {
    Forwarder::new(DnsUpstream::Fixed(servers), addr("127.0.0.1:5399"))
        .expect("a forwarder")
        .with_timeout(Duration::from_millis(300))
}

fn addr(text: &str) -> SocketAddr {
    text.parse().expect("an address")
}

fn query(id: u16, name: &str) -> Vec<u8> {
    let mut query = Message::new(id, MessageType::Query, OpCode::Query);
    query.metadata.recursion_desired = true;
    query.queries.push(Query::query(
        Name::from_str(name).expect("name"),
        RecordType::A,
    ));
    query.to_vec().expect("encode")
}

/// Asks `name` through the server's query handling (`limit`: UDP's 512, or `None` for TCP).
async fn ask(forwarder: &Forwarder, id: u16, name: &str, limit: Option<usize>) -> Message {
    let reply = handle(
        &query(id, name),
        &cluster(),
        "cluster.local",
        Some(forwarder),
        limit,
    )
    .await
    .expect("a reply");
    Message::from_vec(&reply).expect("decode")
}

fn addresses(message: &Message) -> Vec<String> {
    message.answers.iter().map(|r| r.data.to_string()).collect()
}

#[test]
fn nameservers_are_read_from_resolv_conf_text() {
    let text = "# comment\nsearch example.org\nnameserver 10.0.0.2\nnameserver  ::1\n\
                nameserver fe80::1%eth0\nnameserver bogus\noptions ndots:2\n";
    assert_eq!(nameservers(text), [addr("10.0.0.2:53"), addr("[::1]:53")]);
}

#[tokio::test]
async fn outside_names_are_forwarded_and_the_client_id_restored() {
    let up = fake(Fake::Answer).await;
    let forwarder = forwarder(vec![up.at]);
    let reply = ask(&forwarder, 4242, "example.org.", Some(512)).await;
    assert_eq!(reply.metadata.id, 4242);
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert_eq!(addresses(&reply), ["192.0.2.1"]);
    assert_eq!(up.udp.load(Ordering::SeqCst), 1);
    assert_eq!(up.tcp.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_silent_upstream_is_skipped_for_the_next() {
    let (silent, good) = (fake(Fake::Silent).await, fake(Fake::Answer).await);
    // Over UDP: the silent one times out and the next one is asked.
    let forwarder = forwarder(vec![silent.at, good.at]);
    let reply = ask(&forwarder, 7, "silent-then-good.example.", Some(512)).await;
    assert_eq!(reply.metadata.id, 7);
    assert_eq!(addresses(&reply), ["192.0.2.1"]);
    assert_eq!(silent.udp.load(Ordering::SeqCst), 1);
    assert_eq!(good.udp.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn servfail_when_every_upstream_fails() {
    // A closed port: bind, note the address, close.
    let closed = {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        socket.local_addr().expect("addr")
    };
    let forwarder = forwarder(vec![closed]);
    let reply = ask(&forwarder, 99, "nowhere.example.", Some(512)).await;
    assert_eq!(reply.metadata.id, 99);
    assert_eq!(reply.metadata.response_code, ResponseCode::ServFail);
    assert!(reply.answers.is_empty());
}

#[tokio::test]
async fn a_truncated_udp_answer_is_asked_again_over_tcp() {
    let up = fake(Fake::Truncated).await;
    let forwarder = forwarder(vec![up.at]);
    let reply = ask(&forwarder, 11, "big.example.", Some(512)).await;
    assert_eq!(reply.metadata.id, 11);
    assert!(!reply.metadata.truncation);
    assert_eq!(addresses(&reply), ["192.0.2.1"]);
    assert_eq!(up.udp.load(Ordering::SeqCst), 1);
    assert_eq!(up.tcp.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tcp_clients_are_forwarded_over_tcp() {
    let up = fake(Fake::Silent).await;
    let forwarder = forwarder(vec![up.at]);
    let reply = ask(&forwarder, 12, "tcp.example.", None).await;
    assert_eq!(addresses(&reply), ["192.0.2.1"]);
    assert_eq!(up.udp.load(Ordering::SeqCst), 0);
    assert_eq!(up.tcp.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn cluster_names_are_never_forwarded() {
    let up = fake(Fake::Answer).await;
    let forwarder = forwarder(vec![up.at]);
    let web = ask(&forwarder, 1, "web.default.svc.cluster.local.", Some(512)).await;
    assert_eq!(addresses(&web), ["10.96.0.10"]);
    let missing = ask(&forwarder, 2, "nope.default.svc.cluster.local.", Some(512)).await;
    assert_eq!(missing.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(up.udp.load(Ordering::SeqCst), 0);
    assert_eq!(up.tcp.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn without_a_forwarder_outside_names_are_refused() {
    let reply = handle(
        &query(3, "example.org."),
        &cluster(),
        "cluster.local",
        None,
        Some(512),
    )
    .await
    .expect("a reply");
    let reply = Message::from_vec(&reply).expect("decode");
    assert_eq!(reply.metadata.response_code, ResponseCode::Refused);
    assert!(Forwarder::new(DnsUpstream::None, addr("127.0.0.1:53")).is_none());
}

#[tokio::test]
async fn the_resolver_itself_is_never_an_upstream() {
    let own = addr("127.0.0.1:5399");
    let other = addr("127.0.0.53:53");
    let forwarder = forwarder(vec![own, other, addr("[::ffff:127.0.0.1]:5399")]);
    assert_eq!(forwarder.upstreams(), [other]);
    // Listening on every address: any loopback address on our port is us.
    let any = Forwarder::new(
        DnsUpstream::Fixed(vec![addr("127.0.0.5:53"), addr("10.0.0.2:53")]),
        addr("0.0.0.0:53"),
    )
    .expect("a forwarder");
    assert_eq!(any.upstreams(), [addr("10.0.0.2:53")]);
    // Only ourselves left: SERVFAIL at once, nothing sent anywhere.
    let looping = Forwarder::new(DnsUpstream::Fixed(vec![own]), own).expect("a forwarder");
    let reply = ask(&looping, 5, "loop.example.", Some(512)).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::ServFail);
}

#[test]
fn resolv_conf_is_read_again_when_it_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("resolv.conf");
    std::fs::write(&path, "nameserver 10.0.0.2\n").expect("write");
    let forwarder = Forwarder::new(DnsUpstream::ResolvConf(path.clone()), addr("127.0.0.1:53"))
        .expect("a forwarder");
    assert_eq!(forwarder.upstreams(), [addr("10.0.0.2:53")]);
    // Another length: seen even within the file system's time resolution. The resolver's own
    // address in the file is left out.
    std::fs::write(
        &path,
        "nameserver 10.0.0.3\nnameserver 127.0.0.1\nnameserver 10.0.0.44\n",
    )
    .expect("write");
    assert_eq!(
        forwarder.upstreams(),
        [addr("10.0.0.3:53"), addr("10.0.0.44:53")]
    );
    std::fs::remove_file(&path).expect("remove");
    assert!(forwarder.upstreams().is_empty());
}

#[tokio::test]
async fn positive_answers_are_cached() {
    let up = fake(Fake::Answer).await;
    let forwarder = forwarder(vec![up.at]);
    let first = ask(&forwarder, 21, "cached.example.", Some(512)).await;
    let second = ask(&forwarder, 22, "CACHED.example.", Some(512)).await;
    assert_eq!(second.metadata.id, 22);
    assert_eq!(addresses(&first), addresses(&second));
    assert!(second.answers.iter().all(|r| r.ttl <= 60 && r.ttl > 0));
    assert_eq!(up.udp.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_server_forwards_over_its_udp_socket() {
    let up = fake(Fake::Answer).await;
    let stop = CancellationToken::new();
    let (bound, task) = crate::dns::server::serve(
        addr("127.0.0.1:0"),
        Arc::new(cluster()),
        "cluster.local".to_owned(),
        DnsUpstream::Fixed(vec![up.at]),
        stop.clone(),
    )
    .await
    .expect("serve");
    let client = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let mut with_edns = Message::from_vec(&query(31, "via-server.example.")).expect("decode");
    with_edns.edns = Some(Edns::new());
    client
        .send_to(&with_edns.to_vec().expect("encode"), bound)
        .await
        .expect("send");
    let mut buffer = vec![0u8; 4096];
    let len = tokio::time::timeout(Duration::from_secs(20), client.recv(&mut buffer))
        .await
        .expect("an answer in time")
        .expect("recv");
    let reply = Message::from_vec(&buffer[..len]).expect("decode");
    assert_eq!(reply.metadata.id, 31);
    assert_eq!(addresses(&reply), ["192.0.2.1"]);
    stop.cancel();
    let _ = task.await;
}
