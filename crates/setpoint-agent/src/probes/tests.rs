//! Tests of the probe loop (paused time, scripted outcomes) and of each action against real
//! local listeners and processes.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ExecAction, HTTPGetAction, HTTPHeader, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::action::Action;
use super::runner::{run, Timing};
use super::*;

fn timing(success: u32, failure: u32) -> Timing {
    Timing {
        initial_delay: Duration::from_secs(5),
        period: Duration::from_secs(10),
        timeout: Duration::from_secs(1),
        success_threshold: success,
        failure_threshold: failure,
    }
}

/// A probe loop whose attempts return `script`'s outcomes in order (then succeed), counting
/// them.
struct Scripted {
    results: watch::Receiver<ProbeResult>,
    attempts: Arc<Mutex<u32>>,
    task: tokio::task::JoinHandle<()>,
}

fn scripted(kind: ProbeKind, timing: Timing, script: &[bool]) -> Scripted {
    let script = Arc::new(Mutex::new(script.iter().copied().collect::<VecDeque<_>>()));
    let attempts = Arc::new(Mutex::new(0));
    let (tx, results) = watch::channel(kind.initial());
    let counter = attempts.clone();
    let task = tokio::spawn(run(
        kind,
        timing,
        move || {
            *counter.lock() += 1;
            let ok = script.lock().pop_front().unwrap_or(true);
            async move {
                if ok {
                    Ok(())
                } else {
                    Err("scripted failure".to_owned())
                }
            }
        },
        tx,
    ));
    Scripted {
        results,
        attempts,
        task,
    }
}

impl Scripted {
    /// Lets the loop run for `d` of (paused) time.
    async fn run_for(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
    fn result(&self) -> ProbeResult {
        self.results.borrow().clone()
    }
    fn attempts(&self) -> u32 {
        *self.attempts.lock()
    }
}

#[tokio::test(start_paused = true)]
async fn probe_should_wait_initial_delay_then_attempt_every_period() {
    let p = scripted(ProbeKind::Readiness, timing(1, 3), &[]);
    p.run_for(Duration::from_millis(4_900)).await;
    assert_eq!(p.attempts(), 0, "nothing before initialDelaySeconds");
    p.run_for(Duration::from_millis(200)).await;
    assert_eq!(p.attempts(), 1, "first attempt right after the delay");
    p.run_for(Duration::from_secs(20)).await;
    assert_eq!(p.attempts(), 3, "then one every periodSeconds");
}

#[tokio::test(start_paused = true)]
async fn liveness_should_fail_only_after_failure_threshold_consecutive_failures() {
    // fail, fail, pass (resets), fail, fail, fail
    let p = scripted(
        ProbeKind::Liveness,
        timing(1, 3),
        &[false, false, true, false, false, false],
    );
    assert_eq!(p.result(), ProbeResult::Success, "liveness starts alive");
    p.run_for(Duration::from_secs(5 + 10 * 4 + 1)).await; // 5 attempts
    assert_eq!(p.attempts(), 5);
    assert_eq!(p.result(), ProbeResult::Success);
    p.run_for(Duration::from_secs(10)).await; // the 6th: third failure in a row
    assert_eq!(
        p.result(),
        ProbeResult::Failure("scripted failure".to_owned())
    );
    p.run_for(Duration::from_secs(60)).await;
    assert_eq!(p.attempts(), 6, "a failed liveness probe stops");
    assert!(p.task.is_finished());
}

#[tokio::test(start_paused = true)]
async fn readiness_should_start_not_ready_and_need_success_threshold_successes() {
    let p = scripted(
        ProbeKind::Readiness,
        timing(2, 1),
        &[true, false, true, true, false],
    );
    assert!(
        matches!(p.result(), ProbeResult::Failure(_)),
        "not ready at first"
    );
    p.run_for(Duration::from_secs(5 + 1)).await; // 1 success
    assert!(matches!(p.result(), ProbeResult::Failure(_)));
    p.run_for(Duration::from_secs(10)).await; // failure resets the streak
    p.run_for(Duration::from_secs(10)).await; // 1 success
    assert!(matches!(p.result(), ProbeResult::Failure(_)));
    p.run_for(Duration::from_secs(10)).await; // 2 successes
    assert_eq!(p.result(), ProbeResult::Success);
    p.run_for(Duration::from_secs(10)).await; // failureThreshold 1
    assert!(matches!(p.result(), ProbeResult::Failure(_)));
    p.run_for(Duration::from_secs(10)).await;
    assert_eq!(
        p.result(),
        ProbeResult::Failure("scripted failure".to_owned())
    );
    assert!(!p.task.is_finished(), "readiness keeps probing");
    p.run_for(Duration::from_secs(10)).await;
    assert_eq!(p.result(), ProbeResult::Success, "and recovers");
}

#[tokio::test(start_paused = true)]
async fn startup_should_go_from_unknown_to_success_and_stop() {
    let p = scripted(ProbeKind::Startup, timing(1, 5), &[false, false]);
    assert_eq!(p.result(), ProbeResult::Unknown);
    p.run_for(Duration::from_secs(5 + 10 + 1)).await;
    assert_eq!(
        p.result(),
        ProbeResult::Unknown,
        "two failures, under the threshold"
    );
    p.run_for(Duration::from_secs(10)).await;
    assert_eq!(p.result(), ProbeResult::Success);
    p.run_for(Duration::from_secs(100)).await;
    assert_eq!(p.attempts(), 3, "a started container's startup probe stops");
}

#[tokio::test(start_paused = true)]
async fn attempt_should_fail_when_it_outlives_the_timeout() {
    let (tx, results) = watch::channel(ProbeKind::Liveness.initial());
    let timing = Timing {
        failure_threshold: 1,
        ..timing(1, 1)
    };
    let task = tokio::spawn(run(
        ProbeKind::Liveness,
        timing,
        std::future::pending::<Result<(), String>>,
        tx,
    ));
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        results.borrow().clone(),
        ProbeResult::Failure("timed out after 1s".to_owned())
    );
    assert!(task.is_finished());
}

#[test]
fn timing_should_apply_the_api_defaults() {
    let t = Timing::of(&Probe::default());
    assert_eq!(t.initial_delay, Duration::ZERO);
    assert_eq!(t.period, Duration::from_secs(10));
    assert_eq!(t.timeout, Duration::from_secs(1));
    assert_eq!((t.success_threshold, t.failure_threshold), (1, 3));
}

// ---- actions against real listeners and processes ----

fn target(ports: &[(&str, u16)]) -> ProbeTarget {
    ProbeTarget {
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        container: Container {
            name: "app".to_owned(),
            ports: Some(
                ports
                    .iter()
                    .map(|(name, port)| ContainerPort {
                        name: Some((*name).to_owned()),
                        container_port: i32::from(*port),
                        ..ContainerPort::default()
                    })
                    .collect(),
            ),
            ..Container::default()
        },
        env: vec![("GREETING".to_owned(), "hello".to_owned())],
        working_dir: std::env::temp_dir(),
    }
}

fn http_probe(port: IntOrString, path: &str, scheme: Option<&str>) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            port,
            path: Some(path.to_owned()),
            scheme: scheme.map(str::to_owned),
            http_headers: Some(vec![HTTPHeader {
                name: "X-Probe".to_owned(),
                value: "yes".to_owned(),
            }]),
            ..HTTPGetAction::default()
        }),
        ..Probe::default()
    }
}

/// An HTTP server on 127.0.0.1 answering `/ok` with 200, `/moved` with 302 and anything else
/// with 500; records the requests' heads.
async fn http_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let head = read_head(&mut conn).await;
                let status = if head.starts_with("GET /ok ") {
                    "200 OK"
                } else if head.starts_with("GET /moved ") {
                    "302 Found"
                } else {
                    "500 Internal Server Error"
                };
                log.lock().push(head);
                let _ = conn
                    .write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n").as_bytes())
                    .await;
            });
        }
    });
    (port, seen)
}

async fn read_head(conn: &mut (impl tokio::io::AsyncRead + Unpin)) -> String {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[tokio::test]
async fn http_get_should_pass_on_2xx_3xx_and_fail_otherwise() {
    let (port, seen) = http_server().await;
    let t = target(&[("web", port)]);
    let check = |path: &str| {
        Action::of(
            &http_probe(IntOrString::Int(i32::from(port)), path, None),
            &t,
        )
        .check()
    };
    assert_eq!(check("/ok").await, Ok(()));
    assert_eq!(check("/moved").await, Ok(()));
    assert_eq!(
        check("/broken").await,
        Err("HTTP probe failed with statuscode: 500".to_owned())
    );
    let heads = seen.lock().clone();
    assert!(heads[0].contains("X-Probe: yes\r\n"), "{}", heads[0]);
    assert!(
        heads[0].contains(&format!("Host: 127.0.0.1:{port}\r\n")),
        "{}",
        heads[0]
    );
}

#[tokio::test]
async fn http_get_should_resolve_a_named_port() {
    let (port, _) = http_server().await;
    let t = target(&[("web", port)]);
    let named = Action::of(
        &http_probe(IntOrString::String("web".to_owned()), "/ok", None),
        &t,
    );
    assert_eq!(named.check().await, Ok(()));
    let unknown = Action::of(
        &http_probe(IntOrString::String("nope".to_owned()), "/ok", None),
        &t,
    );
    let err = unknown.check().await.expect_err("no such port");
    assert!(err.contains("\"nope\""), "{err}");
}

#[tokio::test]
async fn https_get_should_not_verify_the_server_certificate() {
    let cert =
        rcgen::generate_simple_self_signed(vec!["example.invalid".to_owned()]).expect("cert");
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            if let Ok(mut tls) = acceptor.accept(conn).await {
                let head = read_head(&mut tls).await;
                let status = if head.starts_with("GET /ok ") {
                    "204 No Content"
                } else {
                    "404 Not Found"
                };
                let _ = tls
                    .write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n").as_bytes())
                    .await;
                let _ = tls.shutdown().await;
            }
        }
    });
    let t = target(&[]);
    let probe = |path: &str| {
        Action::of(
            &http_probe(IntOrString::Int(i32::from(port)), path, Some("HTTPS")),
            &t,
        )
    };
    assert_eq!(probe("/ok").check().await, Ok(()));
    assert_eq!(
        probe("/missing").check().await,
        Err("HTTP probe failed with statuscode: 404".to_owned())
    );
}

#[tokio::test]
async fn tcp_socket_should_pass_when_a_connection_opens() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let probe = Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(i32::from(port)),
            ..TCPSocketAction::default()
        }),
        ..Probe::default()
    };
    assert_eq!(Action::of(&probe, &target(&[])).check().await, Ok(()));
    drop(listener);
    let err = Action::of(&probe, &target(&[]))
        .check()
        .await
        .expect_err("closed");
    assert!(
        err.starts_with(&format!("dial tcp 127.0.0.1:{port}")),
        "{err}"
    );
}

fn exec_probe(script: &str) -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(vec![
                "/bin/sh".to_owned(),
                "-c".to_owned(),
                script.to_owned(),
            ]),
        }),
        ..Probe::default()
    }
}

#[tokio::test]
async fn exec_should_run_with_the_containers_env_and_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut t = target(&[]);
    t.working_dir = dir.path().to_owned();
    std::fs::write(dir.path().join("marker"), "x").expect("write");
    let ok = Action::of(
        &exec_probe("test \"$GREETING\" = hello && test -f marker"),
        &t,
    );
    assert_eq!(ok.check().await, Ok(()));
    let failing = Action::of(&exec_probe("echo sick; exit 3"), &t);
    assert_eq!(
        failing.check().await,
        Err(
            "command [\"/bin/sh\", \"-c\", \"echo sick; exit 3\"] failed: exit code 3: sick"
                .to_owned()
        )
    );
}

#[tokio::test]
async fn spawned_liveness_probe_should_report_a_failing_exec() {
    let probe = Probe {
        period_seconds: Some(1),
        failure_threshold: Some(1),
        ..exec_probe("exit 1")
    };
    let handle = spawn_probe(ProbeKind::Liveness, probe, target(&[]));
    let mut results = handle.results();
    tokio::time::timeout(
        Duration::from_secs(30),
        results.wait_for(|r| matches!(r, ProbeResult::Failure(_))),
    )
    .await
    .expect("a verdict within 30s")
    .expect("the probe reports");
}

#[test]
fn unsupported_actions_should_fail_every_attempt_with_a_reason() {
    let t = target(&[]);
    let grpc = Probe {
        grpc: Some(Default::default()),
        ..Probe::default()
    };
    assert!(matches!(Action::of(&grpc, &t), Action::Invalid(m) if m.contains("grpc")));
    assert!(matches!(
        Action::of(&Probe::default(), &t),
        Action::Invalid(_)
    ));
}

#[tokio::test]
async fn exec_timing_out_should_kill_the_commands_whole_process_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pid_file = dir.path().join("pid");
    let script = format!("sleep 1000 & echo $! > {}; wait", pid_file.display());
    let attempt = Action::of(&exec_probe(&script), &target(&[])).check();
    let timed_out = tokio::time::timeout(Duration::from_secs(2), attempt).await;
    assert!(timed_out.is_err(), "the command runs until killed");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("the background sleep's pid")
        .trim()
        .parse()
        .expect("a pid");
    // The grandchild is gone (or a zombie awaiting its reaper, init).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let alive = stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'));
        if !alive {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sleep {pid} survived the probe"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
