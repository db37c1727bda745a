//! A pseudo-terminal pair for a command run with `tty`: the secondary side becomes the
//! command's stdin, stdout and stderr (and, in the exec helper, its controlling terminal);
//! the agent reads and writes the primary side without blocking, and resizes it.

use std::io;
use std::os::fd::{AsFd as _, OwnedFd};

use tokio::io::unix::AsyncFd;

/// An open pseudo-terminal.
#[derive(Debug)]
pub(crate) struct Pty {
    /// The primary (master) side, non-blocking.
    pub(crate) primary: AsyncFd<OwnedFd>,
    /// The secondary side, to give to the command.
    pub(crate) secondary: OwnedFd,
}

impl Pty {
    /// Opens a new pair (`posix_openpt`, `grantpt`, `unlockpt`, `ptsname`). Must be called in
    /// a Tokio runtime.
    pub(crate) fn open() -> io::Result<Pty> {
        use rustix::pty::OpenptFlags;
        let primary =
            rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
        rustix::pty::grantpt(&primary)?;
        rustix::pty::unlockpt(&primary)?;
        let name = rustix::pty::ptsname(&primary, Vec::new())?;
        let secondary = rustix::fs::open(
            name.as_c_str(),
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let flags = rustix::fs::fcntl_getfl(&primary)?;
        rustix::fs::fcntl_setfl(&primary, flags | rustix::fs::OFlags::NONBLOCK)?;
        // Deprecated for types that may close the descriptor behind the reactor's back; an
        // `OwnedFd` closes it only when dropped, after the `AsyncFd` deregistered it.
        #[allow(deprecated)]
        let primary = AsyncFd::new(primary)?;
        Ok(Pty { primary, secondary })
    }
}

/// Reads from the primary side; `Ok(0)` once every secondary descriptor is closed (Linux
/// reports that as `EIO`).
pub(crate) async fn read(primary: &AsyncFd<OwnedFd>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        let mut guard = primary.readable().await?;
        match guard.try_io(|fd| rustix::io::read(fd.get_ref(), &mut *buf).map_err(io::Error::from))
        {
            Ok(Ok(n)) => return Ok(n),
            Ok(Err(e)) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => {
                return Ok(0)
            }
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        }
    }
}

/// Writes all of `data` to the primary side.
pub(crate) async fn write_all(primary: &AsyncFd<OwnedFd>, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        let mut guard = primary.writable().await?;
        match guard.try_io(|fd| rustix::io::write(fd.get_ref(), data).map_err(io::Error::from)) {
            Ok(Ok(n)) => data = &data[n..],
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        }
    }
    Ok(())
}

/// Sets the terminal's size (`TIOCSWINSZ`); the foreground process gets `SIGWINCH`.
pub(crate) fn resize(primary: &AsyncFd<OwnedFd>, width: u16, height: u16) -> io::Result<()> {
    let size = rustix::termios::Winsize {
        ws_row: height,
        ws_col: width,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(primary.get_ref().as_fd(), size)?;
    Ok(())
}
