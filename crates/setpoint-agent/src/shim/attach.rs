//! Attaching to a running container (`kubectl attach`): the shim keeps the container's
//! stdin open when its spec asks (`stdin: true`) and serves a unix socket beside the run's
//! records (`P/runs/<container>/<n>.attach`) to which the agent connects once per attach
//! session. Every connected client gets the container's live output (a fan-out; the log
//! gets it too, always) and may write its stdin. With `stdinOnce`, the container's stdin is
//! closed for good when the first client that attached with stdin closes it or goes away.
//! When the container exits, the shim closes every client and removes the socket.
//!
//! The socket speaks frames: a kind byte, a big-endian `u32` length, the payload. Client to
//! shim: [`HELLO`] (payload `[1]` when the client attaches stdin, `[0]` if not), [`STDIN`]
//! data, [`STDIN_CLOSE`], [`RESIZE`] (width, height as big-endian `u16`s; ignored: the
//! container has no terminal). Shim to client: [`STDOUT`] and [`STDERR`] data.
//!
//! Long run directories exceed a socket address's 108 bytes, so both sides name the socket
//! through a descriptor of its directory (`/proc/self/fd/<n>/<name>`).

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::logs::LogStream;

/// Client → shim: who I am (`[1]`: I attach stdin).
pub(crate) const HELLO: u8 = 0;
/// Client → shim: input for the container.
pub(crate) const STDIN: u8 = 1;
/// Client → shim: the client closed its stdin.
pub(crate) const STDIN_CLOSE: u8 = 2;
/// Client → shim: a terminal size.
pub(crate) const RESIZE: u8 = 3;
/// Shim → client: the container's standard output.
pub(crate) const STDOUT: u8 = 4;
/// Shim → client: the container's standard error.
pub(crate) const STDERR: u8 = 5;

/// Largest frame payload accepted.
const MAX_FRAME: usize = 1 << 20;
/// Output frames queued for one client before it counts as stuck and is dropped.
const CLIENT_QUEUE: usize = 1024;

/// What of the container's spec concerns attaching (`RunSpec::attach`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttachSpec {
    /// `stdin`: keep the container's stdin open for attached clients.
    #[serde(default)]
    pub(crate) stdin: bool,
    /// `stdinOnce`: close it after the first client's stdin ends.
    #[serde(default)]
    pub(crate) stdin_once: bool,
    /// `tty`: recorded; the container runs without a terminal (not supported yet).
    #[serde(default)]
    pub(crate) tty: bool,
}

impl AttachSpec {
    /// The attach settings of `container`.
    pub(crate) fn of(container: &k8s_openapi::api::core::v1::Container) -> AttachSpec {
        AttachSpec {
            stdin: container.stdin.unwrap_or(false),
            stdin_once: container.stdin_once.unwrap_or(false),
            tty: container.tty.unwrap_or(false),
        }
    }
}

/// The attach socket of the run whose record is `run_record` (`n.run.json` → `n.attach`).
pub(crate) fn socket_path(run_record: &Path) -> PathBuf {
    let name = run_record
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".run.json"))
        .unwrap_or("run");
    run_record.with_file_name(format!("{name}.attach"))
}

/// A short name for `path` through an open descriptor of its directory (kept open by the
/// returned file while the name is used).
pub(crate) fn short_name(path: &Path) -> io::Result<(std::fs::File, PathBuf)> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let dir = std::fs::File::open(dir)?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    Ok((dir, short))
}

/// Writes one frame.
pub(crate) fn write_frame(to: &mut impl Write, kind: u8, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len()).map_err(|_| io::Error::other("frame too large"))?;
    let mut head = [0u8; 5];
    head[0] = kind;
    head[1..].copy_from_slice(&len.to_be_bytes());
    to.write_all(&head)?;
    to.write_all(payload)
}

/// Reads one frame; `None` at a clean end.
pub(crate) fn read_frame(from: &mut impl Read) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut head = [0u8; 5];
    match from.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut len_bytes = [0u8; 4];
    len_bytes.copy_from_slice(&head[1..]);
    let len = u32::from_be_bytes(len_bytes) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    let mut payload = vec![0u8; len];
    from.read_exact(&mut payload)?;
    Ok(Some((head[0], payload)))
}

/// Serves the attach socket of the run `spec` (the shim's one call); `stdin` is the
/// container's input pipe when its spec keeps one. Without a socket the run goes on (output
/// still reaches the log).
pub(crate) fn serve(
    spec: &crate::process::RunSpec,
    stdin: Option<std::process::ChildStdin>,
) -> Option<Arc<AttachServer>> {
    let input = stdin.map(|s| Box::new(s) as Box<dyn Write + Send>);
    match AttachServer::start(socket_path(&spec.run_record), spec.attach, input) {
        Ok(server) => Some(Arc::new(server)),
        Err(e) => {
            eprintln!("setpoint agent-shim: no attach socket: {e}");
            None
        }
    }
}

/// The container's stdin, shared by the clients until it is closed.
type SharedStdin = Arc<Mutex<Option<Box<dyn Write + Send>>>>;

/// The attach socket of one run, served on threads of the shim.
pub(crate) struct AttachServer {
    path: PathBuf,
    clients: Arc<Mutex<Vec<Client>>>,
    stdin: SharedStdin,
}

struct Client {
    output: SyncSender<(u8, Vec<u8>)>,
    stream: UnixStream,
}

impl AttachServer {
    /// Binds the socket at `path` and serves it; `stdin` is the container's input (when its
    /// spec keeps one).
    pub(crate) fn start(
        path: PathBuf,
        spec: AttachSpec,
        stdin: Option<Box<dyn Write + Send>>,
    ) -> io::Result<AttachServer> {
        let _ = std::fs::remove_file(&path);
        let listener = {
            let (_dir, short) = short_name(&path)?;
            UnixListener::bind(short)?
        };
        let server = AttachServer {
            path,
            clients: Arc::new(Mutex::new(Vec::new())),
            stdin: Arc::new(Mutex::new(stdin)),
        };
        let clients = server.clients.clone();
        let stdin = server.stdin.clone();
        let once_taken = Arc::new(Mutex::new(false));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                accept(stream, &clients, &stdin, spec, &once_taken);
            }
        });
        Ok(server)
    }

    /// Sends output to every client; drops the ones that cannot keep up.
    pub(crate) fn publish(&self, stream: LogStream, data: &[u8]) {
        let kind = match stream {
            LogStream::Stdout => STDOUT,
            LogStream::Stderr => STDERR,
        };
        self.clients.lock().retain(
            |client| match client.output.try_send((kind, data.to_vec())) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    let _ = client.stream.shutdown(std::net::Shutdown::Both);
                    false
                }
            },
        );
    }

    /// The container has exited: closes the clients (after their queued output) and removes
    /// the socket.
    pub(crate) fn finish(&self) {
        let _ = std::fs::remove_file(&self.path);
        self.stdin.lock().take();
        // Dropping the senders ends each writer thread, which then closes its stream.
        self.clients.lock().clear();
    }
}

fn accept(
    stream: UnixStream,
    clients: &Arc<Mutex<Vec<Client>>>,
    stdin: &SharedStdin,
    spec: AttachSpec,
    once_taken: &Arc<Mutex<bool>>,
) {
    let (Ok(mut writer), Ok(mut reader), Ok(control)) =
        (stream.try_clone(), stream.try_clone(), stream.try_clone())
    else {
        return;
    };
    let (tx, rx) = sync_channel::<(u8, Vec<u8>)>(CLIENT_QUEUE);
    std::thread::spawn(move || {
        while let Ok((kind, data)) = rx.recv() {
            if write_frame(&mut writer, kind, &data).is_err() {
                break;
            }
        }
        let _ = writer.shutdown(std::net::Shutdown::Both);
    });
    clients.lock().push(Client {
        output: tx,
        stream: control,
    });
    let stdin = stdin.clone();
    let once_taken = once_taken.clone();
    std::thread::spawn(move || {
        // With stdinOnce, the first client attaching stdin owns it; its end closes it.
        let mut owns_once = false;
        let close_if_owner = |owns: bool| {
            if owns && spec.stdin_once {
                stdin.lock().take();
            }
        };
        loop {
            match read_frame(&mut reader) {
                Ok(Some((HELLO, payload))) => {
                    if payload.first() == Some(&1) && spec.stdin_once {
                        let mut taken = once_taken.lock();
                        if !*taken {
                            *taken = true;
                            owns_once = true;
                        }
                    }
                }
                Ok(Some((STDIN, data))) => {
                    let mut guard = stdin.lock();
                    if let Some(input) = guard.as_mut() {
                        if input.write_all(&data).and_then(|()| input.flush()).is_err() {
                            guard.take();
                        }
                    }
                }
                Ok(Some((STDIN_CLOSE, _))) => close_if_owner(owns_once),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        close_if_owner(owns_once);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_should_round_trip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, STDIN, b"abc").expect("written");
        write_frame(&mut buf, STDIN_CLOSE, b"").expect("written");
        let mut cursor = io::Cursor::new(buf);
        assert_eq!(
            read_frame(&mut cursor).expect("read"),
            Some((STDIN, b"abc".to_vec()))
        );
        assert_eq!(
            read_frame(&mut cursor).expect("read"),
            Some((STDIN_CLOSE, Vec::new()))
        );
        assert_eq!(read_frame(&mut cursor).expect("read"), None);
    }

    #[test]
    fn socket_path_should_sit_beside_the_run_record() {
        assert_eq!(
            socket_path(Path::new("/p/runs/app/3.run.json")),
            PathBuf::from("/p/runs/app/3.attach")
        );
    }
}
