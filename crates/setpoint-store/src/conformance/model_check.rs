//! [`ModelCheck`]: random operations, from a seed, applied to a backend and to the
//! [`ModelStore`], every answer compared — values exactly, errors by variant and fields.
//!
//! The operations (drawn by `random_ops`) work a small key space so that conflicts, deletes and
//! re-creates are frequent: writes with right, wrong and no expected revisions; gets, counts;
//! lists with random prefixes, start keys, limits and revisions (current, old, compacted,
//! future); compactions at random revisions; watches from random revisions drained up to the
//! current revision; and, for a backend that can, restarts from durable state. Two watches opened
//! at the start (and again after each restart) follow every step. A failure names the seed, the
//! step and the latest operations; `SETPOINT_SEED=<seed>` replays it.
//!
//! Watches are compared on the events they deliver, not on how they batch them or report
//! progress, and a backend's watch is read only up to the last event the model says it owes:
//! the trait does not require progress notifications for changes outside a watch's prefix.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use super::error_shape::{outcome, ErrorShape};
use super::random_ops::{Op, OpSource};
use super::reader::WatchReader;
use super::{b, current};
use crate::{Event, ListRequest, ModelStore, Revision, Store};

/// How many of the latest operations a failure report shows.
const RECENT: usize = 12;

/// The seeds a randomized test should run: `SETPOINT_SEED` alone if it is set, else `count`
/// random ones. Print them, so that any run can be replayed.
///
/// # Panics
///
/// If `SETPOINT_SEED` is set but is not a `u64`.
#[must_use]
pub fn seeds_from_env(count: usize) -> Vec<u64> {
    match std::env::var("SETPOINT_SEED") {
        Ok(seed) => vec![seed.trim().parse().expect("SETPOINT_SEED must be a u64")],
        Err(_) => (0..count).map(|_| rand::random()).collect(),
    }
}

type Restart<S> = Box<dyn FnMut(S) -> Pin<Box<dyn Future<Output = S> + Send>> + Send>;

/// A seeded run of random operations against a backend and the model, comparing every answer.
/// Panics, naming the seed and step, at the first difference.
pub struct ModelCheck<S> {
    seed: u64,
    steps: usize,
    restart: Option<Restart<S>>,
}

impl<S: Store> ModelCheck<S> {
    /// A run of 3,000 steps from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        ModelCheck {
            seed,
            steps: 3_000,
            restart: None,
        }
    }

    /// Runs `steps` operations.
    #[must_use]
    pub fn steps(mut self, steps: usize) -> Self {
        self.steps = steps;
        self
    }

    /// Lets the run restart the backend: `restart` closes the store it is given and returns it
    /// reopened from its durable state. Every acknowledged write must survive.
    #[must_use]
    pub fn restart_with<F, Fut>(mut self, mut restart: F) -> Self
    where
        F: FnMut(S) -> Fut + Send + 'static,
        Fut: Future<Output = S> + Send + 'static,
    {
        self.restart = Some(Box::new(move |store| Box::pin(restart(store))));
        self
    }

    /// Runs the check on `store`, which must be empty.
    pub async fn run(mut self, mut store: S) {
        let mut ops = OpSource::new(self.seed);
        let mut run = Run {
            seed: self.seed,
            step: 0,
            model: ModelStore::new(),
            followers: vec![],
            recent: VecDeque::new(),
            tally: BTreeMap::new(),
        };
        run.follow_from_now(&store).await;
        for step in 1..=self.steps {
            run.step = step;
            let op = ops.next(&run.model, step, self.restart.is_some()).await;
            run.note(format!("{op:?}"));
            match (&op, self.restart.as_mut()) {
                (Op::Restart, Some(restart)) => {
                    store = restart(store).await;
                    run.check_after_restart(&store).await;
                    *run.tally.entry("Restart ok".to_owned()).or_default() += 1;
                }
                _ => {
                    let label = run.apply(&store, &op).await;
                    *run.tally.entry(label).or_default() += 1;
                }
            }
            run.follow(&op).await;
            if step % 250 == 0 {
                run.check_everything(&store).await;
            }
        }
        run.check_everything(&store).await;
        let tally: Vec<String> = run
            .tally
            .iter()
            .map(|(label, n)| format!("{label} {n}"))
            .collect();
        println!(
            "model check, seed {}: {} steps: {}",
            self.seed,
            self.steps,
            tally.join(", ")
        );
    }
}

/// A watch opened on both stores and read after every step.
struct Follower {
    prefix: Bytes,
    backend: WatchReader,
    model: WatchReader,
}

/// The state of one run.
struct Run {
    seed: u64,
    step: usize,
    model: ModelStore,
    followers: Vec<Follower>,
    /// The latest operations, for failure reports.
    recent: VecDeque<String>,
    /// How many operations of each kind had each outcome, to show what a run covered.
    tally: BTreeMap<String, usize>,
}

impl Run {
    fn context(&self) -> String {
        format!(
            "model check (seed {}, step {}; replay with SETPOINT_SEED={})",
            self.seed, self.step, self.seed
        )
    }

    fn note(&mut self, what: String) {
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(what);
    }

    fn fail(&self, what: &str) -> ! {
        let recent: Vec<String> = self.recent.iter().map(|op| format!("\n    {op}")).collect();
        panic!(
            "{}: {what}\n  latest operations:{}",
            self.context(),
            recent.concat()
        );
    }

    /// Fails unless the answers are equal; otherwise labels the model's answer for the tally.
    fn check<T: PartialEq + Debug>(
        &self,
        what: &str,
        backend: &Result<T, ErrorShape>,
        model: &Result<T, ErrorShape>,
    ) -> String {
        if backend != model {
            self.fail(&format!(
                "{what}\n  backend: {backend:?}\n  model:   {model:?}"
            ));
        }
        let op = what.split([' ', '(']).next().unwrap_or(what);
        match model {
            Ok(_) => format!("{op} ok"),
            Err(error) => {
                let error = format!("{error:?}");
                format!(
                    "{op} {}",
                    error.split([' ', '(', '{']).next().unwrap_or(&error)
                )
            }
        }
    }

    /// Applies `op` to both stores and compares the answers.
    async fn apply<S: Store>(&self, store: &S, op: &Op) -> String {
        let model = &self.model;
        let what = format!("{op:?}");
        match op.clone() {
            Op::Create { key, value } => {
                let backend = outcome(store.create(key.clone(), value.clone()).await);
                self.check(&what, &backend, &outcome(model.create(key, value).await))
            }
            Op::Update {
                key,
                value,
                expected,
            } => {
                let backend = outcome(store.update(key.clone(), value.clone(), expected).await);
                self.check(
                    &what,
                    &backend,
                    &outcome(model.update(key, value, expected).await),
                )
            }
            Op::Delete { key, expected } => {
                let backend = outcome(store.delete(key.clone(), expected).await);
                self.check(&what, &backend, &outcome(model.delete(key, expected).await))
            }
            Op::Get { key } => self.check(
                &what,
                &outcome(store.get(&key).await),
                &outcome(model.get(&key).await),
            ),
            Op::List(request) => {
                let backend = outcome(store.list(request.clone()).await);
                self.check(&what, &backend, &outcome(model.list(request).await))
            }
            Op::Count { prefix } => self.check(
                &what,
                &outcome(store.count(&prefix).await),
                &outcome(model.count(&prefix).await),
            ),
            Op::CurrentRevision => {
                let backend = outcome(store.current_revision().await);
                self.check(&what, &backend, &outcome(model.current_revision().await))
            }
            Op::Compact { revision } => self.check(
                &what,
                &outcome(store.compact(revision).await),
                &outcome(model.compact(revision).await),
            ),
            Op::Watch { prefix, after } => {
                let model = self.watch_once_model(&prefix, after).await;
                let backend = self.watch_once(store, &prefix, after, &model).await;
                self.check(&what, &backend, &model)
            }
            Op::Restart => String::new(),
        }
    }

    /// The model's answer to a watch drained up to the current revision.
    async fn watch_once_model(
        &self,
        prefix: &Bytes,
        after: Revision,
    ) -> Result<Vec<Event>, ErrorShape> {
        let stream = outcome(self.model.watch(prefix.clone(), after).await)?;
        let mut reader = WatchReader::new(stream, prefix.clone(), after);
        reader.set_context(format!("{}: model watch", self.context()));
        let now = current(&self.model).await;
        Ok(if after < now {
            reader.read_until(now).await
        } else {
            vec![]
        })
    }

    /// The backend's answer to a watch, read until the last event the model says it must
    /// deliver (a backend need not send progress for changes outside the prefix).
    async fn watch_once<S: Store>(
        &self,
        store: &S,
        prefix: &Bytes,
        after: Revision,
        model: &Result<Vec<Event>, ErrorShape>,
    ) -> Result<Vec<Event>, ErrorShape> {
        let stream = outcome(store.watch(prefix.clone(), after).await)?;
        let mut reader = WatchReader::new(stream, prefix.clone(), after);
        reader.set_context(format!("{}: backend watch", self.context()));
        // Where the model refused, the comparison reports the difference.
        let Some(last) = model.as_ref().ok().and_then(|events| events.last()) else {
            return Ok(vec![]);
        };
        let mut events = reader.read_until(last.revision()).await;
        reader.read_ready();
        events.extend(reader.take_pending());
        Ok(events)
    }

    /// Opens the followers on both stores, from the current revision.
    async fn follow_from_now<S: Store>(&mut self, store: &S) {
        let now = current(&self.model).await;
        self.followers.clear();
        for prefix in ["", "/a/"] {
            let mut backend = WatchReader::open(store, prefix, now).await;
            let mut model = WatchReader::open(&self.model, prefix, now).await;
            backend.set_context(format!(
                "{}: backend follower of {prefix:?}",
                self.context()
            ));
            model.set_context(format!("{}: model follower of {prefix:?}", self.context()));
            self.followers.push(Follower {
                prefix: b(prefix),
                backend,
                model,
            });
        }
    }

    /// Reads the followers up to the current revision and compares what they delivered.
    async fn follow(&mut self, op: &Op) {
        let now = current(&self.model).await;
        let context = self.context();
        let mut differences = vec![];
        for follower in &mut self.followers {
            follower.backend.set_context(format!(
                "{context}: backend follower of {:?}",
                follower.prefix
            ));
            follower.model.set_context(format!(
                "{context}: model follower of {:?}",
                follower.prefix
            ));
            let expected = follower.model.read_until(now).await;
            let mut delivered = match expected.last() {
                Some(last) => follower.backend.read_until(last.revision()).await,
                None => vec![],
            };
            // Progress the backend already has for us: a watch left unread might otherwise be
            // behind a compaction at the next step, which may fail it.
            follower.backend.read_ready();
            delivered.extend(follower.backend.take_pending());
            if delivered != expected {
                differences.push(format!(
                    "follower of {:?} after {op:?}\n  backend: {delivered:?}\n  model:   {expected:?}",
                    follower.prefix
                ));
            }
        }
        if let Some(difference) = differences.first() {
            self.fail(difference);
        }
    }

    /// After a restart: the same revision, values and retained history, and new followers (the
    /// old watches ended with the old store).
    async fn check_after_restart<S: Store>(&mut self, store: &S) {
        self.check_everything(store).await;
        self.follow_from_now(store).await;
    }

    /// Compares the current revision and every key-value, now and at the compacted revision.
    async fn check_everything<S: Store>(&self, store: &S) {
        let revision = outcome(store.current_revision().await);
        self.check(
            "current revision",
            &revision,
            &outcome(self.model.current_revision().await),
        );
        let compacted = self.model.compacted_revision();
        for request in [
            ListRequest::prefix(""),
            ListRequest::prefix("").at(compacted),
        ] {
            let what = format!("full {request:?}");
            let backend = outcome(store.list(request.clone()).await);
            self.check(&what, &backend, &outcome(self.model.list(request).await));
        }
    }
}
