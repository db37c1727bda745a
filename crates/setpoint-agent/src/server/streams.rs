//! The stream routes (the contract with the API server's `pods/exec|attach|portforward`
//! proxy): `/exec/{namespace}/{pod}/{uid}/{container}?command=…&stdin=…&stdout=…&stderr=…&tty=…`,
//! `/attach/{namespace}/{pod}/{uid}/{container}?…` and `/portforward/{namespace}/{pod}/{uid}?…`,
//! GET (WebSocket) or POST (SPDY). This module parses the options, finds the pod and its
//! running container from the run records, and hands the upgrade to `streams/` with the code
//! that runs the command, attaches, or dials (`exec/`). Refusals before the upgrade are
//! `Status` objects: 404 for a pod or container not on this node, 400 for bad options or a
//! container not running.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use http::Request;
use hyper::body::Incoming;
use setpoint_core::{query_pairs, ApiError};

use super::routes::{status, Body};
use crate::exec::dialer::PodDialer;
use crate::exec::target::{any_running_container, running_container};
use crate::logs::pod_dir;
use crate::streams::{serve_port_forward, serve_remote_command, StreamFlags};

/// Which remote-command route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `/exec`: run a command.
    Exec,
    /// `/attach`: attach to the container's main process.
    Attach,
}

/// A remote-command request's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RemoteOptions {
    /// The command (`command`, repeated); empty for attach.
    pub(super) command: Vec<String>,
    /// The streams asked for.
    pub(super) flags: StreamFlags,
}

/// Parses a remote-command query as kube does: booleans are false only when absent, `0` or
/// `false` (any case); the kubelet's `input`/`output`/`error` are accepted as `stdin`/
/// `stdout`/`stderr`; at least one stream is required; with `tty`, stderr is dropped (it
/// is part of the terminal's output); exec needs a command.
pub(super) fn parse_options(kind: Kind, query: &str) -> Result<RemoteOptions, ApiError> {
    let pairs = query_pairs(query);
    let flag = |names: &[&str]| {
        pairs
            .iter()
            .find(|(k, _)| names.contains(&k.as_str()))
            .is_some_and(|(_, v)| !(v == "0" || v.eq_ignore_ascii_case("false")))
    };
    let tty = flag(&["tty"]);
    let flags = StreamFlags {
        stdin: flag(&["stdin", "input"]),
        stdout: flag(&["stdout", "output"]),
        stderr: flag(&["stderr", "error"]) && !tty,
        tty,
    };
    if !(flags.stdin || flags.stdout || flag(&["stderr", "error"])) {
        return Err(ApiError::bad_request(
            "you must specify at least 1 of stdin, stdout, stderr",
        ));
    }
    let command: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if kind == Kind::Exec && command.is_empty() {
        return Err(ApiError::bad_request(
            "you must specify at least one command for the container",
        ));
    }
    Ok(RemoteOptions { command, flags })
}

/// `/exec/…` and `/attach/…`.
pub(super) async fn remote_command(
    root: &Path,
    shim: Arc<Vec<OsString>>,
    kind: Kind,
    (namespace, pod, uid, container): (&str, &str, &str, &str),
    request: Request<Incoming>,
) -> http::Response<Body> {
    let options = match parse_options(kind, request.uri().query().unwrap_or_default()) {
        Ok(options) => options,
        Err(e) => return status(&e),
    };
    let dir = pod_dir(root, namespace, pod, uid);
    let target = match running_container(&dir, pod, container) {
        Ok(target) => target,
        Err(e) => return status(&e),
    };
    match kind {
        Kind::Exec => {
            let argv = options.command;
            serve_remote_command(request, options.flags, move |session| {
                Box::pin(async move {
                    crate::exec::session::exec_in(&shim, &target, &argv, session).await;
                })
            })
        }
        Kind::Attach => {
            // Connect before answering: a container without a socket is refused, not upgraded.
            let socket = match crate::exec::attach::connect(&target).await {
                Ok(socket) => socket,
                Err(e) => {
                    return status(&ApiError::bad_request(format!(
                        "cannot attach to the container {container}: {e}"
                    )))
                }
            };
            serve_remote_command(request, options.flags, move |session| {
                Box::pin(crate::exec::attach::attach(socket, session))
            })
        }
    }
}

/// `/portforward/…`: dials in the network of the pod's running container.
pub(super) fn port_forward(
    root: &Path,
    (namespace, pod, uid): (&str, &str, &str),
    request: Request<Incoming>,
) -> http::Response<Body> {
    let dir = pod_dir(root, namespace, pod, uid);
    let dialer = match any_running_container(&dir, pod) {
        Ok(container) => PodDialer::for_process(container.pid),
        Err(e) => return status(&e),
    };
    serve_port_forward(request, Arc::new(dialer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_should_parse_as_kube_does() {
        let exec = parse_options(
            Kind::Exec,
            "command=sh&command=-c&command=echo%20hi&stdin=true&stdout=1&stderr=True&tty=false",
        )
        .expect("valid");
        assert_eq!(exec.command, vec!["sh", "-c", "echo hi"]);
        assert_eq!(
            exec.flags,
            StreamFlags {
                stdin: true,
                stdout: true,
                stderr: true,
                tty: false
            }
        );
        // tty drops stderr; the kubelet's names work too.
        let tty =
            parse_options(Kind::Exec, "command=sh&input=1&output=1&error=1&tty=1").expect("valid");
        assert!(tty.flags.tty && tty.flags.stdin && tty.flags.stdout && !tty.flags.stderr);
        // Only "0"/"false" are false.
        let off = parse_options(Kind::Attach, "stdout=FALSE&stderr=0&stdin=yes").expect("valid");
        assert!(off.flags.stdin && !off.flags.stdout && !off.flags.stderr);
        let none = parse_options(Kind::Exec, "command=ls&stdout=false").expect_err("no stream");
        assert_eq!(none.code(), 400);
        assert!(
            none.to_string()
                .contains("at least 1 of stdin, stdout, stderr"),
            "{none}"
        );
        let no_command = parse_options(Kind::Exec, "stdout=true").expect_err("no command");
        assert_eq!(no_command.code(), 400);
        assert!(parse_options(Kind::Attach, "stdout=true").is_ok());
    }
}
