//! `setpoint debug stream-sink`: a TCP sink on 127.0.0.1 for the port-forward runs of
//! `setpoint bench streams`. Per connection: an 8-byte big-endian length, that many bytes
//! (discarded), then the number of bytes read, 8 bytes big-endian; then the next length.

use anyhow::{Context as _, Result};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use crate::cli::StreamSinkArgs;

/// Serves until killed.
pub(crate) async fn stream_sink(args: StreamSinkArgs) -> Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", args.port))
        .await
        .with_context(|| format!("listening on 127.0.0.1:{}", args.port))?;
    loop {
        let (connection, _) = listener.accept().await.context("accepting")?;
        tokio::spawn(async move {
            let _ = sink(connection).await;
        });
    }
}

async fn sink(mut connection: TcpStream) -> std::io::Result<()> {
    let mut buffer = vec![0_u8; 1 << 20];
    loop {
        let mut length = [0_u8; 8];
        if connection.read_exact(&mut length).await.is_err() {
            return Ok(()); // the client is done
        }
        let mut left = u64::from_be_bytes(length);
        let mut read = 0_u64;
        while left > 0 {
            let want = usize::try_from(left.min(buffer.len() as u64)).unwrap_or(buffer.len());
            let n = connection.read(&mut buffer[..want]).await?;
            if n == 0 {
                break;
            }
            read += n as u64;
            left -= n as u64;
        }
        connection.write_all(&read.to_be_bytes()).await?;
    }
}
