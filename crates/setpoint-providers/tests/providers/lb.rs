//! The balancer's data plane in-process (`lb::proxy::run` on 127.0.0.1, free ports): TCP
//! connections spread round robin over two backends, a backend that dies is skipped (the
//! clients see no error), bytes are copied intact both ways, the configuration file is
//! reloaded in place (backends swapped, a port added), and UDP datagrams go to a backend and
//! its answers come back. As root with `nft`, the same spreading and skipping done by the
//! kernel (`forwarding: Kernel`): the balancer's table DNATs, follows the backends' health and
//! goes with the balancer.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use setpoint_providers::lb::config::{
    digest, state_path, Algorithm, BalancerConfig, Forwarding, HealthCheck, PortConfig, Protocol,
    ProxyState,
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
        forwarding: Forwarding::Userspace,
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

/// Replaces the configuration file in one step, as the supervisor does: a balancer reading it
/// meanwhile sees the old bytes or the new ones, never a truncated file (a balancer starting
/// on an empty file fails at once).
fn write_config(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).expect("write the configuration");
    std::fs::rename(&tmp, path).expect("move the configuration into place");
}

/// Writes `config` and waits until the balancer reports it applied.
async fn apply(path: &Path, config: &BalancerConfig) -> ProxyState {
    let bytes = config.to_bytes();
    write_config(path, &bytes);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let state: Option<ProxyState> = std::fs::read(state_path(path))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(state) = state.filter(|s| s.applied == digest(&bytes)) {
            return state;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never applied: the configuration's digest is {}, the state file says {:?}",
            digest(&bytes),
            std::fs::read_to_string(state_path(path))
        );
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
    write_config(&path, &config(vec![tcp(port, &[a, b])]).to_bytes());
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
    write_config(&path, &wanted.to_bytes());
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

fn can_program_nftables() -> bool {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    });
    root && std::process::Command::new("nft")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn nft_table(table: &str) -> Option<String> {
    let out = std::process::Command::new("nft")
        .args(["list", "table", "ip", table])
        .output()
        .expect("nft ran");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What the server behind `at` says to a new connection; `None` when it cannot connect.
async fn try_ask(at: SocketAddr) -> Option<String> {
    let mut stream = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(at))
        .await
        .ok()?
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.ok()?;
    Some(answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_kernel_the_balancer_should_spread_follow_health_and_remove_its_table() {
    if !can_program_nftables() {
        eprintln!("skipped: forwarding in the kernel needs root and nft");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.json");
    let table = setpoint_providers::lb::proxy::kernel::table_name(&path);
    let (a, _a) = name_server("a").await;
    let (b, b_task) = name_server("b").await;
    let port = free_port();
    // An address of this test's own on lo (all of 127.0.0.0/8 is local).
    let pid = std::process::id();
    let address: std::net::Ipv4Addr =
        [127, 0, 150 + (pid % 50) as u8, 1 + (pid % 200) as u8].into();
    let at = SocketAddr::from((address, port));
    let kernel = |ports: Vec<PortConfig>| BalancerConfig {
        address: address.into(),
        forwarding: Forwarding::Kernel,
        ..config(ports)
    };
    write_config(&path, &kernel(vec![tcp(port, &[a, b])]).to_bytes());
    let stop = CancellationToken::new();
    let balancer = tokio::spawn({
        let path = path.clone();
        let stop = stop.clone();
        async move { setpoint_providers::lb::proxy::run(&path, stop.cancelled_owned()).await }
    });
    let state = apply(&path, &kernel(vec![tcp(port, &[a, b])])).await;
    assert_eq!(state.kernel, [format!("TCP/{port}")], "{state:?}");
    let rules = nft_table(&table).expect("the balancer's table exists");
    assert!(rules.contains(&format!("ip daddr {address}")), "{rules}");
    assert!(rules.contains("numgen inc mod 2"), "{rules}");

    // Round robin by the kernel: turns alternate.
    let mut answers = Vec::new();
    for _ in 0..6 {
        answers.push(try_ask(at).await.expect("an answer"));
    }
    assert_eq!(
        answers.iter().filter(|x| *x == "a").count(),
        3,
        "{answers:?}"
    );
    assert_eq!(
        answers.iter().filter(|x| *x == "b").count(),
        3,
        "{answers:?}"
    );

    // b dies: once its check fails (the kernel cannot retry a refused connection), the table
    // sends everything to a.
    b_task.abort();
    let _ = b_task.await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut in_a_row = 0;
    while in_a_row < 6 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "b never left the table"
        );
        if try_ask(at).await.as_deref() == Some("a") {
            in_a_row += 1;
        } else {
            in_a_row = 0;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let rules = nft_table(&table).expect("the table is still there");
    assert!(!rules.contains(&b.port().to_string()), "{rules}");

    // Least connections is user space's: the table goes, the listener serves.
    let least = BalancerConfig {
        algorithm: Algorithm::LeastConnections,
        ..kernel(vec![tcp(port, &[a])])
    };
    let state = apply(&path, &least).await;
    assert!(state.kernel.is_empty(), "{state:?}");
    assert!(nft_table(&table).is_none(), "no table for user space");
    assert_eq!(try_ask(at).await.as_deref(), Some("a"));

    // Back to round robin, then the balancer stops: its table goes with it.
    let state = apply(&path, &kernel(vec![tcp(port, &[a])])).await;
    assert_eq!(state.kernel.len(), 1, "{state:?}");
    stop.cancel();
    balancer.await.expect("joined").expect("ran");
    assert!(
        nft_table(&table).is_none(),
        "the table outlived its balancer"
    );
}
