//! The balancer's data plane in-process (`lb::proxy::run` on 127.0.0.1, free ports): TCP
//! connections spread round robin over two backends, a backend that dies is skipped (the
//! clients see no error), bytes are copied intact both ways, the configuration file is
//! reloaded in place (backends swapped, a port added), and UDP datagrams go to a backend and
//! its answers come back.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use setpoint_providers::lb::config::{
    digest, state_path, Algorithm, BalancerConfig, HealthCheck, PortConfig, Protocol, ProxyState,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio_util::sync::CancellationToken;

/// A TCP server answering every connection with `name` (then closing); stops when aborted.
async fn name_server(name: &'static str) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.write_all(name.as_bytes()).await;
        }
    });
    (addr, task)
}

/// A TCP echo server.
async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn config(ports: Vec<PortConfig>) -> BalancerConfig {
    BalancerConfig {
        address: "127.0.0.1".parse().expect("ip"),
        algorithm: Algorithm::RoundRobin,
        health_check: HealthCheck {
            interval_millis: 50,
            timeout_millis: 500,
            fall: 1,
            rise: 1,
        },
        ports,
    }
}

fn tcp(port: u16, backends: &[SocketAddr]) -> PortConfig {
    PortConfig {
        name: String::new(),
        protocol: Protocol::Tcp,
        port,
        backends: backends.to_vec(),
    }
}

/// Writes `config` and waits until the balancer reports it applied.
async fn apply(path: &Path, config: &BalancerConfig) -> ProxyState {
    let bytes = config.to_bytes();
    std::fs::write(path, &bytes).expect("write the configuration");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let state: Option<ProxyState> = std::fs::read(state_path(path))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(state) = state.filter(|s| s.applied == digest(&bytes)) {
            return state;
        }
        assert!(tokio::time::Instant::now() < deadline, "never applied");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the server behind `port` says to a new connection.
async fn ask(port: u16) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_balancer_should_spread_skip_dead_backends_copy_bytes_and_reload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.json");
    let (a, _a) = name_server("a").await;
    let (b, b_task) = name_server("b").await;
    let port = free_port();
    std::fs::write(&path, config(vec![tcp(port, &[a, b])]).to_bytes()).expect("write");
    let stop = CancellationToken::new();
    let balancer = tokio::spawn({
        let path = path.clone();
        let stop = stop.clone();
        async move { setpoint_providers::lb::proxy::run(&path, stop.cancelled_owned()).await }
    });
    let state = apply(&path, &config(vec![tcp(port, &[a, b])])).await;
    assert_eq!(state.listening, ["TCP/80".replace("80", &port.to_string())]);
    assert!(state.errors.is_empty(), "{:?}", state.errors);

    // Round robin: turns alternate.
    let mut answers = Vec::new();
    for _ in 0..6 {
        answers.push(ask(port).await);
    }
    assert_eq!(
        answers.iter().filter(|a| *a == "a").count(),
        3,
        "{answers:?}"
    );
    assert_eq!(
        answers.iter().filter(|a| *a == "b").count(),
        3,
        "{answers:?}"
    );

    // b dies: every client still gets an answer, from a.
    b_task.abort();
    let _ = b_task.await;
    for _ in 0..6 {
        assert_eq!(ask(port).await, "a");
    }

    // Reload: an echo backend instead, and a second port; a megabyte goes through intact.
    let echo = echo_server().await;
    let second = free_port();
    let state = apply(&path, &config(vec![tcp(port, &[echo]), tcp(second, &[a])])).await;
    assert_eq!(state.listening.len(), 2, "{state:?}");
    assert_eq!(ask(second).await, "a");
    let payload: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let (mut r, mut w) = stream.split();
    let send = async {
        w.write_all(&payload).await.expect("send");
        w.shutdown().await.expect("half-close");
    };
    let mut back = Vec::new();
    let receive = r.read_to_end(&mut back);
    let ((), received) = tokio::join!(send, receive);
    received.expect("receive");
    assert!(back == payload, "{} bytes came back, altered", back.len());

    // A port dropped from the file stops listening.
    let state = apply(&path, &config(vec![tcp(port, &[echo])])).await;
    assert_eq!(state.listening.len(), 1, "{state:?}");
    assert!(TcpStream::connect(("127.0.0.1", second)).await.is_err());

    stop.cancel();
    balancer.await.expect("joined").expect("ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_balancer_should_forward_udp_datagrams_and_their_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.json");
    let backend = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let backend_addr = backend.local_addr().expect("addr");
    tokio::spawn(async move {
        let mut buffer = [0u8; 1500];
        while let Ok((len, peer)) = backend.recv_from(&mut buffer).await {
            let mut reply = b"echo:".to_vec();
            reply.extend_from_slice(&buffer[..len]);
            let _ = backend.send_to(&reply, peer).await;
        }
    });
    let port = UdpSocket::bind("127.0.0.1:0")
        .await
        .and_then(|s| s.local_addr())
        .expect("a free UDP port")
        .port();
    let udp = PortConfig {
        name: "dns".to_owned(),
        protocol: Protocol::Udp,
        port,
        backends: vec![backend_addr],
    };
    let wanted = config(vec![udp]);
    std::fs::write(&path, wanted.to_bytes()).expect("write");
    let stop = CancellationToken::new();
    let balancer = tokio::spawn({
        let path = path.clone();
        let stop = stop.clone();
        async move { setpoint_providers::lb::proxy::run(&path, stop.cancelled_owned()).await }
    });
    let state = apply(&path, &wanted).await;
    assert_eq!(state.listening, [format!("UDP/{port}")]);

    let client = UdpSocket::bind("127.0.0.1:0").await.expect("client");
    client.connect(("127.0.0.1", port)).await.expect("connect");
    for message in ["one", "two"] {
        client.send(message.as_bytes()).await.expect("send");
        let mut buffer = [0u8; 1500];
        let len = tokio::time::timeout(Duration::from_secs(10), client.recv(&mut buffer))
            .await
            .expect("an answer in time")
            .expect("recv");
        assert_eq!(&buffer[..len], format!("echo:{message}").as_bytes());
    }
    stop.cancel();
    balancer.await.expect("joined").expect("ran");
}
