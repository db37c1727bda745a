//! A WebSocket (RFC 6455) server connection, as the channel protocols and the SPDY tunnel use
//! it: the opening handshake helpers ([`handshake`]), the frame codec ([`frame`]) and a
//! message-level connection ([`conn`]) whose reader answers pings and close frames itself.

pub(crate) mod conn;
pub(crate) mod frame;
pub(crate) mod handshake;

#[cfg(test)]
mod tests;

pub(crate) use conn::{split, Message, WsReader, WsSender};

/// Close code: normal closure.
pub(crate) const CLOSE_NORMAL: u16 = 1000;
/// Close code: protocol error.
pub(crate) const CLOSE_PROTOCOL_ERROR: u16 = 1002;
/// Close code: a message too big to process.
pub(crate) const CLOSE_TOO_BIG: u16 = 1009;

/// Why a WebSocket connection failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WsError {
    /// The socket failed.
    #[error("websocket i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The peer broke the framing rules.
    #[error("websocket protocol error: {0}")]
    Protocol(&'static str),
    /// A message exceeded the size limit.
    #[error("websocket message larger than {0} bytes")]
    TooBig(usize),
}
