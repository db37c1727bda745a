//! SPDY/3.1 as Kubernetes clients speak it (Go's `moby/spdystream`): the frame codec
//! ([`frame`]), zlib header blocks with the SPDY/3 dictionary ([`headers`]), and a server
//! session ([`session`]) in which the client opens every stream. No flow control, as the Go
//! peer has none: WINDOW_UPDATE and SETTINGS are read and ignored, never sent.

pub(crate) mod dictionary;
pub(crate) mod frame;
pub(crate) mod headers;
pub(crate) mod session;

#[cfg(test)]
mod tests;

pub(crate) use session::{Session, SpdyStream, StreamWriter};

/// Why a SPDY session failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpdyError {
    /// The socket failed.
    #[error("spdy i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The peer sent something malformed.
    #[error("spdy protocol error: {0}")]
    Protocol(&'static str),
    /// A header block did not decompress or decode.
    #[error("spdy header block: {0}")]
    Headers(String),
}
