//! WATCH: newline-delimited `{"type","object"}` events streamed from the watch cache, flushed
//! per batch, with bookmarks, `timeoutSeconds`, `410 Expired` (at request time as a `Status`,
//! later as an `ERROR` event) and streaming lists (`sendInitialEvents`). Objects of a resource
//! converted by a webhook are converted per batch; a failed conversion ends the watch with an
//! `ERROR` event.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue, Response, StatusCode};
use rand::Rng;
use serde_json::{json, Value};
use setpoint_core::{ApiError, FieldOperator, FieldSelector, FieldTerm, Revision};
use tokio::time::Instant;

use super::params::{invalid_options, list_options};
use super::read::table_of;
use super::response::{self, Body, Form};
use super::Ctx;
use crate::registry::store::served_objects;
use crate::registry::ResourceDef;
use crate::request_info::flag;
use crate::watchcache::ServedJson;
use crate::watchcache::{CachedObject, EventType, Watcher};

/// On a busy stream (one that sent a batch less than [`HOT_FOR`] ago) a batch smaller than
/// this waits [`COALESCE_FOR`] for more events before it is sent. A stream that was quiet
/// sends its first event at once, so a trickle of changes is never delayed; a busy one sends
/// several events per TLS record and `write`, which is what bounds fan-out under load.
const COALESCE_BELOW: usize = 16;
const COALESCE_FOR: Duration = Duration::from_millis(1);
const HOT_FOR: Duration = Duration::from_millis(20);

/// How often a watch that asked for bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// Starts a watch.
pub(crate) async fn watch(ctx: &Ctx<'_>) -> Result<Response<Body>, ApiError> {
    let send_initial = flag(ctx.query, "sendInitialEvents")?;
    let rv_match = ctx
        .query
        .get("resourceVersionMatch")
        .map(String::as_str)
        .unwrap_or("");
    if send_initial && rv_match != "NotOlderThan" {
        return Err(invalid_options(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !send_initial && !rv_match.is_empty() {
        return Err(invalid_options(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    let mut options = list_options(ctx, true)?;
    if let Some(name) = &ctx.req.name {
        // `GET …/pods/p1?watch=true`: a watch of one object.
        let mut terms = options.filter.fields.terms().to_vec();
        terms.push(FieldTerm {
            field: "metadata.name".into(),
            operator: FieldOperator::Equals,
            value: name.clone(),
        });
        options.filter.fields = FieldSelector::from_terms(terms);
    }
    let bookmarks = flag(ctx.query, "allowWatchBookmarks")?;
    let deadline = watch_deadline(ctx.query.get("timeoutSeconds").map(String::as_str))?;
    let (initial, start, watcher) = ctx.store.watch(&options, send_initial).await?;
    let form = response::form(ctx.accept);
    let sent =
        ctx.api
            .telemetry
            .watch_events(&ctx.def.gvk.group, &ctx.def.gvk.version, &ctx.def.plural);
    let state = Stream {
        def: ctx.def.clone(),
        sent,
        watcher,
        initial,
        initial_end: send_initial.then_some(start),
        form,
        bookmarks,
        deadline,
        next_bookmark: Instant::now() + BOOKMARK_EVERY,
        last_sent: None,
        done: false,
    };
    let chunks = futures::stream::unfold(state, |mut s| async move {
        let chunk = s.next_chunk().await?;
        Some((Ok::<_, std::io::Error>(chunk), s))
    });
    let mut r = Response::new(crate::server::stream_body(chunks));
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

/// When a watch with `timeoutSeconds` ends. Unset or 0: after a random 30 to 60 minutes (as
/// kube-apiserver spreads its watches' ends over its minimum request timeout); negative: at
/// once, as kube-apiserver's timer does; longer than thirty years: thirty years. Not an
/// integer: 400.
fn watch_deadline(timeout_seconds: Option<&str>) -> Result<Instant, ApiError> {
    let now = Instant::now();
    let seconds = match timeout_seconds {
        None | Some("") => 0,
        Some(t) => t
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
    };
    let timeout = match u64::try_from(seconds) {
        Err(_) => return Ok(now),
        Ok(0) => Duration::from_secs(rand::thread_rng().gen_range(1800..3600)),
        Ok(s) => Duration::from_secs(s),
    };
    // A timer is never set further out than thirty years: as good as never.
    let timeout = timeout.min(Duration::from_secs(86_400 * 365 * 30));
    Ok(now.checked_add(timeout).unwrap_or(now))
}

/// `objects` as served (see `registry/store/convert.rs`). The body stream must be `Sync` and
/// a conversion's future is not, so a conversion runs as a task of its own.
async fn converted(
    def: &Arc<ResourceDef>,
    objects: Vec<Arc<CachedObject>>,
) -> Result<Vec<Arc<CachedObject>>, ApiError> {
    if def.strategy.conversion().is_none() {
        return Ok(objects);
    }
    let def = def.clone();
    tokio::spawn(async move { served_objects(&def, objects).await })
        .await
        .map_err(|e| ApiError::internal(format!("conversion: {e}")))?
}

struct Stream {
    def: Arc<ResourceDef>,
    /// Counts the events sent (`apiserver_watch_events_total`).
    sent: Arc<AtomicU64>,
    watcher: Watcher,
    /// Synthetic ADDED events still to send.
    initial: VecDeque<Arc<CachedObject>>,
    /// With `sendInitialEvents`: the bookmark that ends the initial events, still to send.
    initial_end: Option<Revision>,
    form: Form,
    bookmarks: bool,
    deadline: Instant,
    next_bookmark: Instant,
    /// When the last batch of events was sent.
    last_sent: Option<Instant>,
    done: bool,
}

impl Stream {
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        if !self.initial.is_empty() {
            let n = self.initial.len().min(256);
            let batch: Vec<_> = self.initial.drain(..n).collect();
            let batch = match converted(&self.def, batch).await {
                Ok(b) => b,
                Err(e) => return Some(self.fail(&e)),
            };
            let mut out = BytesMut::new();
            for o in &batch {
                self.line(&mut out, EventType::Added.as_str(), &o.json);
            }
            self.sent.fetch_add(batch.len() as u64, Ordering::Relaxed);
            return Some(out.freeze());
        }
        if let Some(rv) = self.initial_end.take() {
            return Some(self.bookmark(rv, true));
        }
        loop {
            tokio::select! {
                next = self.watcher.next() => match next {
                    Ok(events) if events.is_empty() => continue,
                    Ok(mut events) => {
                        let hot = self.last_sent.is_some_and(|t| t.elapsed() < HOT_FOR);
                        if hot && events.len() < COALESCE_BELOW {
                            tokio::time::sleep(COALESCE_FOR).await;
                            events.extend(self.watcher.try_next().unwrap_or_default());
                        }
                        let kinds: Vec<EventType> = events.iter().map(|e| e.kind).collect();
                        let objects = events.into_iter().map(|e| e.object).collect();
                        let objects = match converted(&self.def, objects).await {
                            Ok(o) => o,
                            Err(e) => return Some(self.fail(&e)),
                        };
                        let size = objects.iter().map(|o| o.json.len() + 32).sum();
                        let mut out = BytesMut::with_capacity(size);
                        for (kind, o) in kinds.iter().zip(&objects) {
                            self.line(&mut out, kind.as_str(), &o.json);
                        }
                        self.sent.fetch_add(objects.len() as u64, Ordering::Relaxed);
                        self.last_sent = Some(Instant::now());
                        return Some(out.freeze());
                    }
                    Err(_) if self.watcher.is_stopped() => return None,
                    Err(e) => return Some(self.fail(&e)),
                },
                () = tokio::time::sleep_until(self.deadline) => return None,
                () = tokio::time::sleep_until(self.next_bookmark), if self.bookmarks => {
                    self.next_bookmark = Instant::now() + BOOKMARK_EVERY;
                    return Some(self.bookmark(self.watcher.cursor(), false));
                }
            }
        }
    }

    /// Ends the stream with an `ERROR` event carrying `e`'s status.
    fn fail(&mut self, e: &ApiError) -> Bytes {
        self.done = true;
        let mut out = BytesMut::new();
        out.extend_from_slice(b"{\"type\":\"ERROR\",\"object\":");
        out.extend_from_slice(&e.to_json());
        out.extend_from_slice(b"}\n");
        out.freeze()
    }

    fn line(&self, out: &mut BytesMut, kind: &str, object: &ServedJson) {
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        match self.form {
            Form::Object => object.write_to(out),
            Form::Table { v1beta1 } => {
                let value: Value = serde_json::from_slice(&object.bytes()).unwrap_or(Value::Null);
                let rv = value["metadata"]["resourceVersion"].clone();
                let table = table_of(
                    &self.def,
                    std::iter::once(value),
                    json!({"resourceVersion": rv}),
                    v1beta1,
                    "Metadata",
                );
                out.extend_from_slice(&setpoint_core::wire::to_vec(&table));
            }
            Form::Metadata { v1beta1 } => {
                let value: Value = serde_json::from_slice(&object.bytes()).unwrap_or(Value::Null);
                out.extend_from_slice(&setpoint_core::wire::to_vec(&response::partial_metadata(
                    &value, v1beta1,
                )));
            }
        }
        out.extend_from_slice(b"}\n");
    }

    fn bookmark(&self, rv: Revision, initial_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({"kind": self.def.gvk.kind, "apiVersion": self.def.gvk.api_version(), "metadata": metadata});
        let mut line = br#"{"type":"BOOKMARK","object":"#.to_vec();
        setpoint_core::wire::write(&mut line, &object);
        line.extend_from_slice(b"}\n");
        Bytes::from(line)
    }
}
