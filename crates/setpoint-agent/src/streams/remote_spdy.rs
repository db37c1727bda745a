//! A remote-command session over SPDY/3.1: the client opens one stream per channel, typed by
//! its `streamtype` header (`error`, `stdin`, `stdout`, `stderr`, `resize`); the command runs
//! once every expected stream exists (the kubelet waits up to 30 s). Stdin ends at the
//! client's FIN; the server FINs stdout/stderr when the command's output ends, then writes the
//! outcome on the error stream (a `Status` from v4, text before), FINs it and ends the session.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};

use super::resize::ResizeDecoder;
use super::spdy::{Session, SpdyStream, StreamWriter};
use super::upgrade::SpdyVersion;
use super::{status, BoxFuture, CommandOutcome, RemoteCommandSession, StreamFlags, TerminalSize};

/// How long the client has to open every expected stream.
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The streams of one session, as they arrive.
#[derive(Debug, Default)]
struct Streams {
    error: Option<SpdyStream>,
    stdin: Option<SpdyStream>,
    stdout: Option<SpdyStream>,
    stderr: Option<SpdyStream>,
    resize: Option<SpdyStream>,
}

impl Streams {
    fn complete(&self, flags: StreamFlags, version: SpdyVersion) -> bool {
        self.error.is_some()
            && (!flags.stdin || self.stdin.is_some())
            && (!flags.stdout || self.stdout.is_some())
            && (!flags.stderr || self.stderr.is_some())
            && (!(flags.tty && version >= SpdyVersion::V3) || self.resize.is_some())
    }

    /// Files `stream` by its type; an unknown or repeated type is reset.
    async fn file(&mut self, stream: SpdyStream) {
        let slot = match stream.headers.get("streamtype") {
            Some("error") => &mut self.error,
            Some("stdin") => &mut self.stdin,
            Some("stdout") => &mut self.stdout,
            Some("stderr") => &mut self.stderr,
            Some("resize") => &mut self.resize,
            _ => {
                let _ = stream.writer.reset().await;
                return;
            }
        };
        if slot.is_some() {
            let _ = stream.writer.reset().await;
        } else {
            *slot = Some(stream);
        }
    }
}

/// Runs the session on an upgraded connection.
pub(crate) async fn run<IO, F>(io: IO, version: SpdyVersion, flags: StreamFlags, run: F)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
    F: FnOnce(RemoteCommandSession) -> BoxFuture<()> + Send + 'static,
{
    let Ok(mut session) = Session::start(io) else {
        return;
    };
    let mut streams = Streams::default();
    let waited = tokio::time::timeout(STREAM_CREATION_TIMEOUT, async {
        while !streams.complete(flags, version) {
            match session.accept().await {
                Some(stream) => streams.file(stream).await,
                None => return false,
            }
        }
        true
    })
    .await;
    if waited != Ok(true) {
        if let Some(error) = &streams.error {
            let _ = error
                .writer
                .write(Bytes::from_static(
                    b"timed out waiting for client to create streams",
                ))
                .await;
        }
        session.close().await;
        return;
    }
    let Streams {
        error,
        stdin,
        stdout,
        stderr,
        resize,
    } = streams;
    let Some(error) = error else { return };

    let (stdout_tx, stdout_fwd) = output(flags.stdout, stdout);
    let (stderr_tx, stderr_fwd) = output(flags.stderr, stderr);
    let (resize_tx, resize_rx) = if flags.tty {
        let (tx, rx) = mpsc::channel(4);
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    if let (Some(stream), Some(tx)) = (resize, resize_tx) {
        tokio::spawn(read_resizes(stream.incoming, tx));
    }
    let (outcome_tx, outcome_rx) = oneshot::channel();
    let session_for_command = RemoteCommandSession {
        flags,
        // Stdin is the stream's own inbound channel: it ends at the client's FIN.
        stdin: if flags.stdin {
            stdin.map(|stream| stream.incoming)
        } else {
            None
        },
        stdout: stdout_tx,
        stderr: stderr_tx,
        resize: resize_rx,
        outcome: outcome_tx,
    };
    let command = tokio::spawn(run(session_for_command));
    tokio::join!(stdout_fwd, stderr_fwd);
    let outcome = outcome_rx.await.unwrap_or_else(|_| {
        CommandOutcome::Error("the command ended without reporting an outcome".to_owned())
    });
    if let Some(payload) = status::outcome_payload(&outcome, version >= SpdyVersion::V4) {
        let _ = error.writer.write(payload).await;
    }
    let _ = error.writer.close().await;
    session.close().await;
    let _ = command.await;
}

/// An output channel for the command and the future that copies it to `stream`, then FINs.
fn output(
    wanted: bool,
    stream: Option<SpdyStream>,
) -> (
    Option<mpsc::Sender<Bytes>>,
    impl std::future::Future<Output = ()>,
) {
    let (tx, rx) = match (wanted, &stream) {
        (true, Some(_)) => {
            let (tx, rx) = mpsc::channel(16);
            (Some(tx), Some(rx))
        }
        _ => (None, None),
    };
    let writer: Option<StreamWriter> = stream.map(|stream| stream.writer);
    let copy = async move {
        let (Some(mut rx), Some(writer)) = (rx, writer) else {
            return;
        };
        while let Some(chunk) = rx.recv().await {
            if writer.write(chunk).await.is_err() {
                return;
            }
        }
        let _ = writer.close().await;
    };
    (tx, copy)
}

async fn read_resizes(mut incoming: mpsc::Receiver<Bytes>, tx: mpsc::Sender<TerminalSize>) {
    let mut decoder = ResizeDecoder::default();
    while let Some(bytes) = incoming.recv().await {
        for size in decoder.push(&bytes) {
            let _ = tx.try_send(size);
        }
    }
}
