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
//! With `tty: true` the container runs on a pseudo-terminal: its stdin, stdout and stderr are
//! the terminal's secondary side, and it is started through the shim's session helper
//! (`agent-shim exec-session -- ARGV…`, `exec/helper.rs`), which makes it a session leader
//! with that terminal as its controlling terminal before becoming the command. The shim reads
//! the primary side (the container's whole output, logged as stdout), writes clients' input
//! to it, and applies their resizes; `stdinOnce` then ends the input with an end-of-file
//! character (a terminal cannot be half-closed).
//!
//! Long run directories exceed a socket address's 108 bytes, so both sides name the socket
//! through a descriptor of its directory (`/proc/self/fd/<n>/<name>`).

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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
    /// `tty`: the container runs on a pseudo-terminal (the shim holds its primary side).
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

/// The container's command with its standard streams: pipes (stdin a pipe only when the spec
/// keeps stdin open) in a process group of its own; or, with `tty: true`, the terminal's
/// secondary side through the session helper, with the terminal's primary side returned.
/// Falls back to pipes if no terminal can be opened.
pub(crate) fn container_command(
    spec: &crate::process::RunSpec,
    program: &str,
    args: &[String],
) -> (Command, Option<std::fs::File>) {
    if spec.attach.tty {
        match terminal_command(program, args) {
            Ok(found) => return found,
            Err(e) => eprintln!("setpoint agent-shim: no terminal for the container: {e}"),
        }
    }
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(if spec.attach.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    (command, None)
}

fn terminal_command(
    program: &str,
    args: &[String],
) -> io::Result<(Command, Option<std::fs::File>)> {
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::OpenptFlags;
    let primary =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&primary)?;
    rustix::pty::unlockpt(&primary)?;
    let name = rustix::pty::ptsname(&primary, Vec::new())?;
    let secondary = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    // This shim's own command line, up to `--spec`: how to start its session helper.
    let exe = std::env::current_exe()?;
    let leading: Vec<std::ffi::OsString> = std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--spec")
        .collect();
    let mut command = Command::new(exe);
    command
        .args(leading)
        .arg("exec-session")
        .arg("--")
        .arg(program)
        .args(args)
        .stdin(Stdio::from(secondary.try_clone()?))
        .stdout(Stdio::from(secondary.try_clone()?))
        .stderr(Stdio::from(secondary));
    Ok((command, Some(std::fs::File::from(primary))))
}

/// Serves the attach socket of the run `spec` (the shim's one call); `stdin` is the
/// container's input pipe when its spec keeps one, `terminal` the primary side of its
/// terminal when it has one. Without a socket the run goes on (output still reaches the log).
pub(crate) fn serve(
    spec: &crate::process::RunSpec,
    stdin: Option<std::process::ChildStdin>,
    terminal: Option<&std::fs::File>,
) -> Option<Arc<AttachServer>> {
    let terminal = terminal.and_then(|t| t.try_clone().ok());
    let input = match (&terminal, stdin) {
        (Some(t), _) => t
            .try_clone()
            .ok()
            .map(|t| Box::new(t) as Box<dyn Write + Send>),
        (None, stdin) => stdin.map(|s| Box::new(s) as Box<dyn Write + Send>),
    };
    match AttachServer::start(socket_path(&spec.run_record), spec.attach, input, terminal) {
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
        terminal: Option<std::fs::File>,
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
        let terminal = terminal.map(Arc::new);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                accept(
                    stream,
                    &clients,
                    &stdin,
                    spec,
                    &once_taken,
                    terminal.clone(),
                );
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
    terminal: Option<Arc<std::fs::File>>,
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
                let mut input = stdin.lock();
                if let (Some(_), Some(w)) = (&terminal, input.as_mut()) {
                    // End of file for the program reading the terminal (Ctrl-D).
                    let _ = w.write_all(&[4]);
                }
                input.take();
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
                Ok(Some((RESIZE, size))) => {
                    if let (Some(terminal), [w0, w1, h0, h1]) = (&terminal, size.as_slice()) {
                        let size = rustix::termios::Winsize {
                            ws_col: u16::from_be_bytes([*w0, *w1]),
                            ws_row: u16::from_be_bytes([*h0, *h1]),
                            ws_xpixel: 0,
                            ws_ypixel: 0,
                        };
                        let _ = rustix::termios::tcsetwinsize(&**terminal, size);
                    }
                }
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
