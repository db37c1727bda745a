//! The in-memory MVCC state: the current index of every key, plus the retained history of
//! changes from which older revisions are reconstructed and watches are served.
//!
//! The index is a persistent (structurally shared) ordered map, so taking a consistent
//! snapshot of it is O(1): readers clone it under a brief read lock and then work without any
//! lock, and the writer stages a batch on its own copy and publishes it by swapping the root.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::time::Instant;

use bytes::Bytes;
use setpoint_core::Revision;

use super::codec::LoggedWrite;
use crate::error::{Result, StoreError};
use crate::store::prefix_end;
use crate::types::{Event, EventKind, KeyValue, ListRequest, ListResult};

/// What the index holds for a live key (the key itself is the map key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) value: Bytes,
    pub(super) create: Revision,
    pub(super) modified: Revision,
    pub(super) version: u64,
}

impl Entry {
    pub(super) fn to_kv(&self, key: &Bytes) -> KeyValue {
        KeyValue {
            key: key.clone(),
            value: self.value.clone(),
            create_revision: self.create,
            mod_revision: self.modified,
            version: self.version,
        }
    }

    fn from_kv(kv: &KeyValue) -> Entry {
        Entry {
            value: kv.value.clone(),
            create: kv.create_revision,
            modified: kv.mod_revision,
            version: kv.version,
        }
    }
}

/// The current value of every live key.
pub(super) type Index = imbl::OrdMap<Bytes, Entry>;

/// The published state readers see.
pub(super) struct State {
    /// Every live key as of `revision`.
    pub(super) index: Index,
    /// The revision of the latest published change.
    pub(super) revision: Revision,
    /// History up to and including this revision is forgotten.
    pub(super) compacted: Revision,
    /// Every change with a revision in `compacted+1 ..= revision`, in order: the event for
    /// revision `r` is at position `r - compacted - 1`.
    pub(super) history: VecDeque<Event>,
    /// When each published batch ended (its last revision), oldest first; for age-based
    /// retention. Entries at or below `compacted` are dropped with the history.
    pub(super) commit_times: VecDeque<(Revision, Instant)>,
}

impl State {
    /// An empty state, or the state loaded from a snapshot at `revision` (also the compaction
    /// point: no history before a snapshot survives a restart).
    pub(super) fn new(index: Index, revision: Revision) -> State {
        State {
            index,
            revision,
            compacted: revision,
            history: VecDeque::new(),
            commit_times: VecDeque::new(),
        }
    }

    /// Checks the invariants on the fields above. Cheap enough for tests and debug builds.
    #[cfg(any(test, debug_assertions))]
    pub(super) fn check_invariants(&self) {
        assert!(self.compacted <= self.revision);
        assert_eq!(
            self.history.len() as u64,
            self.revision.get() - self.compacted.get(),
            "history must hold exactly the uncompacted revisions"
        );
        if let Some(first) = self.history.front() {
            assert_eq!(first.revision(), self.compacted.next());
        }
    }

    /// Appends a published batch: its events must continue the history without a gap.
    pub(super) fn publish(&mut self, index: Index, events: Vec<Event>, now: Instant) {
        if let Some(last) = events.last() {
            debug_assert_eq!(events[0].revision(), self.revision.next());
            self.revision = last.revision();
            self.commit_times.push_back((self.revision, now));
        }
        self.history.extend(events);
        self.index = index;
    }

    /// Forgets history up to and including `revision`. Returns the dropped events, for the
    /// caller to free outside any lock.
    pub(super) fn compact(&mut self, revision: Revision) -> Result<Vec<Event>> {
        check_compact(revision, self.compacted, self.revision)?;
        let n = (revision.get() - self.compacted.get()) as usize;
        let dropped: Vec<Event> = self.history.drain(..n).collect();
        self.compacted = revision;
        while self
            .commit_times
            .front()
            .is_some_and(|(r, _)| *r <= revision)
        {
            self.commit_times.pop_front();
        }
        Ok(dropped)
    }

    /// Checks that a read at `revision` can be answered.
    pub(super) fn check_readable(&self, revision: Revision) -> Result<()> {
        if revision > self.revision {
            return Err(StoreError::FutureRevision {
                requested: revision,
                current: self.revision,
            });
        }
        if revision < self.compacted {
            return Err(StoreError::Compacted {
                requested: revision,
                compacted: self.compacted,
            });
        }
        Ok(())
    }

    /// The changes under `prefix` after `revision` (which must be readable), as an undo map:
    /// for each key changed since, its state at `revision` (`None`: absent then).
    pub(super) fn undo_since(&self, revision: Revision, prefix: &[u8]) -> Undo {
        let from = (revision.get() - self.compacted.get()) as usize;
        let mut undo = Undo::new();
        // Newest first, so that for a key changed several times the oldest change's `prev`,
        // which is its state at `revision`, is written last.
        for event in self.history.range(from..).rev() {
            if event.kv.key.starts_with(prefix) {
                undo.insert(event.kv.key.clone(), event.prev.clone());
            }
        }
        undo
    }
}

/// For keys changed after some revision, their state at that revision.
pub(super) type Undo = BTreeMap<Bytes, Option<KeyValue>>;

/// Checks that `revision` is a valid compaction target.
pub(super) fn check_compact(
    revision: Revision,
    compacted: Revision,
    current: Revision,
) -> Result<()> {
    if revision > current {
        return Err(StoreError::FutureRevision {
            requested: revision,
            current,
        });
    }
    if revision <= compacted {
        return Err(StoreError::Compacted {
            requested: revision,
            compacted,
        });
    }
    Ok(())
}

/// A write the caller asked for, with its precondition.
#[derive(Debug)]
pub(super) enum WriteOp {
    Create {
        key: Bytes,
        value: Bytes,
    },
    Update {
        key: Bytes,
        value: Bytes,
        expected: Option<Revision>,
    },
    Delete {
        key: Bytes,
        expected: Option<Revision>,
    },
}

/// Checks `op`'s precondition against `index` and applies it at `revision`. On success returns
/// the change and what to log; on failure `index` is unchanged.
pub(super) fn apply(
    index: &mut Index,
    revision: Revision,
    op: &WriteOp,
) -> Result<(Event, LoggedWrite)> {
    let check = |key: &Bytes, expected: Option<Revision>, index: &Index| -> Result<Entry> {
        let entry = index.get(key).ok_or(StoreError::NotFound)?;
        if let Some(expected) = expected {
            if entry.modified != expected {
                return Err(StoreError::Conflict {
                    expected,
                    current: Box::new(entry.to_kv(key)),
                });
            }
        }
        Ok(entry.clone())
    };
    match op {
        WriteOp::Create { key, value } => {
            if let Some(entry) = index.get(key) {
                return Err(StoreError::AlreadyExists {
                    current: Box::new(entry.to_kv(key)),
                });
            }
            let logged = LoggedWrite::Put {
                key: key.clone(),
                value: value.clone(),
            };
            Ok((put(index, revision, key, value, None), logged))
        }
        WriteOp::Update {
            key,
            value,
            expected,
        } => {
            let prev = check(key, *expected, index)?;
            let logged = LoggedWrite::Put {
                key: key.clone(),
                value: value.clone(),
            };
            Ok((put(index, revision, key, value, Some(prev)), logged))
        }
        WriteOp::Delete { key, expected } => {
            let prev = check(key, *expected, index)?;
            let logged = LoggedWrite::Delete { key: key.clone() };
            Ok((delete(index, revision, key, prev), logged))
        }
    }
}

/// Replays a logged write at `revision` (recovery): a put creates or updates, a delete of a
/// missing key means the log and the snapshot disagree.
pub(super) fn replay(index: &mut Index, revision: Revision, write: &LoggedWrite) -> Result<Event> {
    match write {
        LoggedWrite::Put { key, value } => {
            let prev = index.get(key).cloned();
            Ok(put(index, revision, key, value, prev))
        }
        LoggedWrite::Delete { key } => {
            let prev = index.get(key).cloned().ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "log deletes key {:?} at revision {revision}, which does not exist then",
                    String::from_utf8_lossy(key)
                ))
            })?;
            Ok(delete(index, revision, key, prev))
        }
    }
}

fn put(
    index: &mut Index,
    revision: Revision,
    key: &Bytes,
    value: &Bytes,
    prev: Option<Entry>,
) -> Event {
    let entry = match &prev {
        Some(p) => Entry {
            value: value.clone(),
            create: p.create,
            modified: revision,
            version: p.version + 1,
        },
        None => Entry {
            value: value.clone(),
            create: revision,
            modified: revision,
            version: 1,
        },
    };
    let kv = entry.to_kv(key);
    index.insert(key.clone(), entry);
    Event {
        kind: EventKind::Put,
        kv,
        prev: prev.map(|p| p.to_kv(key)),
    }
}

fn delete(index: &mut Index, revision: Revision, key: &Bytes, prev: Entry) -> Event {
    index.remove(key);
    Event {
        kind: EventKind::Delete,
        kv: KeyValue {
            key: key.clone(),
            value: Bytes::new(),
            create_revision: prev.create,
            mod_revision: revision,
            version: prev.version,
        },
        prev: Some(prev.to_kv(key)),
    }
}

/// Rolls `index` (the state at some revision) back over `events` (the changes after the
/// revision wanted, in order), yielding the state before them.
pub(super) fn roll_back<'a>(index: &mut Index, events: impl DoubleEndedIterator<Item = &'a Event>) {
    for event in events.rev() {
        match &event.prev {
            Some(prev) => {
                index.insert(prev.key.clone(), Entry::from_kv(prev));
            }
            None => {
                index.remove(&event.kv.key);
            }
        }
    }
}

/// Lists `request` (already validated) from `index`, the state at `revision`, corrected by
/// `undo` for keys that changed after the revision asked for.
pub(super) fn list(
    index: &Index,
    undo: &Undo,
    revision: Revision,
    request: &ListRequest,
) -> ListResult {
    let start = request
        .start
        .clone()
        .unwrap_or_else(|| request.prefix.clone());
    let end = prefix_end(&request.prefix);
    let bounds = (
        Bound::Included(start),
        end.map_or(Bound::Unbounded, Bound::Excluded),
    );
    let limit = request.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);

    let mut kvs = Vec::new();
    let mut remaining = 0u64;
    // Merge the index range with the undo map, both in key order; undo entries win. Past the
    // limit, keys are only counted (or, with `only_more`, the first one ends the walk).
    let mut from_index = index.range(bounds.clone()).peekable();
    let mut from_undo = undo.range(bounds).peekable();
    loop {
        if request.only_more && remaining > 0 {
            break;
        }
        let take_undo = match (from_index.peek(), from_undo.peek()) {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some((ik, _)), Some((uk, _))) => {
                if ik == uk {
                    from_index.next();
                    true
                } else {
                    uk < ik
                }
            }
        };
        let full = kvs.len() >= limit;
        if take_undo {
            let (_, then) = from_undo.next().expect("peeked");
            match then {
                Some(_) if full => remaining += 1,
                Some(kv) => kvs.push(kv.clone()),
                None => {}
            }
        } else {
            let (key, entry) = from_index.next().expect("peeked");
            if full {
                remaining += 1;
            } else {
                kvs.push(entry.to_kv(key));
            }
        }
    }
    ListResult {
        kvs,
        revision,
        remaining,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn apply_all(state: &mut State, ops: Vec<WriteOp>) -> Vec<Result<Event>> {
        let mut index = state.index.clone();
        let mut rev = state.revision;
        let mut events = Vec::new();
        let mut results = Vec::new();
        for op in ops {
            match apply(&mut index, rev.next(), &op) {
                Ok((e, _)) => {
                    rev = rev.next();
                    events.push(e.clone());
                    results.push(Ok(e));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        state.publish(index, events, Instant::now());
        state.check_invariants();
        results
    }

    #[test]
    fn failed_precondition_should_leave_the_index_unchanged() {
        let mut state = State::new(Index::new(), Revision::ZERO);
        apply_all(
            &mut state,
            vec![WriteOp::Create {
                key: b("/a"),
                value: b("1"),
            }],
        );
        let results = apply_all(
            &mut state,
            vec![
                WriteOp::Update {
                    key: b("/a"),
                    value: b("2"),
                    expected: Some(Revision(7)),
                },
                WriteOp::Delete {
                    key: b("/missing"),
                    expected: None,
                },
                WriteOp::Create {
                    key: b("/a"),
                    value: b("3"),
                },
            ],
        );
        assert!(matches!(results[0], Err(StoreError::Conflict { .. })));
        assert!(matches!(results[1], Err(StoreError::NotFound)));
        assert!(matches!(results[2], Err(StoreError::AlreadyExists { .. })));
        assert_eq!(state.revision, Revision(1));
        assert_eq!(state.index.get(&b("/a")).unwrap().value, b("1"));
    }

    #[test]
    fn list_at_an_old_revision_should_undo_later_changes() {
        let mut state = State::new(Index::new(), Revision::ZERO);
        apply_all(
            &mut state,
            vec![
                WriteOp::Create {
                    key: b("/p/a"),
                    value: b("a1"),
                },
                WriteOp::Create {
                    key: b("/p/b"),
                    value: b("b1"),
                },
            ],
        );
        apply_all(
            &mut state,
            vec![
                WriteOp::Update {
                    key: b("/p/a"),
                    value: b("a2"),
                    expected: None,
                },
                WriteOp::Delete {
                    key: b("/p/b"),
                    expected: None,
                },
                WriteOp::Create {
                    key: b("/p/c"),
                    value: b("c1"),
                },
                WriteOp::Update {
                    key: b("/p/a"),
                    value: b("a3"),
                    expected: None,
                },
            ],
        );
        let undo = state.undo_since(Revision(2), b"/p/");
        let old = list(
            &state.index,
            &undo,
            Revision(2),
            &ListRequest::prefix("/p/"),
        );
        let values: Vec<_> = old.kvs.iter().map(|kv| kv.value.clone()).collect();
        assert_eq!(values, vec![b("a1"), b("b1")]);

        let mut rolled = state.index.clone();
        roll_back(&mut rolled, state.history.range(2..));
        assert_eq!(rolled.len(), 2);
        assert_eq!(rolled.get(&b("/p/a")).unwrap().version, 1);
    }

    #[test]
    fn compact_should_drop_history_and_reject_bad_targets() {
        let mut state = State::new(Index::new(), Revision::ZERO);
        for i in 0..5 {
            apply_all(
                &mut state,
                vec![WriteOp::Create {
                    key: b(&format!("/k{i}")),
                    value: b("v"),
                }],
            );
        }
        assert!(matches!(
            state.compact(Revision(9)),
            Err(StoreError::FutureRevision { .. })
        ));
        assert_eq!(state.compact(Revision(3)).unwrap().len(), 3);
        state.check_invariants();
        assert!(matches!(
            state.compact(Revision(3)),
            Err(StoreError::Compacted { .. })
        ));
        assert!(matches!(
            state.check_readable(Revision(2)),
            Err(StoreError::Compacted { .. })
        ));
        assert!(state.check_readable(Revision(3)).is_ok());
        assert_eq!(state.commit_times.len(), 2);
    }
}
