//! Tests of running a command for a session: pipes, stdin EOF, exit codes, a terminal,
//! resizes, and the client going away.

use std::time::Duration;

use bytes::Bytes;
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};

use super::run;
use crate::streams::{CommandOutcome, RemoteCommandSession, StreamFlags, TerminalSize};

struct Client {
    stdin: Option<mpsc::Sender<Bytes>>,
    stdout: mpsc::Receiver<Bytes>,
    stderr: mpsc::Receiver<Bytes>,
    resize: mpsc::Sender<TerminalSize>,
    outcome: oneshot::Receiver<CommandOutcome>,
}

fn open(flags: StreamFlags) -> (RemoteCommandSession, Client) {
    let (in_tx, in_rx) = mpsc::channel(8);
    let (out_tx, out_rx) = mpsc::channel(8);
    let (err_tx, err_rx) = mpsc::channel(8);
    let (size_tx, size_rx) = mpsc::channel(8);
    let (done_tx, done_rx) = oneshot::channel();
    let session = RemoteCommandSession {
        flags,
        stdin: flags.stdin.then_some(in_rx),
        stdout: flags.stdout.then_some(out_tx),
        stderr: flags.stderr.then_some(err_tx),
        resize: flags.tty.then_some(size_rx),
        outcome: done_tx,
    };
    let client = Client {
        stdin: Some(in_tx),
        stdout: out_rx,
        stderr: err_rx,
        resize: size_tx,
        outcome: done_rx,
    };
    (session, client)
}

fn sh(script: &str) -> Command {
    let mut command = Command::new("sh");
    command.arg("-c").arg(script);
    command
}

async fn collect(rx: &mut mpsc::Receiver<Bytes>) -> String {
    let mut all = Vec::new();
    while let Some(chunk) = rx.recv().await {
        all.extend_from_slice(&chunk);
    }
    String::from_utf8_lossy(&all).into_owned()
}

const PIPES: StreamFlags = StreamFlags {
    stdin: true,
    stdout: true,
    stderr: true,
    tty: false,
};

#[tokio::test]
async fn pipes_should_carry_stdin_to_eof_and_report_the_exit_code() {
    let (session, mut client) = open(PIPES);
    let task = tokio::spawn(run(sh("cat; echo oops >&2; exit 3"), session));
    let stdin = client.stdin.take().expect("stdin");
    stdin
        .send(Bytes::from_static(b"hello "))
        .await
        .expect("sent");
    stdin
        .send(Bytes::from_static(b"world"))
        .await
        .expect("sent");
    drop(stdin); // EOF: cat ends.
    assert_eq!(collect(&mut client.stdout).await, "hello world");
    assert_eq!(collect(&mut client.stderr).await, "oops\n");
    assert_eq!(
        client.outcome.await.expect("outcome"),
        CommandOutcome::ExitCode(3)
    );
    task.await.expect("run");
}

#[tokio::test]
async fn success_and_signals_should_be_reported() {
    let (session, client) = open(StreamFlags {
        stdout: true,
        ..Default::default()
    });
    run(sh("true"), session).await;
    assert_eq!(
        client.outcome.await.expect("outcome"),
        CommandOutcome::Success
    );
    let (session, client) = open(StreamFlags {
        stdout: true,
        ..Default::default()
    });
    run(sh("kill -9 $$"), session).await;
    assert_eq!(
        client.outcome.await.expect("outcome"),
        CommandOutcome::ExitCode(137)
    );
}

#[tokio::test]
async fn a_terminal_should_echo_input_and_take_resizes() {
    let flags = StreamFlags {
        stdin: true,
        stdout: true,
        stderr: false,
        tty: true,
    };
    let (session, mut client) = open(flags);
    let task = tokio::spawn(run(
        sh("test -t 0 && test -t 1 && echo is-a-tty; read line; stty size; echo got:$line"),
        session,
    ));
    client
        .resize
        .send(TerminalSize {
            width: 91,
            height: 27,
        })
        .await
        .expect("resized");
    let stdin = client.stdin.take().expect("stdin");
    // Wait for the command to be reading before the line and size matter.
    let mut seen = String::new();
    while !seen.contains("is-a-tty") {
        let chunk = client.stdout.recv().await.expect("output");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    stdin
        .send(Bytes::from_static(b"abc\n"))
        .await
        .expect("sent");
    seen.push_str(&collect(&mut client.stdout).await);
    assert!(seen.contains("27 91"), "{seen:?}");
    assert!(seen.contains("got:abc"), "{seen:?}");
    assert_eq!(
        client.outcome.await.expect("outcome"),
        CommandOutcome::Success
    );
    task.await.expect("run");
}

#[tokio::test]
async fn the_command_should_be_killed_when_the_client_goes_away() {
    let marker = format!("exec-session-gone-{}", std::process::id());
    let (session, mut client) = open(StreamFlags {
        stdout: true,
        ..Default::default()
    });
    let task = tokio::spawn(run(
        sh(&format!("echo started; sleep 300 # {marker}")),
        session,
    ));
    assert_eq!(client.stdout.recv().await.expect("output"), "started\n");
    drop(client);
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the run ended")
        .expect("run");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = crate::process::proc::all_pids().into_iter().any(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
        });
        if !left {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the sleep still runs");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
