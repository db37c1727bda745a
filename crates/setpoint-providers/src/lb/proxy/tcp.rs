//! A TCP port of the balancer: accepts connections and splices each to a backend picked from
//! the port's current [`Group`], trying the next backend when one refuses (and marking it
//! unhealthy). Bytes are copied both ways with 64 KiB buffers until either side closes.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

use super::backends::Group;
use super::Shared;

/// Limit on connecting to one backend.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The copy buffer of each direction.
const BUFFER: usize = 64 * 1024;

/// Binds `at` for a balancer port (`SO_REUSEADDR`, so a restarted balancer rebinds at once).
pub(super) fn bind(at: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if at.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(at)?;
    socket.listen(1024)
}

/// Serves `listener` until `stop` (this port removed) or `shutdown` (the process stops);
/// connections in flight end only with `shutdown`.
pub(super) async fn serve(
    listener: TcpListener,
    group: Shared<Group>,
    stop: CancellationToken,
    shutdown: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let client = match accepted {
            Ok((client, _)) => client,
            Err(error) => {
                // Out of descriptors and the like: pause rather than spin.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let group = group.read().clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = forward(client, &group) => {}
            }
        });
    }
}

/// Splices `client` to a backend of `group`.
async fn forward(mut client: TcpStream, group: &Group) {
    let _ = client.set_nodelay(true);
    let mut tried: Vec<SocketAddr> = Vec::new();
    while let Some(backend) = group.pick(&tried) {
        tried.push(backend.addr);
        let connected = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(backend.addr))
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()));
        match connected {
            Ok(mut server) => {
                let _ = server.set_nodelay(true);
                let _open = backend.open();
                let _ = tokio::io::copy_bidirectional_with_sizes(
                    &mut client,
                    &mut server,
                    BUFFER,
                    BUFFER,
                )
                .await;
                return;
            }
            Err(error) => {
                tracing::debug!(backend = %backend.addr, %error, "backend refused a connection");
                backend.record_refused();
            }
        }
    }
    tracing::debug!(backends = group.len(), "no backend took the connection");
}
