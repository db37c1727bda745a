//! The values the [`Store`](crate::Store) trades in: key-values with their revisions, change
//! events, and list requests and results.

use bytes::Bytes;
use setpoint_core::Revision;

/// A key's value together with the revisions that describe its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Bytes,
    /// The value as written (empty in the `kv` of a delete event).
    pub value: Bytes,
    /// The revision at which this incarnation of the key was created. A key deleted and created
    /// again gets a new create revision.
    pub create_revision: Revision,
    /// The revision of the last change to the key: for a delete event, the deletion's revision.
    pub mod_revision: Revision,
    /// How many times this incarnation of the key has been written: 1 after create.
    pub version: u64,
}

/// What happened to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The key was created or updated.
    Put,
    /// The key was deleted.
    Delete,
}

/// One change, at one revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// After a put: the new key-value. After a delete: the key, an empty value, the deleted
    /// incarnation's create revision and version, and the deletion's revision as `mod_revision`.
    pub kv: KeyValue,
    /// The key-value just before this change; `None` when a put created the key.
    pub prev: Option<KeyValue>,
}

impl Event {
    /// The revision at which this change happened.
    #[must_use]
    pub fn revision(&self) -> Revision {
        self.kv.mod_revision
    }
}

/// What one step of a watch delivers.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct WatchBatch {
    /// Changes to keys under the watched prefix, in revision order; may be empty.
    pub events: Vec<Event>,
    /// Every change under the prefix with a revision up to and including `progress` has now been
    /// delivered (a batch with no events is a pure progress notification, which lets a cache
    /// know it is current without any change under its prefix).
    pub progress: Revision,
}

/// A range read: keys under `prefix`, at a revision, in key order, possibly one page at a time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListRequest {
    /// Only keys that start with this prefix (empty: every key).
    pub prefix: Bytes,
    /// Start at this key (inclusive) instead of at the start of the prefix; to continue a paged
    /// list, pass the last key returned followed by a `0` byte. Must start with `prefix`.
    pub start: Option<Bytes>,
    /// Read the state as of this revision; `None` reads the current state. `Some(Revision::ZERO)`
    /// is the empty state before the first write (while revision 0 is not compacted); an etcd
    /// backend must not pass it through as etcd's "latest".
    pub revision: Option<Revision>,
    /// Return at most this many key-values; `None` or `Some(0)` means no limit.
    pub limit: Option<usize>,
    /// The caller needs to know only whether keys are left after the page, not how many: the
    /// backend may then stop at the first one past the limit and answer `remaining: 1`.
    /// (Counting the rest walks the whole remainder of the range, on every page: reading a
    /// large range in pages that way takes time quadratic in its size.)
    pub only_more: bool,
}

impl ListRequest {
    /// Everything under `prefix` at the current revision.
    pub fn prefix(prefix: impl Into<Bytes>) -> Self {
        ListRequest {
            prefix: prefix.into(),
            ..Default::default()
        }
    }

    /// Reads at `revision` instead of the current state.
    #[must_use]
    pub fn at(mut self, revision: Revision) -> Self {
        self.revision = Some(revision);
        self
    }

    /// Returns at most `limit` key-values.
    #[must_use]
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Asks only whether keys are left after the page ([`ListRequest::only_more`]).
    #[must_use]
    pub fn only_more(mut self) -> Self {
        self.only_more = true;
        self
    }

    /// Starts at `start` (inclusive).
    #[must_use]
    pub fn start(mut self, start: impl Into<Bytes>) -> Self {
        self.start = Some(start.into());
        self
    }
}

/// The answer to a [`ListRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListResult {
    /// The key-values, in key order.
    pub kvs: Vec<KeyValue>,
    /// The revision the list was read at: the requested one, or the current one. A paged list
    /// passes it back as `ListRequest::revision` to read the next page from the same snapshot.
    pub revision: Revision,
    /// How many more keys the range holds after the last one returned (0 when complete); with
    /// [`ListRequest::only_more`], possibly just 1 for "some".
    pub remaining: u64,
}

impl ListResult {
    /// Whether keys are left after this page.
    #[must_use]
    pub fn more(&self) -> bool {
        self.remaining > 0
    }
}
