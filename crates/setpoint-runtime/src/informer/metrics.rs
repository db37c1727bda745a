//! [`InformerMetrics`]: counters describing one informer's list/watch activity and cache.

/// A snapshot of an informer's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InformerMetrics {
    /// Complete lists (initial and relists).
    pub lists_total: u64,
    /// Lists after the first (after a `410 Gone` or an error).
    pub relists_total: u64,
    /// Watch requests started (streaming lists included).
    pub watches_total: u64,
    /// Watches renewed after ending or failing.
    pub watch_restarts_total: u64,
    /// Failed lists and watches.
    pub watch_errors_total: u64,
    /// Watch events applied to the cache.
    pub events_total: u64,
    /// Objects cached now.
    pub objects: usize,
    /// Whether the first complete list has been applied.
    pub synced: bool,
}
