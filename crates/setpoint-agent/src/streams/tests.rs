//! Whole sessions driven by the test clients over in-memory connections: remote commands
//! over WebSocket (v5, v4 base64, v1) and SPDY (v4, v2), port-forward over WebSocket, SPDY
//! and the SPDY-in-WebSocket tunnel against a local TCP echo server (1 MiB each way).

use bytes::Bytes;
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::channels::ChannelProtocol;
use super::spdy::frame::Frame;
use super::testkit::{echo_exit_3, echo_server, loopback, spdy_client, WsRead, WsWrite};
use super::upgrade::SpdyVersion;
use super::{portforward_spdy, portforward_ws, remote_spdy, remote_ws, tunnel, StreamFlags};

const ALL: StreamFlags = StreamFlags {
    stdin: true,
    stdout: true,
    stderr: true,
    tty: false,
};

fn megabyte() -> Vec<u8> {
    (0..1024 * 1024).map(|i: u32| (i % 251) as u8).collect()
}

fn exit_code_3(status: &[u8]) {
    let status: Value = serde_json::from_slice(status).unwrap();
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], "NonZeroExitCode");
    assert_eq!(status["details"]["causes"][0]["reason"], "ExitCode");
    assert_eq!(status["details"]["causes"][0]["message"], "3");
}

/// Collects (channel, bytes) frames until the close frame; answers the close.
async fn ws_until_close<R, W>(read: &mut WsRead<R>, write: &mut WsWrite<W>) -> Vec<(u8, Vec<u8>)>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut frames = Vec::new();
    while let Some((opcode, payload)) = read.frame().await {
        match opcode {
            0x2 => frames.push((payload[0], payload[1..].to_vec())),
            0x1 => {
                use base64::Engine as _;
                let data = base64::engine::general_purpose::STANDARD
                    .decode(&payload[1..])
                    .unwrap();
                frames.push((payload[0] - b'0', data));
            }
            0x8 => {
                assert_eq!(payload, 1000u16.to_be_bytes());
                write.frame(0x8, true, &payload).await;
                break;
            }
            other => panic!("unexpected opcode {other}"),
        }
    }
    frames
}

fn channel(frames: &[(u8, Vec<u8>)], wanted: u8) -> Vec<u8> {
    frames
        .iter()
        .filter(|(channel, _)| *channel == wanted)
        .flat_map(|(_, data)| data.clone())
        .collect()
}

#[tokio::test]
async fn websocket_v5_exec_should_echo_stdin_close_it_and_report_exit_code() {
    let (server, client) = tokio::io::duplex(1 << 20);
    let session = tokio::spawn(remote_ws::run(
        server,
        ChannelProtocol::V5,
        ALL,
        echo_exit_3,
    ));
    let (r, w) = tokio::io::split(client);
    let (mut read, mut write) = (WsRead(r), WsWrite(w));
    // The empty hello on stdout comes first.
    assert_eq!(read.frame().await, Some((0x2, vec![1])));
    write.binary(b"\x00hello ").await;
    write.binary(b"\x00world").await;
    write.binary(&[255, 0]).await;
    let frames = ws_until_close(&mut read, &mut write).await;
    assert_eq!(channel(&frames, 1), b"hello world");
    assert_eq!(channel(&frames, 2), b"err");
    exit_code_3(&channel(&frames, 3));
    session.await.unwrap();
}

#[tokio::test]
async fn websocket_v4_base64_exec_should_use_text_frames() {
    let (server, client) = tokio::io::duplex(1 << 20);
    let flags = StreamFlags {
        stdin: false,
        ..ALL
    };
    let session = tokio::spawn(remote_ws::run(
        server,
        ChannelProtocol::V4Base64,
        flags,
        echo_exit_3,
    ));
    let (r, w) = tokio::io::split(client);
    let (mut read, mut write) = (WsRead(r), WsWrite(w));
    assert_eq!(read.frame().await, Some((0x1, b"1".to_vec())));
    let frames = ws_until_close(&mut read, &mut write).await;
    assert_eq!(channel(&frames, 2), b"err");
    exit_code_3(&channel(&frames, 3));
    session.await.unwrap();
}

#[tokio::test]
async fn websocket_v1_exec_should_report_failure_as_text() {
    let (server, client) = tokio::io::duplex(1 << 20);
    let flags = StreamFlags {
        stdin: false,
        ..ALL
    };
    let session = tokio::spawn(remote_ws::run(
        server,
        ChannelProtocol::V1,
        flags,
        echo_exit_3,
    ));
    let (r, w) = tokio::io::split(client);
    let (mut read, mut write) = (WsRead(r), WsWrite(w));
    let frames = ws_until_close(&mut read, &mut write).await;
    let error = String::from_utf8(channel(&frames, 3)).unwrap();
    assert!(error.contains("exit status 3"), "{error}");
    session.await.unwrap();
}

/// Opens the remote-command streams as client-go does, one at a time, each after its reply.
async fn spdy_exec(version: SpdyVersion, types: &[&str]) -> (Vec<(u32, Vec<u8>)>, String) {
    let (server, client) = tokio::io::duplex(1 << 20);
    let session = tokio::spawn(remote_spdy::run(server, version, ALL, echo_exit_3));
    let (mut read, mut write) = spdy_client(client);
    for (i, kind) in types.iter().enumerate() {
        let id = 2 * u32::try_from(i).unwrap() + 1;
        write.open(id, false, &[("streamType", kind)]).await;
        assert!(
            matches!(read.frame().await, Some(Frame::SynReply { stream_id, .. }) if stream_id == id)
        );
    }
    // stdin is stream 3: data then FIN.
    write.data(3, false, b"over spdy").await;
    write.data(3, true, b"").await;
    let mut data: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut fins = Vec::new();
    loop {
        match read.frame().await {
            Some(Frame::Data {
                stream_id,
                fin,
                data: bytes,
            }) => {
                data.push((stream_id, bytes.to_vec()));
                if fin {
                    fins.push(stream_id);
                }
            }
            Some(Frame::GoAway { .. }) | None => break,
            Some(other) => panic!("unexpected {other:?}"),
        }
    }
    // stdout, stderr and error were each half-closed.
    fins.sort_unstable();
    assert_eq!(fins, [1, 5, 7]);
    drop(write);
    drop(read);
    session.await.unwrap();
    let error: Vec<u8> = data
        .iter()
        .filter(|(id, _)| *id == 1)
        .flat_map(|(_, d)| d.clone())
        .collect();
    (data, String::from_utf8(error).unwrap())
}

fn stream(data: &[(u32, Vec<u8>)], id: u32) -> Vec<u8> {
    data.iter()
        .filter(|(s, _)| *s == id)
        .flat_map(|(_, d)| d.clone())
        .collect()
}

#[tokio::test]
async fn spdy_v4_exec_should_echo_stdin_until_fin_and_report_status() {
    let (data, error) = spdy_exec(SpdyVersion::V4, &["error", "stdin", "stdout", "stderr"]).await;
    assert_eq!(stream(&data, 5), b"over spdy");
    assert_eq!(stream(&data, 7), b"err");
    exit_code_3(error.as_bytes());
}

#[tokio::test]
async fn spdy_v2_exec_should_report_failure_as_text() {
    let (_, error) = spdy_exec(SpdyVersion::V2, &["error", "stdin", "stdout", "stderr"]).await;
    assert!(error.contains("exit status 3"), "{error}");
}

#[tokio::test]
async fn websocket_port_forward_should_prefix_ports_and_move_a_megabyte() {
    let port = echo_server().await;
    let (server, client) = tokio::io::duplex(1 << 20);
    let session = tokio::spawn(portforward_ws::run(
        server,
        ChannelProtocol::V4,
        vec![port],
        loopback(),
    ));
    let (r, w) = tokio::io::split(client);
    let (mut read, mut write) = (WsRead(r), WsWrite(w));
    let prefix = port.to_le_bytes();
    assert_eq!(
        read.frame().await,
        Some((0x2, vec![0, prefix[0], prefix[1]]))
    );
    assert_eq!(
        read.frame().await,
        Some((0x2, vec![1, prefix[0], prefix[1]]))
    );
    let sent = megabyte();
    let writer = tokio::spawn({
        let sent = sent.clone();
        async move {
            for chunk in sent.chunks(60_000) {
                let mut message = vec![0u8];
                message.extend_from_slice(chunk);
                write.binary(&message).await;
            }
            write
        }
    });
    let mut received = Vec::new();
    while received.len() < sent.len() {
        let (opcode, payload) = read.frame().await.unwrap();
        assert_eq!((opcode, payload[0]), (0x2, 0));
        received.extend_from_slice(&payload[1..]);
    }
    assert_eq!(received, sent);
    let mut write = writer.await.unwrap();
    write.frame(0x8, true, &1000u16.to_be_bytes()).await;
    assert_eq!(read.frame().await.map(|f| f.0), Some(0x8));
    session.await.unwrap();
}

/// Forwards one connection over a SPDY client connection; returns the echoed bytes and the
/// error stream's text.
async fn spdy_forward<IO>(client: IO, port: u16, sent: Vec<u8>) -> (Vec<u8>, String)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (mut read, mut write) = spdy_client(client);
    let port = port.to_string();
    write
        .open(
            1,
            false,
            &[("streamType", "error"), ("port", &port), ("requestID", "0")],
        )
        .await;
    assert!(matches!(
        read.frame().await,
        Some(Frame::SynReply { stream_id: 1, .. })
    ));
    write
        .open(
            3,
            false,
            &[("streamType", "data"), ("port", &port), ("requestID", "0")],
        )
        .await;
    assert!(matches!(
        read.frame().await,
        Some(Frame::SynReply { stream_id: 3, .. })
    ));
    write.data(1, true, b"").await;
    let writer = tokio::spawn(async move {
        for chunk in sent.chunks(32 * 1024) {
            write.data(3, false, chunk).await;
        }
        write.data(3, true, b"").await;
        write
    });
    let (mut received, mut error) = (Vec::new(), Vec::new());
    let mut fins = 0;
    while fins < 2 {
        match read.frame().await {
            Some(Frame::Data {
                stream_id,
                fin,
                data,
            }) => {
                if stream_id == 3 {
                    received.extend_from_slice(&data);
                } else {
                    error.extend_from_slice(&data);
                }
                fins += usize::from(fin);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    drop(writer.await.unwrap());
    (received, String::from_utf8(error).unwrap())
}

#[tokio::test]
async fn spdy_port_forward_should_move_a_megabyte_and_report_dial_errors() {
    let port = echo_server().await;
    let (server, client) = tokio::io::duplex(1 << 20);
    let session = tokio::spawn(portforward_spdy::run(server, loopback()));
    let sent = megabyte();
    let (received, error) = spdy_forward(client, port, sent.clone()).await;
    assert_eq!(received, sent);
    assert_eq!(error, "");
    session.await.unwrap();

    // Nothing listens on a port just released.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let (server, client) = tokio::io::duplex(1 << 20);
    let session = tokio::spawn(portforward_spdy::run(server, loopback()));
    let (received, error) = spdy_forward(client, closed_port, b"x".to_vec()).await;
    assert!(received.is_empty());
    assert!(
        error.starts_with(&format!("error forwarding port {closed_port}")),
        "{error}"
    );
    session.await.unwrap();
}

#[tokio::test]
async fn tunnelled_spdy_port_forward_should_move_a_megabyte() {
    let port = echo_server().await;
    let (server, client) = tokio::io::duplex(1 << 20);
    let session = tokio::spawn(tunnel::run(server, loopback()));
    // The client side of the tunnel: SPDY bytes to and from WebSocket binary messages.
    let (spdy_side, pump) = tokio::io::duplex(1 << 20);
    let (r, w) = tokio::io::split(client);
    let (mut ws_read, mut ws_write) = (WsRead(r), WsWrite(w));
    let (mut from_spdy, mut to_spdy) = tokio::io::split(pump);
    let up = tokio::spawn(async move {
        let mut buf = vec![0u8; 50_000];
        loop {
            let n = from_spdy.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            ws_write.binary(&buf[..n]).await;
        }
        ws_write.frame(0x8, true, &1000u16.to_be_bytes()).await;
    });
    let down = tokio::spawn(async move {
        while let Some((opcode, payload)) = ws_read.frame().await {
            if opcode == 0x8 {
                break;
            }
            assert_eq!(opcode, 0x2);
            to_spdy.write_all(&payload).await.unwrap();
        }
        let _ = to_spdy.shutdown().await;
    });
    let sent = megabyte();
    let (received, error) = spdy_forward(spdy_side, port, sent.clone()).await;
    assert_eq!(received, sent);
    assert_eq!(error, "");
    up.await.unwrap();
    down.await.unwrap();
    session.await.unwrap();
}

#[test]
fn ports_should_parse_repeated_and_comma_separated_values() {
    assert_eq!(
        portforward_ws::ports("ports=80,8080&ports=9000").unwrap(),
        [80, 8080, 9000]
    );
    assert!(portforward_ws::ports("").is_err());
    assert!(portforward_ws::ports("ports=0").is_err());
    assert!(portforward_ws::ports("ports=http").is_err());
}

#[test]
fn outcome_payload_should_follow_the_protocol_version() {
    use super::{status::outcome_payload, CommandOutcome};
    assert_eq!(
        outcome_payload(&CommandOutcome::Success, true),
        Some(Bytes::from_static(br#"{"metadata":{},"status":"Success"}"#))
    );
    assert_eq!(outcome_payload(&CommandOutcome::Success, false), None);
    let error = outcome_payload(&CommandOutcome::Error("boom".into()), true).unwrap();
    let error: Value = serde_json::from_slice(&error).unwrap();
    assert_eq!(error["reason"], "InternalError");
    assert_eq!(error["code"], 500);
}

/// A command that produces nothing until its output is closed (the client went away), then
/// reports that through `seen`.
fn wait_for_client_to_leave(
    seen: tokio::sync::oneshot::Sender<()>,
) -> impl FnOnce(super::RemoteCommandSession) -> super::BoxFuture<()> {
    move |session| {
        Box::pin(async move {
            let stdout = session.stdout.unwrap();
            stdout.closed().await;
            let _ = seen.send(());
        })
    }
}

#[tokio::test]
async fn websocket_exec_should_close_output_when_the_client_leaves() {
    let (server, client) = tokio::io::duplex(1 << 16);
    let (seen_tx, seen) = tokio::sync::oneshot::channel();
    let session = tokio::spawn(remote_ws::run(
        server,
        ChannelProtocol::V5,
        ALL,
        wait_for_client_to_leave(seen_tx),
    ));
    let (r, w) = tokio::io::split(client);
    let (mut read, mut write) = (WsRead(r), WsWrite(w));
    assert_eq!(read.frame().await, Some((0x2, vec![1])));
    write.frame(0x8, true, &1001u16.to_be_bytes()).await;
    seen.await.unwrap();
    session.await.unwrap();
}

#[tokio::test]
async fn spdy_exec_should_close_output_when_the_client_leaves() {
    let (server, client) = tokio::io::duplex(1 << 16);
    let (seen_tx, seen) = tokio::sync::oneshot::channel();
    let session = tokio::spawn(remote_spdy::run(
        server,
        SpdyVersion::V4,
        ALL,
        wait_for_client_to_leave(seen_tx),
    ));
    let (mut read, mut write) = spdy_client(client);
    for (id, kind) in [(1, "error"), (3, "stdin"), (5, "stdout"), (7, "stderr")] {
        write.open(id, false, &[("streamtype", kind)]).await;
        assert!(matches!(read.frame().await, Some(Frame::SynReply { .. })));
    }
    drop(write);
    drop(read);
    seen.await.unwrap();
    session.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn spdy_port_forward_should_drop_a_pair_left_incomplete() {
    let (server, client) = tokio::io::duplex(1 << 16);
    let session = tokio::spawn(portforward_spdy::run(server, loopback()));
    let (mut read, mut write) = spdy_client(client);
    write
        .open(
            1,
            false,
            &[("streamtype", "error"), ("port", "80"), ("requestid", "0")],
        )
        .await;
    assert!(matches!(
        read.frame().await,
        Some(Frame::SynReply { stream_id: 1, .. })
    ));
    tokio::time::advance(std::time::Duration::from_secs(31)).await;
    // The next stream's arrival expires the lonely error stream.
    write
        .open(
            3,
            false,
            &[("streamtype", "error"), ("port", "80"), ("requestid", "1")],
        )
        .await;
    let mut error = Vec::new();
    loop {
        match read.frame().await {
            Some(Frame::Data {
                stream_id: 1,
                fin,
                data,
            }) => {
                error.extend_from_slice(&data);
                if fin {
                    break;
                }
            }
            Some(Frame::SynReply { stream_id: 3, .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(String::from_utf8(error)
        .unwrap()
        .starts_with("timed out waiting"));
    drop(write);
    drop(read);
    session.await.unwrap();
}

/// A tty command that prints the first terminal size it is given, then succeeds.
fn print_first_size(mut session: super::RemoteCommandSession) -> super::BoxFuture<()> {
    Box::pin(async move {
        assert!(session.stderr.is_none(), "no stderr with a tty");
        let size = session.resize.as_mut().unwrap().recv().await.unwrap();
        let text = format!("{}x{}", size.width, size.height);
        session
            .stdout
            .take()
            .unwrap()
            .send(Bytes::from(text))
            .await
            .unwrap();
        let _ = session.outcome.send(super::CommandOutcome::Success);
    })
}

const TTY: StreamFlags = StreamFlags {
    stdin: true,
    stdout: true,
    stderr: false,
    tty: true,
};

#[tokio::test]
async fn websocket_exec_should_deliver_resizes_and_report_success() {
    let (server, client) = tokio::io::duplex(1 << 16);
    let session = tokio::spawn(remote_ws::run(
        server,
        ChannelProtocol::V5,
        TTY,
        print_first_size,
    ));
    let (r, w) = tokio::io::split(client);
    let (mut read, mut write) = (WsRead(r), WsWrite(w));
    write.binary(b"\x04{\"Width\":120,\"Height\":40}\n").await;
    let frames = ws_until_close(&mut read, &mut write).await;
    assert_eq!(channel(&frames, 1), b"120x40");
    let status: Value = serde_json::from_slice(&channel(&frames, 3)).unwrap();
    assert_eq!(status["status"], "Success");
    session.await.unwrap();
}

#[tokio::test]
async fn spdy_v3_exec_should_wait_for_the_resize_stream_and_deliver_sizes() {
    let (server, client) = tokio::io::duplex(1 << 16);
    let session = tokio::spawn(remote_spdy::run(
        server,
        SpdyVersion::V3,
        TTY,
        print_first_size,
    ));
    let (mut read, mut write) = spdy_client(client);
    for (id, kind) in [(1, "error"), (3, "stdin"), (5, "stdout"), (7, "resize")] {
        write.open(id, false, &[("streamtype", kind)]).await;
        assert!(matches!(read.frame().await, Some(Frame::SynReply { .. })));
    }
    write
        .data(7, false, b"{\"Width\":80,\"Height\":24}\n")
        .await;
    let mut stdout = Vec::new();
    loop {
        match read.frame().await {
            Some(Frame::Data {
                stream_id: 5, data, ..
            }) => stdout.extend_from_slice(&data),
            Some(Frame::Data {
                stream_id: 1, data, ..
            }) => assert!(data.is_empty(), "v3 success is silent"),
            Some(Frame::GoAway { .. }) => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(stdout, b"80x24");
    drop(write);
    drop(read);
    session.await.unwrap();
}

/// A tty command that writes at once and succeeds, without waiting for anything.
fn say_hi_at_once(session: super::RemoteCommandSession) -> super::BoxFuture<()> {
    Box::pin(async move {
        let stdout = session.stdout.unwrap();
        stdout.send(Bytes::from_static(b"hi")).await.unwrap();
        drop(stdout);
        let _ = session.outcome.send(super::CommandOutcome::Success);
    })
}

/// client-go drops output that arrives before it has created its streams, so with a terminal
/// the output waits for the client's first message (kubectl sends the size at once)...
#[tokio::test(start_paused = true)]
async fn websocket_tty_output_should_wait_for_the_clients_first_message() {
    use std::time::Duration;
    let (server, client) = tokio::io::duplex(1 << 16);
    let session = tokio::spawn(remote_ws::run(
        server,
        ChannelProtocol::V5,
        TTY,
        say_hi_at_once,
    ));
    let started = tokio::time::Instant::now();
    let (r, w) = tokio::io::split(client);
    let (mut read, mut write) = (WsRead(r), WsWrite(w));
    // Not even the hello before the client has spoken (client-go would log it as unknown).
    let early = tokio::time::timeout(Duration::from_millis(200), read.frame()).await;
    assert!(early.is_err(), "a frame before the client spoke: {early:?}");
    write.binary(b"\x04{\"Width\":80,\"Height\":24}\n").await;
    assert_eq!(read.frame().await, Some((0x2, vec![1])), "the hello first");
    let frames = ws_until_close(&mut read, &mut write).await;
    assert_eq!(channel(&frames, 1), b"hi");
    assert!(started.elapsed() < Duration::from_millis(400));
    session.await.unwrap();
}

/// ...but never longer than the grace, for clients that stay silent.
#[tokio::test(start_paused = true)]
async fn websocket_tty_output_should_go_after_the_grace_to_a_silent_client() {
    use std::time::Duration;
    let (server, client) = tokio::io::duplex(1 << 16);
    let session = tokio::spawn(remote_ws::run(
        server,
        ChannelProtocol::V5,
        TTY,
        say_hi_at_once,
    ));
    let started = tokio::time::Instant::now();
    let (r, w) = tokio::io::split(client);
    let (mut read, mut write) = (WsRead(r), WsWrite(w));
    let frames = ws_until_close(&mut read, &mut write).await;
    assert_eq!(channel(&frames, 1), b"hi");
    let status: Value = serde_json::from_slice(&channel(&frames, 3)).unwrap();
    assert_eq!(status["status"], "Success");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    session.await.unwrap();
}
