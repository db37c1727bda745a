//! A transport in front of a `TestEnv`'s API server that a test can stall and spy on — a slow
//! or flaky network, in a test's hands. The server itself is the real one.
//!
//! - watch requests can be held before they reach the server ([`Gate::hold_watches`]);
//! - watch response streams can be stalled ([`Gate::stall_streams`]): the server's watch cursor
//!   stops advancing, so enough writes meanwhile push it out of the server's window (`410`);
//! - list and watch requests can be refused with a status ([`Gate::refuse`]), and streaming
//!   lists alone ([`Gate::refuse_streaming`]);
//! - every request's method, path and query is recorded ([`Gate::requests`]).

#![allow(dead_code, reason = "each test file uses a different part")]

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, BodyStream, StreamBody};
use parking_lot::Mutex;
use setpoint_runtime::Client;
use setpoint_testenv::TestEnv;
use tokio::sync::watch;

type Body = UnsyncBoxBody<Bytes, io::Error>;

/// The test's controls over the transport.
pub(crate) struct Gate {
    watches_open: watch::Sender<bool>,
    streams_open: watch::Sender<bool>,
    refuse: Mutex<Option<u16>>,
    refuse_streaming: Mutex<bool>,
    requests: Mutex<Vec<String>>,
    held: AtomicUsize,
}

impl Gate {
    /// An open gate: everything passes.
    pub(crate) fn new() -> Arc<Gate> {
        Arc::new(Gate {
            watches_open: watch::Sender::new(true),
            streams_open: watch::Sender::new(true),
            refuse: Mutex::new(None),
            refuse_streaming: Mutex::new(false),
            requests: Mutex::new(Vec::new()),
            held: AtomicUsize::new(0),
        })
    }

    /// A client for `env`'s server through this gate.
    pub(crate) fn client(self: &Arc<Gate>, env: &TestEnv) -> Client {
        let api = env.api().clone();
        let gate = self.clone();
        Client::in_process(move |request: http::Request<Bytes>| {
            let api = api.clone();
            let gate = gate.clone();
            async move {
                gate.serve(request, |r| async move { api.handle(r).await })
                    .await
            }
        })
    }

    /// Holds new watch requests (`true`) or lets them (and the held ones) through.
    pub(crate) fn hold_watches(&self, hold: bool) {
        self.watches_open.send_replace(!hold);
    }

    /// Stalls watch response streams (`true`) or lets them flow again.
    pub(crate) fn stall_streams(&self, stall: bool) {
        self.streams_open.send_replace(!stall);
    }

    /// Answers every request with this status code (`None`: serve normally).
    pub(crate) fn refuse(&self, code: Option<u16>) {
        *self.refuse.lock() = code;
    }

    /// Answers streaming-list watches (`sendInitialEvents=true`) with 422.
    pub(crate) fn refuse_streaming(&self, refuse: bool) {
        *self.refuse_streaming.lock() = refuse;
    }

    /// How many watch requests are held now.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// The method, path and query of every request so far (`GET /api/v1/…?…`).
    pub(crate) fn requests(&self) -> Vec<String> {
        self.requests.lock().clone()
    }

    /// Waits (up to 30 s, then panics) until `condition` holds.
    pub(crate) async fn until(&self, what: &str, mut condition: impl FnMut(&Gate) -> bool) {
        let wait = async {
            while !condition(self) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
    }

    async fn serve<F, Fut, B>(
        &self,
        request: http::Request<Bytes>,
        server: F,
    ) -> http::Response<Body>
    where
        F: FnOnce(http::Request<Bytes>) -> Fut,
        Fut: std::future::Future<Output = http::Response<B>>,
        B: http_body::Body<Data = Bytes, Error = io::Error> + Send + Unpin + 'static,
    {
        let target = request
            .uri()
            .path_and_query()
            .map(ToString::to_string)
            .unwrap_or_default();
        self.requests
            .lock()
            .push(format!("{} {target}", request.method()));
        let watch = target.contains("watch=true");
        if let Some(code) = *self.refuse.lock() {
            return status(code, "refused by the test transport");
        }
        if watch && target.contains("sendInitialEvents=true") && *self.refuse_streaming.lock() {
            return status(
                422,
                "sendInitialEvents: Forbidden: refused by the test transport",
            );
        }
        if watch && !*self.watches_open.borrow() {
            self.held.fetch_add(1, Ordering::SeqCst);
            let _ = self.watches_open.subscribe().wait_for(|open| *open).await;
            self.held.fetch_sub(1, Ordering::SeqCst);
        }
        let response = server(request).await;
        if !watch {
            return response.map(|b| b.boxed_unsync());
        }
        let open = self.streams_open.subscribe();
        response.map(|body| {
            let frames = StreamExt::boxed(BodyStream::new(body));
            // Read the server's stream only while open: stalling stops polling it, even in
            // the middle of waiting for the next event, so the server's cursor stays put.
            let gated =
                futures::stream::unfold((frames, open), |(mut frames, mut open)| async move {
                    let frame = loop {
                        let _ = open.wait_for(|open| *open).await;
                        tokio::select! {
                            frame = frames.next() => break frame?,
                            _ = open.wait_for(|open| !*open) => continue,
                        }
                    };
                    Some((frame, (frames, open)))
                });
            StreamBody::new(gated).boxed_unsync()
        })
    }
}

fn status(code: u16, message: &str) -> http::Response<Body> {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "code": code,
    })
    .to_string();
    let mut response = http::Response::new(
        http_body_util::Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() =
        http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response
}
