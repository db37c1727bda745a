//! An attach session: the agent's client of a running container's attach socket (served by
//! its shim, `shim/attach.rs`), wired to a [`RemoteCommandSession`]. The session ends when
//! the container exits (the shim closes the socket) or the client goes away (the agent
//! closes it; the container goes on).

use bytes::Bytes;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;

use super::target::RunningContainer;
use crate::shim::attach::{
    short_name, socket_path, HELLO, RESIZE, STDERR, STDIN, STDIN_CLOSE, STDOUT,
};
use crate::streams::{CommandOutcome, RemoteCommandSession};

/// Connects to `container`'s attach socket.
pub(crate) async fn connect(container: &RunningContainer) -> std::io::Result<UnixStream> {
    let path = socket_path(&container.paths.run_record);
    let (_dir, short) = short_name(&path)?;
    UnixStream::connect(short).await
}

/// Runs an attach session over `socket` (from [`connect`]).
pub(crate) async fn attach(socket: UnixStream, session: RemoteCommandSession) {
    let RemoteCommandSession {
        flags,
        stdin,
        stdout,
        stderr,
        resize,
        mut outcome,
    } = session;
    let (mut reader, mut writer) = socket.into_split();
    let input = async move {
        let hello = [u8::from(stdin.is_some())];
        if write_frame(&mut writer, HELLO, &hello).await.is_err() {
            return;
        }
        let mut stdin = stdin;
        let mut resize = resize;
        loop {
            let written = tokio::select! {
                data = recv_opt(&mut stdin) => match data {
                    Some(data) => write_frame(&mut writer, STDIN, &data).await,
                    None => {
                        stdin = None;
                        write_frame(&mut writer, STDIN_CLOSE, &[]).await
                    }
                },
                size = recv_opt(&mut resize) => match size {
                    Some(size) => {
                        let mut payload = [0u8; 4];
                        payload[..2].copy_from_slice(&size.width.to_be_bytes());
                        payload[2..].copy_from_slice(&size.height.to_be_bytes());
                        write_frame(&mut writer, RESIZE, &payload).await
                    }
                    None => {
                        resize = None;
                        Ok(())
                    }
                },
            };
            if written.is_err() {
                return;
            }
        }
    };
    let output = async move {
        // With a terminal requested, the container's error output joins its output.
        let stderr = if flags.tty { stdout.clone() } else { stderr };
        loop {
            let mut head = [0u8; 5];
            if reader.read_exact(&mut head).await.is_err() {
                return;
            }
            let mut len = [0u8; 4];
            len.copy_from_slice(&head[1..]);
            let mut data = vec![0u8; u32::from_be_bytes(len) as usize];
            if reader.read_exact(&mut data).await.is_err() {
                return;
            }
            let to = match head[0] {
                STDOUT => stdout.as_ref(),
                STDERR => stderr.as_ref(),
                _ => None,
            };
            if let Some(to) = to {
                if to.send(Bytes::from(data)).await.is_err() {
                    return;
                }
            }
        }
    };
    let mut output = std::pin::pin!(output);
    tokio::select! {
        // The container exited (the shim closed the socket).
        () = &mut output => {}
        // The socket broke under our input: the output ends too.
        () = input => output.await,
        // The client went away.
        () = outcome.closed() => return,
    }
    let _ = outcome.send(CommandOutcome::Success);
}

/// The next item of an optional channel; pending forever when there is none.
async fn recv_opt<T>(rx: &mut Option<tokio::sync::mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn write_frame(
    to: &mut tokio::net::unix::OwnedWriteHalf,
    kind: u8,
    payload: &[u8],
) -> std::io::Result<()> {
    let len = u32::try_from(payload.len()).map_err(|_| std::io::Error::other("frame too large"))?;
    let mut frame = Vec::with_capacity(5 + payload.len());
    frame.push(kind);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(payload);
    to.write_all(&frame).await
}
