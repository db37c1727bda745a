//! Live heap, as the instrumented global allocator counts it: bytes requested and not yet
//! freed (allocator overhead not included), and allocations not yet freed.
//!
//! Everything in the process shares this heap — the API server included — so a benchmark
//! reads it when the process is quiet ([`settled`]) before and after the thing it measures,
//! and again after dropping that thing: the two differences should agree.

use std::ops::Sub;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the heap must stay within [`STABLE_BYTES`] to count as settled.
const STABLE_FOR: Duration = Duration::from_millis(300);
/// The change in live bytes over [`STABLE_FOR`] below which the heap is settled.
const STABLE_BYTES: i64 = 64 * 1024;
/// The longest wait for a settled heap; after it the last reading is taken as it is.
const SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// A reading of the live heap (or the difference of two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Heap {
    /// Bytes requested and not freed.
    pub(crate) bytes: i64,
    /// Allocations not freed.
    pub(crate) allocations: i64,
}

impl Sub for Heap {
    type Output = Heap;

    fn sub(self, rhs: Heap) -> Heap {
        Heap {
            bytes: self.bytes - rhs.bytes,
            allocations: self.allocations - rhs.allocations,
        }
    }
}

/// The live heap now.
pub(crate) fn now() -> Heap {
    let s = crate::GLOBAL.stats();
    // A reallocation adds its growth to `bytes_allocated` or its shrinkage to
    // `bytes_deallocated` (`bytes_reallocated` is the same change again, not to be added).
    let bytes = i64::try_from(s.bytes_allocated).unwrap_or(i64::MAX)
        - i64::try_from(s.bytes_deallocated).unwrap_or(i64::MAX);
    let allocations = i64::try_from(s.allocations).unwrap_or(i64::MAX)
        - i64::try_from(s.deallocations).unwrap_or(i64::MAX);
    Heap { bytes, allocations }
}

/// The live heap once background work has finished: read every [`STABLE_FOR`] until two
/// readings differ by less than [`STABLE_BYTES`] (at most [`SETTLE_LIMIT`]).
pub(crate) async fn settled() -> Heap {
    let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
    let mut last = now();
    loop {
        tokio::time::sleep(STABLE_FOR).await;
        let current = now();
        if (current.bytes - last.bytes).abs() < STABLE_BYTES
            || tokio::time::Instant::now() >= deadline
        {
            return current;
        }
        last = current;
    }
}

/// Samples live bytes every millisecond on its own thread and keeps the highest reading.
pub(crate) struct PeakSampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<i64>,
}

impl PeakSampler {
    /// Starts sampling.
    pub(crate) fn start() -> PeakSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = now().bytes;
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(now().bytes);
                std::thread::sleep(Duration::from_millis(1));
            }
            peak.max(now().bytes)
        });
        PeakSampler { stop, thread }
    }

    /// The highest live byte count seen since [`PeakSampler::start`].
    pub(crate) fn stop(self) -> i64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or(i64::MAX)
    }
}
