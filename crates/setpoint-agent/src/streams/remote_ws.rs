//! A remote-command session (`exec`, `attach`) over a WebSocket channel protocol: channel 0
//! stdin, 1 stdout, 2 stderr, 3 error, 4 resize. Right after the handshake the server sends
//! an empty message on the lowest channel it writes (kubelet behaviour; old clients wait for
//! it). Output is forwarded until the command's side drops its senders, then the outcome is
//! written on the error channel and the connection closed (1000).
//!
//! The channel protocols have no "streams ready" message, and client-go creates its stream
//! readers only after the handshake has returned: output that arrives first is discarded
//! ("Unknown stream id") and kubectl fails with "closed all streams". A kubelet hides that race
//! behind its container runtime's start-up; our commands start in milliseconds. So when the
//! client is expected to talk (stdin or a terminal: kubectl sends the terminal size, or its
//! input, right after creating its streams), the hello, output and the outcome wait for the
//! client's first message, for at most [`CLIENT_GRACE`].

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::channels::{ChannelProtocol, Incoming};
use super::resize::ResizeDecoder;
use super::ws::{self, WsReader, WsSender, CLOSE_NORMAL};
use super::{status, BoxFuture, CommandOutcome, RemoteCommandSession, StreamFlags};

/// The largest client message accepted (stdin chunks, resize events).
const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// How long to wait for the client's close frame after ours.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// How long output waits for a client that asked for stdin or a terminal to say something.
const CLIENT_GRACE: Duration = Duration::from_millis(500);

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;

/// Runs the session on an upgraded connection until the command ends and the outcome is
/// reported, or the client goes away.
pub(crate) async fn run<IO, F>(io: IO, protocol: ChannelProtocol, flags: StreamFlags, run: F)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
    F: FnOnce(RemoteCommandSession) -> BoxFuture<()> + Send + 'static,
{
    let (reader, sender, writer) = ws::split(io, MAX_MESSAGE);
    let first = if flags.stdout {
        STDOUT
    } else if flags.stderr {
        STDERR
    } else {
        ERROR
    };
    // The hello too would be dropped (and logged on the client's stderr) if it beat the
    // client's readers, so a client expected to talk gets it with the rest, below.
    let gated = flags.stdin || flags.tty;
    if !gated && protocol.send(&sender, first, Bytes::new()).await.is_err() {
        return;
    }

    let (stdin_tx, stdin_rx) = split_option(flags.stdin, 16);
    let (stdout_tx, stdout_rx) = split_option(flags.stdout, 16);
    let (stderr_tx, stderr_rx) = split_option(flags.stderr && !flags.tty, 16);
    let (resize_tx, resize_rx) = split_option(flags.tty, 4);
    let (outcome_tx, outcome_rx) = oneshot::channel();
    let session = RemoteCommandSession {
        flags,
        stdin: stdin_rx,
        stdout: stdout_tx,
        stderr: stderr_tx,
        resize: resize_rx,
        outcome: outcome_tx,
    };
    let command = tokio::spawn(run(session));
    let gone = CancellationToken::new();
    let heard = CancellationToken::new();
    if !gated {
        heard.cancel();
    }
    let mut inbound = tokio::spawn({
        let gone = gone.clone();
        let heard = heard.clone();
        async move {
            read_client(reader, protocol, stdin_tx, resize_tx, &heard).await;
            gone.cancel();
        }
    });
    let ready = ClientReady {
        heard,
        deadline: tokio::time::Instant::now() + CLIENT_GRACE,
    };
    if gated {
        ready.wait().await;
        if protocol.send(&sender, first, Bytes::new()).await.is_err() {
            // The client is gone: the command sees its output closed when this returns.
            inbound.abort();
            return;
        }
    }

    tokio::join!(
        forward(stdout_rx, &sender, protocol, STDOUT, &gone, &ready),
        forward(stderr_rx, &sender, protocol, STDERR, &gone, &ready),
    );
    // A client that went away gets no outcome; the command sees its output closed.
    let outcome = tokio::select! {
        outcome = outcome_rx => outcome.unwrap_or_else(|_| {
            CommandOutcome::Error("the command ended without reporting an outcome".to_owned())
        }),
        () = gone.cancelled() => {
            let _ = writer.await;
            return;
        }
    };
    if let Some(payload) = status::outcome_payload(&outcome, protocol.status_errors()) {
        ready.wait().await;
        let _ = protocol.send(&sender, ERROR, payload).await;
    }
    let _ = sender.close(CLOSE_NORMAL).await;
    drop(sender);
    // The client answers our close frame with its own; then the socket ends.
    if tokio::time::timeout(CLOSE_GRACE, &mut inbound)
        .await
        .is_err()
    {
        inbound.abort();
    }
    let _ = writer.await;
    let _ = command.await;
}

/// Whether the client has had its chance to create its stream readers.
struct ClientReady {
    /// Cancelled by the client's first message (or at once when none is expected).
    heard: CancellationToken,
    /// When output goes out regardless.
    deadline: tokio::time::Instant,
}

impl ClientReady {
    async fn wait(&self) {
        tokio::select! {
            () = self.heard.cancelled() => {}
            () = tokio::time::sleep_until(self.deadline) => {}
        }
    }
}

fn split_option<T>(
    wanted: bool,
    depth: usize,
) -> (Option<mpsc::Sender<T>>, Option<mpsc::Receiver<T>>) {
    if wanted {
        let (tx, rx) = mpsc::channel(depth);
        (Some(tx), Some(rx))
    } else {
        (None, None)
    }
}

/// Copies one output channel to the client until the command side drops its sender. If the
/// client is gone, stops reading (the command's sends then fail, `closed()` resolves).
async fn forward(
    rx: Option<mpsc::Receiver<Bytes>>,
    sender: &WsSender,
    protocol: ChannelProtocol,
    channel: u8,
    gone: &CancellationToken,
    ready: &ClientReady,
) {
    let Some(mut rx) = rx else { return };
    while let Some(chunk) = tokio::select! {
        chunk = rx.recv() => chunk,
        () = gone.cancelled() => None,
    } {
        if chunk.is_empty() {
            continue;
        }
        tokio::select! {
            () = ready.wait() => {}
            () = gone.cancelled() => return,
        }
        if protocol.send(sender, channel, chunk).await.is_err() {
            return;
        }
    }
}

/// Routes client messages: stdin (until CLOSE or the end of the connection), resize events.
async fn read_client<R: AsyncRead + Unpin>(
    mut reader: WsReader<R>,
    protocol: ChannelProtocol,
    mut stdin: Option<mpsc::Sender<Bytes>>,
    resize: Option<mpsc::Sender<super::TerminalSize>>,
    heard: &CancellationToken,
) {
    let mut sizes = ResizeDecoder::default();
    while let Ok(Some(message)) = reader.next().await {
        heard.cancel();
        match protocol.decode(message) {
            Incoming::Data(STDIN, bytes) => {
                if let Some(tx) = &stdin {
                    if !bytes.is_empty() && tx.send(bytes).await.is_err() {
                        // The command no longer reads its input.
                        stdin = None;
                    }
                }
            }
            Incoming::Data(RESIZE, bytes) => {
                if let Some(tx) = &resize {
                    for size in sizes.push(&bytes) {
                        let _ = tx.try_send(size);
                    }
                }
            }
            Incoming::Close(STDIN) => stdin = None,
            Incoming::Data(..) | Incoming::Close(_) | Incoming::Ignored => {}
        }
    }
}
