//! Remote-command (`exec`, `attach`) and port-forward streams, as the node agent speaks them
//! to clients (through the API server's upgrade splice): the WebSocket channel protocols
//! (`v5.channel.k8s.io` … `channel.k8s.io`, `portforward.k8s.io`), SPDY/3.1, and SPDY
//! tunnelled in a WebSocket (`SPDY/3.1+portforward.k8s.io`).
//!
//! This module is transport-neutral at its edge: a route hands it the upgrade request and a
//! function that runs the command against a [`RemoteCommandSession`] (plain channels of
//! bytes), or a [`PortDialer`] that opens a connection to a port in the pod. Which protocol
//! the client negotiated is invisible to that code.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::sync::{mpsc, oneshot};

use channels::ChannelUse;
use upgrade::Offer;

mod channels;
mod portforward_spdy;
mod portforward_ws;
mod remote_spdy;
mod remote_ws;
mod resize;
mod spdy;
mod status;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;
mod tunnel;
mod upgrade;
mod ws;

/// A boxed, sendable future.
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A response body (the 101 answer has none; refusals carry a `Status`).
pub(crate) type Body = BoxBody<Bytes, io::Error>;

/// Which streams a remote-command client asked for (`stdin`, `stdout`, `stderr`, `tty` in
/// the query). With `tty`, stderr is merged into stdout and never requested separately.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StreamFlags {
    /// The client sends input.
    pub(crate) stdin: bool,
    /// The client wants the output.
    pub(crate) stdout: bool,
    /// The client wants the error output (never with `tty`).
    pub(crate) stderr: bool,
    /// The command runs on a terminal; the client may send resize events.
    pub(crate) tty: bool,
}

/// A terminal size, as the resize channel carries it (`{"Width":…,"Height":…}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TerminalSize {
    /// Columns.
    pub(crate) width: u16,
    /// Rows.
    pub(crate) height: u16,
}

/// How a remote command ended: what the error channel reports before the streams close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommandOutcome {
    /// Exit code 0 (or the attached container's stream ended normally): a `Success` status.
    Success,
    /// A non-zero exit code: a `Failure` status with reason `NonZeroExitCode` and the code in
    /// `details.causes[0]` (`reason: ExitCode`).
    ExitCode(i32),
    /// The command could not be run or the session failed: a `Failure` status with reason
    /// `InternalError` and this message.
    Error(String),
}

/// The process side of a negotiated remote-command stream. Each `Some` exists exactly when
/// the client asked for that stream.
#[derive(Debug)]
pub(crate) struct RemoteCommandSession {
    /// What the client asked for.
    pub(crate) flags: StreamFlags,
    /// Input; the channel closes when the client closes stdin (v5 CLOSE frame, SPDY
    /// half-close) or goes away.
    pub(crate) stdin: Option<mpsc::Receiver<Bytes>>,
    /// Output (with `tty`, the terminal's whole output).
    pub(crate) stdout: Option<mpsc::Sender<Bytes>>,
    /// Error output (never with `tty`).
    pub(crate) stderr: Option<mpsc::Sender<Bytes>>,
    /// Terminal resizes (only with `tty`); the first arrives before or soon after the start.
    pub(crate) resize: Option<mpsc::Receiver<TerminalSize>>,
    /// Send the outcome once, when the command has ended and its output is written; the
    /// session then flushes, reports it on the error channel and closes. Dropping it without
    /// sending reports `Error("…")`.
    pub(crate) outcome: oneshot::Sender<CommandOutcome>,
}

/// Opens connections to a pod's ports for port-forwarding (in the pod's network namespace,
/// or on the host's loopback for host-network pods).
pub(crate) trait PortDialer: Send + Sync + 'static {
    /// Connects to `port` inside the pod; an error is reported to the client on that
    /// port's error stream.
    fn dial(&self, port: u16) -> BoxFuture<io::Result<tokio::net::TcpStream>>;
}

/// Answers a remote-command upgrade request (WebSocket or SPDY, the protocol the client
/// offers that we speak): `101 Switching Protocols` and, once the connection is upgraded,
/// runs `run` with the session on a task of its own; or a `Status` refusing the upgrade
/// (400 when no offered protocol is spoken; the client then falls back).
pub(crate) fn serve_remote_command<F>(
    request: Request<Incoming>,
    flags: StreamFlags,
    run: F,
) -> Response<Body>
where
    F: FnOnce(RemoteCommandSession) -> BoxFuture<()> + Send + 'static,
{
    let flags = StreamFlags {
        stderr: flags.stderr && !flags.tty,
        ..flags
    };
    if !(flags.stdin || flags.stdout || flags.stderr) {
        return upgrade::refuse(setpoint_core::ApiError::bad_request(
            "you must specify at least 1 of stdin, stdout, stderr",
        ));
    }
    let offer = match upgrade::negotiate(request.headers(), ChannelUse::RemoteCommand) {
        Ok(offer) => offer,
        Err(refusal) => return refusal,
    };
    let response = upgrade::switching(request.headers(), &offer);
    tokio::spawn(async move {
        let Some(io) = upgraded(request).await else {
            return;
        };
        match offer {
            Offer::WebSocket(protocol) => remote_ws::run(io, protocol, flags, run).await,
            Offer::Spdy(name) => {
                remote_spdy::run(io, upgrade::spdy_version(name), flags, run).await;
            }
            // Not offered for remote commands.
            Offer::Tunnel => {}
        }
    });
    response
}

/// Answers a port-forward upgrade request (WebSocket `portforward.k8s.io` with `?ports=`,
/// SPDY `portforward.k8s.io`, or SPDY tunnelled in a WebSocket), dialing each requested
/// port through `dialer`.
pub(crate) fn serve_port_forward(
    request: Request<Incoming>,
    dialer: Arc<dyn PortDialer>,
) -> Response<Body> {
    let offer = match upgrade::negotiate(request.headers(), ChannelUse::PortForward) {
        Ok(offer) => offer,
        Err(refusal) => return refusal,
    };
    let ports = match &offer {
        Offer::WebSocket(_) => match portforward_ws::ports(request.uri().query().unwrap_or("")) {
            Ok(ports) => ports,
            Err(refusal) => return upgrade::refuse(refusal),
        },
        Offer::Tunnel | Offer::Spdy(_) => Vec::new(),
    };
    let response = upgrade::switching(request.headers(), &offer);
    tokio::spawn(async move {
        let Some(io) = upgraded(request).await else {
            return;
        };
        match offer {
            Offer::WebSocket(protocol) => portforward_ws::run(io, protocol, ports, dialer).await,
            Offer::Spdy(_) => portforward_spdy::run(io, dialer).await,
            Offer::Tunnel => tunnel::run(io, dialer).await,
        }
    });
    response
}

/// The upgraded connection behind a `101` answer; `None` (logged) if the upgrade failed.
async fn upgraded(request: Request<Incoming>) -> Option<TokioIo<hyper::upgrade::Upgraded>> {
    match hyper::upgrade::on(request).await {
        Ok(io) => Some(TokioIo::new(io)),
        Err(error) => {
            tracing::debug!(%error, "stream upgrade failed");
            None
        }
    }
}
