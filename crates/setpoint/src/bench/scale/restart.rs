//! A restart as a user sees it: the server is stopped (SIGTERM, and waited for) and started
//! again on the same data directory and address; from the moment the new process exists, one
//! client polls `/readyz` and another lists every ConfigMap of the namespace, each every
//! [`POLL`], until `/readyz` answers 200 and a list answers 200 with every object. Every list
//! answer in that window is counted by kind: issue 23 wants none answered 5xx.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt as _;

use super::writes::NAMESPACE;
use crate::bench::api::client::{Call, Client, Connection, Protocol};
use crate::bench::api::{list, load};
use crate::bench::kubeconfig::Endpoint;
use crate::bench::server::ServerProcess;

/// How often `/readyz` and the list are tried.
const POLL: Duration = Duration::from_millis(10);
/// How long the server gets to exit after SIGTERM before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(60);
/// How long the restarted server gets to be ready and serve the whole list.
const RESTART_TIMEOUT: Duration = Duration::from_secs(900);
/// How long one list may take, its whole body included.
const LIST_TIMEOUT: Duration = Duration::from_secs(300);

/// What a restart took.
pub(super) struct Restarted {
    /// The new server.
    pub(super) server: ServerProcess,
    /// From SIGTERM until the old server had exited.
    pub(super) exit: Duration,
    /// Whether the old server had to be killed after [`EXIT_GRACE`].
    pub(super) killed: bool,
    /// From the new process's start until `/readyz` answered 200.
    pub(super) ready: Duration,
    /// From the new process's start until the end of the first list answered 200 with every
    /// object.
    pub(super) first_list: Duration,
    /// The list answers before that one.
    pub(super) answers: Answers,
}

/// The list answers a restart window saw before the first complete one (refused connections
/// are not answers and are not counted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Answers {
    /// When each 5xx answer came, from the new process's start.
    pub(super) server_errors: Vec<Duration>,
    /// The first 5xx answer: its status and the start of its body.
    pub(super) first_server_error: Option<String>,
    /// `429 Too Many Requests` answers (a client retries them).
    pub(super) throttled: u64,
    /// `200` answers without every object.
    pub(super) short: u64,
    /// Other answers (4xx other than 429).
    pub(super) other: u64,
}

impl Answers {
    /// How many 5xx answers came after `/readyz` said ok (at `ready`).
    pub(super) fn server_errors_after(&self, ready: Duration) -> usize {
        self.server_errors.iter().filter(|&&at| at >= ready).count()
    }
}

/// Stops `server` and starts it again on `root`'s data directory at the address of
/// `endpoint` with `args`; waits until it is ready and serves a list of `expected`
/// ConfigMaps.
pub(super) async fn restart(
    server: ServerProcess,
    root: &Path,
    endpoint: &Endpoint,
    client: &Client,
    args: &[&str],
    expected: u64,
) -> Result<Restarted> {
    let (exit, killed) = server.terminate(EXIT_GRACE).await?;
    let listen = endpoint.addr.to_string();
    let mut server = ServerProcess::spawn(root, &listen, args)?;
    let start = Instant::now();
    let polls = async {
        let (ready, listed) = tokio::join!(
            poll_ready(client, start),
            poll_list(client, start, expected)
        );
        let (first_list, answers) = listed?;
        anyhow::Ok((ready, first_list, answers))
    };
    let outcome = tokio::select! {
        outcome = tokio::time::timeout(RESTART_TIMEOUT, polls) => outcome,
        error = exited(&mut server) => return Err(error),
    };
    let Ok(polled) = outcome else {
        bail!(
            "the restarted server was not ready with every object listed within {RESTART_TIMEOUT:?}; {}",
            server.log_tail()
        );
    };
    let (ready, first_list, answers) = polled?;
    Ok(Restarted {
        server,
        exit,
        killed,
        ready,
        first_list,
        answers,
    })
}

/// Returns once the server has exited, with why.
async fn exited(server: &mut ServerProcess) -> anyhow::Error {
    loop {
        if let Err(error) = server.check_running() {
            return error;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends `call` on `connection` and reads the whole answer; `None` when the connection failed
/// (or the answer took longer than `timeout`), after which it must not be used again.
async fn exchange(
    connection: &mut Connection,
    call: Call,
    timeout: Duration,
) -> Option<(StatusCode, Bytes)> {
    let answer = async {
        let response = connection.open(call).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        anyhow::Ok((status, body))
    };
    tokio::time::timeout(timeout, answer).await.ok()?.ok()
}

/// Polls `/readyz` until it answers 200; returns when, from `start`. Reconnects after a
/// failed connection; cancel-safe.
pub(super) async fn poll_ready(client: &Client, start: Instant) -> Duration {
    let mut connection: Option<Connection> = None;
    loop {
        if connection.is_none() {
            connection = client.connect(Protocol::Http1).await.ok();
        }
        if let Some(open) = connection.as_mut() {
            match exchange(open, Call::get("/readyz"), LIST_TIMEOUT).await {
                Some((StatusCode::OK, _)) => return start.elapsed(),
                Some(_) => {}
                None => connection = None,
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Lists the namespace's ConfigMaps until an answer is 200 with `expected` of them; returns
/// when that answer ended, from `start`, and the answers before it.
async fn poll_list(client: &Client, start: Instant, expected: u64) -> Result<(Duration, Answers)> {
    let path = load::configmaps(NAMESPACE);
    let mut answers = Answers::default();
    let mut connection: Option<Connection> = None;
    loop {
        if connection.is_none() {
            connection = client.connect(Protocol::Http1).await.ok();
        }
        if let Some(open) = connection.as_mut() {
            match exchange(open, Call::get(path.clone()), LIST_TIMEOUT).await {
                None => connection = None,
                Some((status, body)) => {
                    if status == StatusCode::OK {
                        let items = list::parse(&body)?.items.len() as u64;
                        if items == expected {
                            return Ok((start.elapsed(), answers));
                        }
                        answers.short += 1;
                    } else {
                        answers.record(status, &body, start.elapsed());
                    }
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

impl Answers {
    /// Counts a non-200 answer that came `at` after the start.
    fn record(&mut self, status: StatusCode, body: &[u8], at: Duration) {
        if status.is_server_error() {
            self.server_errors.push(at);
            if self.first_server_error.is_none() {
                let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
                self.first_server_error = Some(format!("{status}: {text}"));
            }
        } else if status == StatusCode::TOO_MANY_REQUESTS {
            self.throttled += 1;
        } else {
            self.other += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_should_count_server_errors_by_when_they_came() {
        let mut answers = Answers::default();
        let ms = Duration::from_millis;
        answers.record(
            StatusCode::GATEWAY_TIMEOUT,
            b"Too large resource version",
            ms(5),
        );
        answers.record(StatusCode::TOO_MANY_REQUESTS, b"", ms(6));
        answers.record(StatusCode::SERVICE_UNAVAILABLE, b"", ms(20));
        answers.record(StatusCode::FORBIDDEN, b"", ms(21));
        assert_eq!(answers.server_errors, [ms(5), ms(20)]);
        assert_eq!(answers.throttled, 1);
        assert_eq!(answers.other, 1);
        assert_eq!(answers.server_errors_after(ms(10)), 1);
        assert_eq!(answers.server_errors_after(ms(1)), 2);
        assert!(answers
            .first_server_error
            .as_deref()
            .is_some_and(|e| e.starts_with("504") && e.contains("Too large")));
    }
}
