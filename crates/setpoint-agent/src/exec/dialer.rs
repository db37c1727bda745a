//! Port-forward dialing: connections to `localhost:<port>` as the pod sees it — inside the
//! network namespace of the pod's running container when it has one of its own (joined on a
//! short-lived OS thread, so no other thread of the agent changes namespace), else on the
//! host's loopback (host-network pods, or the agent's host-network mode).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsFd as _;
use std::path::PathBuf;

use crate::streams::{BoxFuture, PortDialer};

/// Dials a pod's ports.
#[derive(Debug, Clone)]
pub(crate) struct PodDialer {
    /// The pod's network namespace (`/proc/<pid>/ns/net`), if it differs from the agent's.
    netns: Option<PathBuf>,
}

impl PodDialer {
    /// A dialer for the pod whose container process is `pid`.
    pub(crate) fn for_process(pid: i32) -> PodDialer {
        let theirs = PathBuf::from(format!("/proc/{pid}/ns/net"));
        let differs = match (
            rustix::fs::stat(theirs.as_path()),
            rustix::fs::stat("/proc/self/ns/net"),
        ) {
            (Ok(a), Ok(b)) => a.st_ino != b.st_ino || a.st_dev != b.st_dev,
            _ => false,
        };
        PodDialer {
            netns: differs.then_some(theirs),
        }
    }
}

impl PortDialer for PodDialer {
    fn dial(&self, port: u16) -> BoxFuture<io::Result<tokio::net::TcpStream>> {
        let netns = self.netns.clone();
        Box::pin(async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            std::thread::Builder::new()
                .name("portforward-dial".to_owned())
                .spawn(move || {
                    let _ = tx.send(connect_in(netns.as_deref(), port));
                })?;
            let stream = rx
                .await
                .map_err(|_| io::Error::other("the dialing thread ended without an answer"))??;
            stream.set_nonblocking(true)?;
            tokio::net::TcpStream::from_std(stream)
        })
    }
}

/// On the calling (dedicated) thread: joins `netns` if given, then connects to the port on
/// the IPv4 loopback, else the IPv6 one. The thread must end after this.
fn connect_in(netns: Option<&std::path::Path>, port: u16) -> io::Result<std::net::TcpStream> {
    if let Some(netns) = netns {
        let fd = std::fs::File::open(netns)?;
        rustix::thread::move_into_link_name_space(
            fd.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )?;
    }
    let timeout = std::time::Duration::from_secs(10);
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    match std::net::TcpStream::connect_timeout(&v4, timeout) {
        Ok(stream) => Ok(stream),
        Err(e4) => {
            let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
            std::net::TcpStream::connect_timeout(&v6, timeout).map_err(|_| e4)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn dialer_should_reach_a_port_on_the_loopback_of_its_own_namespace() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bound");
        let port = listener.local_addr().expect("address").port();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.expect("accepted");
            conn.write_all(b"hello").await.expect("written");
        });
        // Our own process: same namespace, so no join is needed.
        let dialer = PodDialer::for_process(std::process::id() as i32);
        assert!(dialer.netns.is_none());
        let mut stream = dialer.dial(port).await.expect("connected");
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.expect("read");
        assert_eq!(got, b"hello");
        server.await.expect("server");
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
            l.local_addr().expect("address").port()
        };
        assert!(PodDialer { netns: None }.dial(closed).await.is_err());
    }

    #[tokio::test]
    async fn dialer_should_join_the_network_namespace_of_the_pods_process() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: needs root (a network namespace of its own)");
            return;
        }
        // A process in a new network namespace, listening on its own loopback.
        let server = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 40777)); s.listen(); print('ready', flush=True); c, _ = s.accept(); c.sendall(b'inside'); c.close()";
        let mut child = tokio::process::Command::new("unshare")
            .args([
                "-n",
                "sh",
                "-c",
                &format!("ip link set lo up && exec python3 -c \"{server}\""),
            ])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("unshare started");
        let mut ready = String::new();
        let mut stdout = child.stdout.take().expect("stdout");
        let mut buf = [0u8; 64];
        while !ready.contains("ready") {
            let n = stdout.read(&mut buf).await.expect("read");
            assert!(n > 0, "the server in the namespace did not start");
            ready.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        let pid = child.id().expect("a pid") as i32;
        let dialer = PodDialer::for_process(pid);
        assert!(dialer.netns.is_some(), "the namespace differs from ours");
        let mut stream = dialer.dial(40777).await.expect("connected inside");
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.expect("read");
        assert_eq!(got, b"inside");
        let _ = child.kill().await;
    }
}
