//! Zero-copy forwarding on Linux: each direction moves bytes socket → pipe → socket with
//! `splice(2)`, so the balancer never copies a payload through its own memory (a userspace copy
//! costs two extra passes over every byte, which on a loaded machine halves throughput).
//!
//! Readiness comes from tokio's reactor. Each direction has a pipe of its own and works in
//! turns: fill the pipe from the source (only when the pipe is empty, so an `EAGAIN` can only
//! mean the socket has nothing to read), then drain it into the destination. When the source
//! ends, the destination's write side is shut down once the pipe is empty, as
//! `copy_bidirectional` does; an error in either direction ends both.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::net::Shutdown;
use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// The pipe size asked for (the kernel's default is 64 KiB; an unprivileged process may grow a
/// pipe up to `/proc/sys/fs/pipe-max-size`, 1 MiB by default).
const PIPE_SIZE: usize = 1 << 20;

/// One direction's pipe: read end, write end, capacity.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        // Growing the pipe is an optimisation; the default size works too.
        let capacity = rustix::pipe::fcntl_setpipe_size(&write, PIPE_SIZE)
            .or_else(|_| rustix::pipe::fcntl_getpipe_size(&write))?;
        Ok(Pipe {
            read,
            write,
            capacity,
        })
    }
}

/// Forwards between `a` and `b` until both directions have ended or one fails. `None` when
/// no pipe could be made (descriptors exhausted, say): the caller copies instead.
pub(super) async fn bidirectional(a: &TcpStream, b: &TcpStream) -> Option<io::Result<()>> {
    let (Ok(ab), Ok(ba)) = (Pipe::new(), Pipe::new()) else {
        return None;
    };
    let result = tokio::try_join!(one_way(a, b, &ab), one_way(b, a, &ba));
    Some(result.map(|_| ()))
}

/// Moves everything `from` sends to `to` through `pipe`; the byte count.
async fn one_way(from: &TcpStream, to: &TcpStream, pipe: &Pipe) -> io::Result<u64> {
    let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
    let mut moved = 0u64;
    loop {
        // Fill: the pipe is empty here, so `EAGAIN` is the socket's.
        let filled = loop {
            let spliced = from.try_io(Interest::READABLE, || {
                rustix::pipe::splice(from, None, &pipe.write, None, pipe.capacity, flags)
                    .map_err(io::Error::from)
            });
            match spliced {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => from.readable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        if filled == 0 {
            // The source ended: end the destination's side too (it may already be gone).
            match rustix::net::shutdown(to.as_fd(), Shutdown::Write) {
                Ok(()) | Err(rustix::io::Errno::NOTCONN) => return Ok(moved),
                Err(e) => return Err(e.into()),
            }
        }
        // Drain: the pipe holds data here, so `EAGAIN` is the socket's.
        let mut left = filled;
        while left > 0 {
            let spliced = to.try_io(Interest::WRITABLE, || {
                rustix::pipe::splice(&pipe.read, None, to, None, left, flags)
                    .map_err(io::Error::from)
            });
            match spliced {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => left -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => to.writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        moved += filled as u64;
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::{TcpListener, TcpStream};

    /// A connected pair of sockets on 127.0.0.1.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (client.expect("connect"), accepted.expect("accept").0)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn splicing_should_move_every_byte_both_ways_and_pass_on_half_closes() {
        // client ⇄ (a | splice | b) ⇄ server
        let (mut client, a) = pair().await;
        let (b, mut server) = pair().await;
        let forward = tokio::spawn(async move { super::bidirectional(&a, &b).await });

        let up: Vec<u8> = (0..8_000_000u32).map(|i| (i % 253) as u8).collect();
        let down: Vec<u8> = (0..3_000_000u32).map(|i| (i % 241) as u8).collect();
        let client_side = async {
            let (mut r, mut w) = client.split();
            let send = async {
                w.write_all(&up).await.expect("client sends");
                w.shutdown().await.expect("client half-closes");
            };
            let mut got = Vec::new();
            let ((), read) = tokio::join!(send, r.read_to_end(&mut got));
            read.expect("client reads");
            got
        };
        let server_side = async {
            let (mut r, mut w) = server.split();
            let send = async {
                w.write_all(&down).await.expect("server sends");
                w.shutdown().await.expect("server half-closes");
            };
            let mut got = Vec::new();
            let ((), read) = tokio::join!(send, r.read_to_end(&mut got));
            read.expect("server reads");
            got
        };
        let (at_client, at_server) = tokio::join!(client_side, server_side);
        assert!(
            at_server == up,
            "{} of {} bytes up",
            at_server.len(),
            up.len()
        );
        assert!(
            at_client == down,
            "{} of {} bytes down",
            at_client.len(),
            down.len()
        );
        let result = forward.await.expect("joined");
        assert!(
            matches!(result, Some(Ok(()))),
            "spliced, not copied: {result:?}"
        );
    }
}
