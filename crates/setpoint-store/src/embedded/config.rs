//! Settings of the embedded store.

use std::path::PathBuf;
use std::time::Duration;

/// How an [`EmbeddedStore`](super::EmbeddedStore) is opened and run.
#[derive(Clone, Debug)]
pub struct EmbeddedConfig {
    /// Where the log and snapshots live; `None` keeps everything in memory only (nothing is
    /// durable: for tests and throwaway servers).
    pub dir: Option<PathBuf>,
    /// Keep at least this many of the latest revisions in history, for watches and lists to
    /// resume from (subject also to `history_max_age`). Older history is compacted.
    pub history_revisions: u64,
    /// Compact history older than this, keeping at least `history_min_revisions` revisions.
    pub history_max_age: Duration,
    /// Never compact the newest this many revisions, however old.
    pub history_min_revisions: u64,
    /// How often the background compactor looks at the history; `None` turns automatic
    /// compaction (and snapshotting) off, leaving only [`Store::compact`](crate::Store::compact).
    pub compaction_interval: Option<Duration>,
    /// Start a new log segment when the current one reaches this size.
    pub segment_bytes: u64,
    /// Largest value accepted.
    pub max_value_bytes: usize,
    /// Most operations one group commit takes.
    pub max_batch_ops: usize,
}

impl EmbeddedConfig {
    /// A durable store in `dir`, with the default retention.
    pub fn on_disk(dir: impl Into<PathBuf>) -> Self {
        EmbeddedConfig {
            dir: Some(dir.into()),
            ..Self::in_memory()
        }
    }

    /// A store that keeps nothing on disk.
    pub fn in_memory() -> Self {
        EmbeddedConfig {
            dir: None,
            history_revisions: 25_000,
            history_max_age: Duration::from_secs(300),
            history_min_revisions: 1_000,
            compaction_interval: Some(Duration::from_secs(1)),
            segment_bytes: 16 << 20,
            max_value_bytes: 4 << 20,
            max_batch_ops: 4096,
        }
    }

    /// Turns automatic compaction off (tests that compare with a model compact by hand).
    #[must_use]
    pub fn without_auto_compaction(mut self) -> Self {
        self.compaction_interval = None;
        self
    }
}
